import { CairnError, type CheckpointRecord, type CheckpointStore, type RunRecord } from '../index.js'
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
  /** The checkpoint, or a one-line error naming it. */
  checkpoint(checkpointId: string): Promise<CheckpointRecord>
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
    async checkpoint(checkpointId) {
      try {
        return await (await ctx.store()).load(checkpointId)
      } catch (err) {
        if (err instanceof CairnError && err.code === 'checkpoint_not_found') {
          throw new CliError(`checkpoint ${checkpointId} is not in ${storeUrl}; see a run's checkpoint ids with \`cairn show RUN --json\``, { cause: err })
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
