import { rm } from 'node:fs/promises'
import { join } from 'node:path'
import type { ListAppend } from '../../engine/rows.js'
import type { ListRange } from '../../engine/storage-engine.js'
import type { DirectoryState } from './directory-state.js'
import { ensureDirectory, listDirectory, readIfExists, readLines, scanLines, syncDirectory, truncateFile } from './driver.js'
import { type FileBatch, writeFileAtomic } from './file-batch.js'
import { parseListFileName } from './file-names.js'

/** How one list append will be written. */
export interface AppendPlan {
  append: ListAppend
  path: string
  /** Cut the file to this many bytes first: the tail a crashed save left. */
  truncateTo: number | undefined
}

/**
 * The append-only list files of a file store: `lists/<listId>.jsonl`, one item per line. A
 * checkpoint references the first n lines of a list, so lines past every reference (a save that
 * crashed before writing its checkpoint) are never read and are cut off by the next append.
 * What a list holds is kept in memory (lines and byte size) so appends never re-read the file;
 * a list not seen yet by this process is scanned once. Writing methods expect the run's lock.
 */
export class FileLists {
  readonly #dir: DirectoryState

  constructor(dir: DirectoryState) {
    this.#dir = dir
  }

  /** Check each append against its list file; `undefined` on a conflict. Writes nothing. */
  async plan(runId: string, appends: readonly ListAppend[]): Promise<AppendPlan[] | undefined> {
    const plans: AppendPlan[] = []
    for (const append of appends) {
      const path = this.#dir.layout.listFile(runId, append.listId)
      const known = this.#dir.lists.get(listKey(runId, append.listId))
      if (known) {
        if (known.lines !== append.expectedLength) return undefined
        plans.push({ append, path, truncateTo: undefined })
        continue
      }
      const bytes = await readIfExists(path)
      const scan = scanLines(bytes ?? Buffer.alloc(0), append.expectedLength)
      if (scan.lines < append.expectedLength) return undefined
      plans.push({ append, path, truncateTo: scan.size > scan.end ? scan.end : undefined })
    }
    return plans
  }

  /**
   * Stage planned appends in `batch`, which makes them durable (file and, for new files,
   * directory fsync) when published; call the returned function once it is, to remember the
   * lists' new lengths.
   */
  async stage(batch: FileBatch, runId: string, plans: readonly AppendPlan[]): Promise<() => void> {
    if (plans.length === 0) return () => undefined
    await ensureDirectory(this.#dir.layout.listsDir(runId))
    const sizes = plans.map(({ append, path, truncateTo }) => batch.append(path, append.items, truncateTo))
    return () => {
      for (const [i, { append }] of plans.entries()) {
        this.#dir.lists.set(listKey(runId, append.listId), { lines: append.expectedLength + append.items.length, bytes: sizes[i]! })
      }
    }
  }

  /** The first `n` complete lines of each referenced list, reading each file once. */
  async read(runId: string, refs: readonly ListRange[]): Promise<string[][]> {
    const wanted = new Map<string, number>()
    for (const ref of refs) wanted.set(ref.id, Math.max(wanted.get(ref.id) ?? 0, ref.n))
    const lines = new Map<string, string[]>()
    await Promise.all(
      [...wanted].map(async ([listId, n]) => {
        const bytes = await readIfExists(this.#dir.layout.listFile(runId, listId))
        lines.set(listId, bytes ? readLines(bytes, n) : [])
      }),
    )
    return refs.map((ref) => (lines.get(ref.id) ?? []).slice(ref.from ?? 0, Math.max(0, ref.n)))
  }

  /** Replace items in place: each list file is written anew (atomically), its complete lines kept. */
  async rewrite(runId: string, items: readonly { listId: string; idx: number; item: string }[]): Promise<void> {
    const byList = new Map<string, Map<number, string>>()
    for (const { listId, idx, item } of items) byList.set(listId, (byList.get(listId) ?? new Map<number, string>()).set(idx, item))
    for (const [listId, replaced] of byList) {
      const path = this.#dir.layout.listFile(runId, listId)
      const bytes = await readIfExists(path)
      if (!bytes) continue
      const lines = readLines(bytes, Number.MAX_SAFE_INTEGER).map((line, idx) => replaced.get(idx) ?? line)
      this.#dir.lists.delete(listKey(runId, listId))
      await writeFileAtomic(path, lines.map((line) => `${line}\n`).join(''))
    }
  }

  /** Cut each list file of the run to `keep` lines, removing those kept at none. */
  async collect(runId: string, keep: ReadonlyMap<string, number>): Promise<void> {
    const dir = this.#dir.layout.listsDir(runId)
    let removed = false
    for (const name of await listDirectory(dir)) {
      const listId = parseListFileName(name)
      if (listId === undefined) continue
      const key = listKey(runId, listId)
      const n = keep.get(listId) ?? 0
      const known = this.#dir.lists.get(key)
      if (n === 0) {
        this.#dir.lists.delete(key)
        await rm(join(dir, name), { force: true })
        removed = true
      } else if (!known || known.lines > n) {
        this.#dir.lists.delete(key)
        const bytes = await readIfExists(join(dir, name))
        const scan = scanLines(bytes ?? Buffer.alloc(0), n)
        if (scan.size > scan.end) await truncateFile(join(dir, name), scan.end)
        if (scan.lines === n) this.#dir.lists.set(key, { lines: n, bytes: scan.end })
      }
    }
    if (removed) await syncDirectory(dir)
  }
}

function listKey(runId: string, listId: string): string {
  return `${runId}\u0000${listId}`
}
