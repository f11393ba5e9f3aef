import { createHash } from 'node:crypto'
import { readFile, rename, writeFile } from 'node:fs/promises'
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

/** A run's log folded into its rows as stored: what someone with write access to the directory sees. */
export interface RawRunLog {
  gen: number
  run: Record<string, unknown> | undefined
  checkpoints: Record<string, unknown>[]
  lists: Map<string, string[]>
  effects: Map<string, Record<string, unknown>>
  writes: Record<string, unknown>[]
}

/** Fold a run's log (every frame taken as it is, checks unread). */
export async function foldRunLog(directory: string, runId: string): Promise<RawRunLog> {
  const { lines } = await runLogOf(directory, runId)
  const folded: RawRunLog = { gen: 0, run: undefined, checkpoints: [], lists: new Map(), effects: new Map(), writes: [] }
  lines.forEach((line, at) => {
    const record = JSON.parse(line.split(' ').slice(2).join(' ')) as {
      g?: number
      r?: Record<string, unknown>
      a?: [string, number, string[]][]
      x?: 1
      e?: Record<string, unknown>[]
      w?: Record<string, unknown>[]
      c?: Record<string, unknown>[]
    }
    if (at === 0 && record.g !== undefined) folded.gen = record.g
    if (record.r) folded.run = record.r
    for (const [listId, from, items] of record.a ?? []) folded.lists.set(listId, [...(folded.lists.get(listId) ?? []).slice(0, from), ...items])
    if (record.x) folded.effects.clear()
    for (const effect of record.e ?? []) folded.effects.set(String(effect.callId), effect)
    for (const write of record.w ?? []) {
      // As the store keeps them: the first write of a key stays, a special one (idx < 0) is replaced.
      const at = folded.writes.findIndex((row) => row.checkpointId === write.checkpointId && row.taskId === write.taskId && row.idx === write.idx)
      if (at < 0) folded.writes.push(write)
      else if ((write.idx as number) < 0) folded.writes[at] = write
    }
    folded.checkpoints.push(...(record.c ?? []))
  })
  return folded
}

/**
 * Write a folded run back as a log of the same generation (its rows first, then a frame per
 * checkpoint) with every check computed and its head file matching, into a new file renamed over
 * the old one: a log the store takes as its own, whose rows only the store's own digests and
 * seals can tell from what it wrote.
 */
export async function writeRunLog(directory: string, runId: string, folded: RawRunLog): Promise<void> {
  const runDir = join(directory, 'runs', runId)
  const base: Record<string, unknown> = { g: folded.gen }
  if (folded.run) base.r = folded.run
  if (folded.lists.size > 0) base.a = [...folded.lists].map(([id, items]) => [id, 0, items])
  if (folded.effects.size > 0) base.e = [...folded.effects.values()]
  if (folded.writes.length > 0) base.w = folded.writes
  const records = [base, ...folded.checkpoints.map((row) => ({ c: [row] }))]
  let check = ''
  const lines = records.map((record) => {
    const rows = (record as { c?: Record<string, unknown>[] }).c
    const rest = `${rows ? rows.map((row) => `${String(row.seq)}:${String(row.id)}`).join(',') : '-'} ${JSON.stringify(record)}`
    check = createHash('sha256').update(check).update(' ').update(rest).digest('hex').slice(0, 32)
    return `${check} ${rest}\n`
  })
  await writeFile(join(runDir, 'log.jsonl.edit'), lines.join(''))
  await rename(join(runDir, 'log.jsonl.edit'), join(runDir, 'log.jsonl'))
  await writeFile(join(runDir, 'head.json'), JSON.stringify({ g: folded.gen, n: lines.length, h: check }))
}

/** Fold a run's log, let `edit` change its rows, and write it back (see {@link writeRunLog}). */
export async function editRunLog(directory: string, runId: string, edit: (folded: RawRunLog) => void): Promise<void> {
  const folded = await foldRunLog(directory, runId)
  edit(folded)
  await writeRunLog(directory, runId, folded)
}
