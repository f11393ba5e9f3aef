import { rm } from 'node:fs/promises'
import { join } from 'node:path'
import { CheckpointCorruptionError } from '../../../core/errors.js'
import type { PendingWriteRow } from '../../engine/rows.js'
import type { DirectoryState } from './directory-state.js'
import { ensureDirectory, readIfExists, syncDirectory } from './driver.js'
import { writeFileAtomic } from './file-batch.js'
import { idToName } from './file-names.js'

/**
 * The pending writes of a file store: one JSON file per checkpoint under the run's `writes/`,
 * holding that checkpoint's rows, replaced whole and atomically. The writing methods expect the
 * caller to hold the run's lock.
 */
export class FileWrites {
  readonly #dir: DirectoryState

  constructor(dir: DirectoryState) {
    this.#dir = dir
  }

  /** Merge rows into their checkpoints' files: the first regular write of a key wins, the newest special one. */
  async put(rows: readonly PendingWriteRow[]): Promise<void> {
    const byCheckpoint = new Map<string, PendingWriteRow[]>()
    for (const row of rows) byCheckpoint.set(row.checkpointId, [...(byCheckpoint.get(row.checkpointId) ?? []), row])
    for (const [checkpointId, incoming] of byCheckpoint) {
      const runId = incoming[0]!.runId
      const stored = new Map((await this.read(runId, checkpointId)).map((row) => [writeKey(row), row]))
      for (const row of incoming) {
        if (row.idx >= 0 && stored.has(writeKey(row))) continue
        stored.set(writeKey(row), row)
      }
      await ensureDirectory(this.#writesDir(runId))
      await writeFileAtomic(this.#file(runId, checkpointId), JSON.stringify([...stored.values()]))
    }
  }

  /** The rows of one checkpoint (none when it has no file). */
  async read(runId: string, checkpointId: string): Promise<PendingWriteRow[]> {
    const bytes = await readIfExists(this.#file(runId, checkpointId))
    if (bytes === undefined) return []
    try {
      const rows: unknown = JSON.parse(bytes.toString('utf8'))
      if (!Array.isArray(rows)) throw new CheckpointCorruptionError(`the pending writes of checkpoint ${checkpointId} of run ${runId} are not an array`, { runId, checkpointId })
      return rows as PendingWriteRow[]
    } catch (err) {
      throw new CheckpointCorruptionError(`the pending writes of checkpoint ${checkpointId} of run ${runId} are unreadable: ${(err as Error).message}`, {
        runId,
        checkpointId,
        cause: err,
      })
    }
  }

  /** Remove the files of these checkpoints. */
  async delete(runId: string, checkpointIds: readonly string[]): Promise<void> {
    for (const checkpointId of checkpointIds) await rm(this.#file(runId, checkpointId), { force: true })
    if (checkpointIds.length > 0) await syncDirectory(this.#writesDir(runId)).catch(() => undefined)
  }

  #writesDir(runId: string): string {
    return join(this.#dir.layout.runDir(runId), 'writes')
  }

  #file(runId: string, checkpointId: string): string {
    return join(this.#writesDir(runId), `${idToName(checkpointId, 'checkpointId')}.json`)
  }
}

function writeKey(row: PendingWriteRow): string {
  return JSON.stringify([row.taskId, row.idx])
}
