import { createHash } from 'node:crypto'
import { readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { FileStore } from '../../src/index.js'
import { runStoreConformance } from '../../src/testing.js'

const directory = (location: string) => join(location, 'store')

/**
 * A run's log as its frames (`<check> <ids> <record>`), and writing frames back: with `rechain`,
 * every check is computed again and the head file brought up to the log, as someone who knows the
 * format would (then only the records' own digests can tell); without it, the frames stay as edited.
 */
async function logOf(location: string, runId: string) {
  const runDir = join(directory(location), 'runs', runId)
  const path = join(runDir, 'log.jsonl')
  const lines = (await readFile(path, 'utf8')).split('\n').slice(0, -1)
  return {
    lines,
    frameOf: (checkpointId: string) => {
      const at = lines.findIndex((line) => line.split(' ')[1]!.split(',').some((pair) => pair.endsWith(`:${checkpointId}`)))
      if (at < 0) throw new Error(`no frame holds checkpoint ${checkpointId}`)
      return at
    },
    write: async (rechain: boolean) => {
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
        await writeFile(join(runDir, 'head.json'), JSON.stringify({ ...head, h: check }))
      }
    },
  }
}

await runStoreConformance({
  name: 'file',
  open: (location) => new FileStore({ directory: directory(location), onWarning: () => {} }),
  childModule: fileURLToPath(new URL('../fixtures/open-file.ts', import.meta.url)),
  corrupt: async ({ location, runId, checkpointId, kind }) => {
    const log = await logOf(location, runId)
    const at = log.frameOf(checkpointId)
    const line = log.lines[at]!
    const record = line.indexOf(' {')
    switch (kind) {
      case 'truncate':
        // The frame lost its second half but is followed by its line end: a whole frame that fails its check.
        // (A last frame cut short without its line end is a write never acknowledged: see test/file-engine.test.ts.)
        log.lines[at] = line.slice(0, Math.floor((line.length + record) / 2))
        return log.write(false)
      case 'garble': {
        const offset = Math.floor((line.length + 2 * record) / 3)
        log.lines[at] = line.slice(0, offset) + '\u0000\u00ff{"]' + line.slice(offset + 5)
        return log.write(false)
      }
      case 'edit':
        log.lines[at] = line.replace('\\"n\\":4', '\\"n\\":40')
        if (log.lines[at] === line) throw new Error('the edit changed nothing')
        return log.write(true)
      case 'edit-list-item': {
        const item = log.lines.findIndex((frame) => frame.includes('m0:'))
        log.lines[item] = log.lines[item]!.replace('m0:', 'M0:')
        return log.write(true)
      }
    }
  },
})
