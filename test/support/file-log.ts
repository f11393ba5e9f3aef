import { createHash } from 'node:crypto'
import { readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'

/**
 * A FileStore run's log as its frames (`<check> <ids> <record>`, one a line), to damage it as a
 * disk or a person could. `write` puts the frames back: with `rechain`, every check is computed
 * again and the head file brought up to the log, as someone who knows the format would (then only
 * the records' own digests can tell); without it, the frames stay as edited.
 */
export async function runLogOf(directory: string, runId: string) {
  const runDir = join(directory, 'runs', runId)
  const path = join(runDir, 'log.jsonl')
  const lines = (await readFile(path, 'utf8')).split('\n').slice(0, -1)
  return {
    path,
    lines,
    /** The index of the frame holding a checkpoint. */
    frameOf(checkpointId: string): number {
      const at = lines.findIndex((line) => idsOf(line).some((pair) => pair.endsWith(`:${checkpointId}`)))
      if (at < 0) throw new Error(`no frame holds checkpoint ${checkpointId}`)
      return at
    },
    /** The indexes of the frames holding checkpoints. */
    checkpointFrames(): number[] {
      return lines.flatMap((line, at) => (idsOf(line).length > 0 ? [at] : []))
    },
    async write(rechain: boolean): Promise<void> {
      let check = ''
      const frames = lines.map((line) => {
        if (!rechain) return line
        const rest = line.slice(line.indexOf(' ') + 1)
        check = createHash('sha256').update(check).update(' ').update(rest).digest('hex').slice(0, 32)
        return `${check} ${rest}`
      })
      await writeFile(path, frames.map((line) => `${line}\n`).join(''))
      if (rechain) {
        const head = JSON.parse(await readFile(join(runDir, 'head.json'), 'utf8')) as { g: number; n: number; h: string }
        await writeFile(join(runDir, 'head.json'), JSON.stringify({ ...head, n: frames.length, h: check }))
      }
    },
  }
}

function idsOf(line: string): string[] {
  const ids = line.split(' ')[1] ?? '-'
  return ids === '-' ? [] : ids.split(',')
}
