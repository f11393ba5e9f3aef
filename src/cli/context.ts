import { CairnError, type CheckpointRecord, type CheckpointStore, type RunRecord } from '../index.js'
import { expandPhases, loadPhase } from '../engine.js'
import { CliError } from './cli-error.js'
import { openStore, type OpenOptions, type OpenStore } from './open-store.js'
import type { Output } from './output.js'

/** What every command gets: the store (opened on first use), lookups with one-line errors, the output. */
export interface Context {
  out: Output
  storeUrl: string
  /** The key ring the store is opened with (`CAIRN_KEYS`), if any. */
  keys: OpenOptions['keys']
  /** Whether what is written is encrypted (`--encrypt`, `CAIRN_ENCRYPT`). */
  encrypt: boolean
  store(options?: { create?: boolean }): Promise<CheckpointStore>
  opened(options?: { create?: boolean }): Promise<OpenStore>
  /** The run, or a one-line error naming it and how to list runs. */
  run(runId: string): Promise<RunRecord>
  /**
   * The checkpoint `ref` names, or a one-line error naming it: a checkpoint id, `RUN#N` (the
   * N-th checkpoint of RUN, as `cairn show RUN` numbers them), or `N` / `#N` within `runId`.
   */
  checkpoint(ref: string, runId?: string): Promise<CheckpointRecord>
  close(): Promise<void>
}

/** A context on the store at `storeUrl`, opened with `trust` (the keys and whether to encrypt). */
export function makeContext(storeUrl: string, out: Output, trust: Omit<OpenOptions, 'create'> = {}): Context {
  let opening: Promise<OpenStore> | undefined
  const opened = (options: { create?: boolean } = {}) => (opening ??= openStore(storeUrl, { ...trust, ...options }))
  const ctx: Context = {
    out,
    storeUrl,
    keys: trust.keys,
    encrypt: trust.encrypt === true,
    opened: (options = {}) => opened(options),
    store: async (options = {}) => (await opened(options)).store,
    async run(runId) {
      const run = await (await ctx.store()).getRun(runId)
      if (!run) throw new CliError(`run ${runId} is not in ${storeUrl}; list the runs with \`cairn runs\``)
      return run
    },
    async checkpoint(ref, runId) {
      const checkpointId = await resolveCheckpointRef(ctx, ref, runId)
      try {
        return await loadPhase(await ctx.store(), checkpointId)
      } catch (err) {
        if (err instanceof CairnError && err.code === 'checkpoint_not_found') {
          throw new CliError(`checkpoint ${checkpointId} is not in ${storeUrl}; see a run's checkpoints, with their ids and numbers, with \`cairn show RUN\``, { cause: err })
        }
        throw err
      }
    },
    async close() {
      if (opening) await (await opening.catch(() => undefined))?.store.close()
    },
  }
  return ctx
}

/** The id of the checkpoint `ref` names (see `Context.checkpoint`). */
async function resolveCheckpointRef(ctx: Context, ref: string, runId: string | undefined): Promise<string> {
  // Ids never hold '#'; a bare number is a checkpoint's id when one has it, else its number.
  const numbered = /^(?:(.+)#|#)?(\d+)$/.exec(ref)
  const run = numbered?.[1] ?? (numbered && runId)
  if (!numbered || !run) return ref
  const n = Number(numbered[2])
  await ctx.run(run)
  const headers = await (await ctx.store()).listCheckpoints({ runId: run })
  if (!ref.includes('#') && headers.some((header) => header.id === ref)) return ref
  // Numbered as `cairn show` numbers them: every phase, the light ones in phase logs too.
  const oldestFirst = [...headers].sort((a, b) => a.seq - b.seq).flatMap((header) => expandPhases(header))
  const found = oldestFirst[n - 1]
  if (n < 1 || !found) throw new CliError(`run ${run} has no checkpoint #${n}: it has ${oldestFirst.length}, numbered 1 to ${oldestFirst.length} by \`cairn show ${run}\``)
  return found.id
}
