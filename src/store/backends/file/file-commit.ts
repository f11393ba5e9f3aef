import { access } from 'node:fs/promises'
import { join } from 'node:path'
import { InvalidArgumentError } from '../../../core/errors.js'
import type { CommitRequest, CommitResult } from '../../engine/storage-engine.js'
import type { CheckpointRow, EffectRow, RunPatch, RunRow } from '../../engine/rows.js'
import { RUN_LOG_LIST } from '../../engine/list-retention.js'
import { checkCommit } from '../../engine/commit-checks.js'
import { applyRunPatch, carryProgress, swapFails } from '../../engine/run-patch.js'
import { lastSeqOf, type DirectoryState, type RunState } from './directory-state.js'
import type { EffectEdits, FileEffects } from './file-effects.js'
import type { FileLeases, FileRunAccess } from './file-leases.js'
import { ensureDirectory } from './driver.js'
import { FileBatch } from './file-batch.js'
import type { AppendPlan, FileLists } from './file-lists.js'
import { checkpointFileName, type CheckpointFile, type FileLayout } from './file-names.js'

/** What a {@link FileCommits} writes through: the run's lock and run.json, its lists, effects and leases. */
export interface FileCommitParts {
  runs: FileRunAccess
  lists: FileLists
  effects: FileEffects
  leases: FileLeases
}

/**
 * The commit of a file store (`StorageEngine.commit`). Files cannot change together atomically,
 * so a commit is one `FileBatch` whose files are renamed into place in an order that keeps every
 * prefix consistent: the effect files, the checkpoint files in seq order, then run.json (the new
 * last seq, with the run patch). The list lines they reference are appended and synced with the
 * temp files, before any rename. The whole batch costs one round of syncs; the run's log is
 * appended after it. A crash part-way leaves the effects and the first checkpoints of the batch,
 * each whole, with run.json behind them (which a reader takes as a crash's remains).
 */
export class FileCommits {
  readonly #dir: DirectoryState
  readonly #layout: FileLayout
  readonly #parts: FileCommitParts

  constructor(dir: DirectoryState, parts: FileCommitParts) {
    this.#dir = dir
    this.#layout = dir.layout
    this.#parts = parts
  }

  /** Commit `request`; a fence is checked first, under the run's lock (a claim skips a locked run). */
  async commit(request: CommitRequest): Promise<CommitResult> {
    const { rows, appends, run, effects, runPatch, fence } = request
    assertCommit(request, this.#layout)
    const leases = fence && (await this.#parts.leases.table())
    return this.#parts.runs.write(run.runId, async (state) => {
      if (state.error) throw state.error
      const held = fence && leases?.check(fence)
      if (held && !held.held) return { ok: false, reason: 'fenced' }
      const index = await this.#dir.index()
      const stored = new Map<string, EffectRow['status'] | undefined>()
      for (const callId of effects?.starts ?? []) stored.set(callId, (await this.#parts.effects.get(run.runId, callId))?.status)
      // The list lengths are checked as the appends are planned (below): a list file may hold a torn tail to cut.
      const refused = checkCommit(request, { lastSeq: lastSeqOf(state), hasCheckpoint: (id) => index.has(id), effectStatus: (callId) => stored.get(callId) })
      if (refused) return refused
      if (runPatch && swapFails(state.row ?? run, runPatch.swap)) return { ok: false, reason: 'run_changed' }
      const files = rows.map((row) => ({ seq: row.seq, id: row.id, name: checkpointFileName(row.seq, row.id) }))
      // Claim the ids before the next await, so a concurrent commit in another run cannot take them.
      for (const file of files) index.set(file.id, { runId: run.runId, file })
      try {
        const plans = await this.#parts.lists.plan(run.runId, appends)
        if (!plans) {
          for (const file of files) index.delete(file.id)
          return { ok: false, reason: 'list_conflict' }
        }
        // The journal first, outcomes included: a commit that fails after its effect files are
        // renamed leaves the journal ahead of the checkpoints (a resume takes the recorded
        // outcomes, runs nothing twice). The run's log vouches for what its entries record, so it
        // is appended last, once every change it records is in place: a reader (in this process
        // or another) that reads the log and then the rows never finds the log ahead of them. A
        // crash before leaves the log behind, which forgets a transition and never refuses a run
        // that was not rolled back.
        const logPlans = plans.filter((plan) => plan.append.listId === RUN_LOG_LIST)
        const edits = await this.#effectEdits(run.runId, effects)
        await this.#write({ state, rows, run, files, edits, runPatch, plans: plans.filter((plan) => !logPlans.includes(plan)) })
        await this.#appendLists(run.runId, logPlans)
        return held?.cancelRequested ? { ok: true, cancelRequested: true } : { ok: true }
      } catch (err) {
        for (const file of files) {
          if (!(await exists(join(this.#layout.checkpointsDir(run.runId), file.name)))) index.delete(file.id)
        }
        throw err
      }
    })
  }

  /**
   * A commit's effect files, as they will be written: an effect opened and completed in the same
   * commit (a caller that did not write its intent ahead) is written once, completed, so a crash
   * before the batch lands leaves no entry, as on a backend whose commit is one transaction.
   */
  async #effectEdits(runId: string, effects: CommitRequest['effects']): Promise<EffectEdits> {
    const edits: EffectEdits = new Map()
    for (const intent of effects?.intents ?? []) await this.#parts.effects.recordIntent(intent, edits)
    for (const callId of effects?.starts ?? []) await this.#parts.effects.start(runId, callId, edits)
    // A completion replaces its effect's edit, so an effect opened and completed here is written once.
    for (const completion of effects?.completions ?? []) await this.#parts.effects.complete(completion, edits)
    return edits
  }

  /** Append to list files in a batch of their own. */
  async #appendLists(runId: string, plans: readonly AppendPlan[]): Promise<void> {
    if (plans.length === 0) return
    const batch = new FileBatch()
    try {
      const written = await this.#parts.lists.stage(batch, runId, plans)
      await batch.publish()
      written()
    } catch (err) {
      batch.discard()
      throw err
    }
  }

  async #write(params: {
    state: RunState
    rows: readonly CheckpointRow[]
    run: RunRow
    files: CheckpointFile[]
    edits: EffectEdits
    runPatch: RunPatch | undefined
    plans: AppendPlan[]
  }): Promise<void> {
    const { state, rows, run, files, edits, runPatch, plans } = params
    if (!state.row) {
      // Written before the checkpoints: at the seq the files show now, its progress digest (given for the commit's last seq) carried there.
      const created = carryProgress({ ...run, lastSeq: rows[rows.length - 1]?.seq ?? run.lastSeq }, lastSeqOf(state))
      await this.#parts.runs.writeRunFile(created, true)
      state.row = created
    }
    const last = rows[rows.length - 1]
    // The progress digest (or signature) of the new last seq lands in the same write as the last seq.
    const seal = run.seal === undefined ? {} : { seal: run.seal }
    const advanced = last ? { ...state.row, lastSeq: last.seq, updatedAt: Math.max(state.row.updatedAt, last.createdAt), ...seal } : state.row
    const updated = runPatch ? applyRunPatch(advanced, runPatch) : advanced
    // The list lines and every file are synced together; only then are the files renamed into
    // place, so none appears before every line it references is durable.
    const batch = new FileBatch()
    try {
      if (edits.size > 0) await ensureDirectory(this.#layout.effectsDir(run.runId))
      for (const [path, stored] of edits) batch.replace(path, JSON.stringify(stored))
      const listsWritten = await this.#parts.lists.stage(batch, run.runId, plans)
      if (rows.length > 0) await ensureDirectory(this.#layout.checkpointsDir(run.runId))
      for (const [i, row] of rows.entries()) batch.replace(join(this.#layout.checkpointsDir(run.runId), files[i]!.name), JSON.stringify(row))
      if (updated !== state.row) batch.replace(this.#layout.runFile(run.runId), JSON.stringify(updated))
      await batch.publish()
      listsWritten()
    } catch (err) {
      batch.discard()
      throw err
    }
    // The new checkpoints and the row that records them appear to this process's readers at once
    // (no await between): a reader never pairs the old row with a newer checkpoint.
    state.checkpoints.push(...files)
    state.row = updated
    if (last) state.lagging = false
  }
}

/** Validate every id and item of a commit before anything touches the disk. */
function assertCommit({ rows, appends, run, effects }: CommitRequest, layout: FileLayout): void {
  layout.runDir(run.runId)
  for (const row of rows) {
    checkpointFileName(row.seq, row.id)
    if (!Number.isSafeInteger(row.seq) || row.seq < 1) {
      throw new InvalidArgumentError(`checkpoint seq must be a positive integer, got ${String(row.seq)}`, { runId: row.runId })
    }
    if (run.runId !== row.runId) {
      throw new InvalidArgumentError(`commit of run ${row.runId} carries a run row for ${run.runId}`, { runId: row.runId })
    }
  }
  for (const append of appends) {
    layout.listFile(run.runId, append.listId)
    if (append.items.some((item) => item.includes('\n'))) {
      throw new InvalidArgumentError(`list ${append.listId} of run ${run.runId}: an item contains a raw newline`, { runId: run.runId })
    }
  }
  for (const effect of [...(effects?.intents ?? []), ...(effects?.completions ?? [])]) {
    if (effect.runId !== run.runId) throw new InvalidArgumentError(`commit of run ${run.runId} carries an effect of run ${effect.runId}`)
    layout.effectFile(effect.runId, effect.callId)
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await access(path)
    return true
  } catch {
    return false
  }
}
