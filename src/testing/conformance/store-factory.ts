import type { CheckpointStore } from '../../store/checkpoint-store.js'

/** Ways the conformance suite damages a stored checkpoint to check it is reported, not used. */
export type CorruptionKind =
  /** Cut the stored checkpoint record (row or file) short. */
  | 'truncate'
  /** Overwrite part of the stored record with bytes that are not what Cairn wrote. */
  | 'garble'
  /** Change the stored record by hand into other valid JSON (e.g. edit a payload value). */
  | 'edit'
  /** Change one stored item of one of the checkpoint's append-only lists by hand. */
  | 'edit-list-item'

/**
 * How the conformance suite opens the store under test. One factory per backend.
 *
 * @example
 * ```ts
 * await runStoreConformance({
 *   name: 'sqlite',
 *   open: (location) => new SqliteStore({ path: join(location, 'cairn.db') }),
 *   childModule: new URL('./open-sqlite.js', import.meta.url).pathname,
 *   multiProcess: true,
 * })
 * ```
 */
export interface StoreFactory {
  name: string
  /**
   * Open (or reopen) the store kept at `location`, a fresh empty temp directory per test.
   * Opening the same location twice must give two handles on the same data, except for
   * in-memory stores, which set `persistent: false`.
   */
  open: (location: string) => CheckpointStore | Promise<CheckpointStore>
  /** False for a store whose data lives only in its process (reopen and crash tests are skipped). */
  persistent?: boolean
  /** False for a store without pending writes (`putPendingWrites`, `listPendingWrites`): their cases are skipped. */
  pendingWrites?: boolean
  /**
   * Absolute path of an ES module exporting `openStore(location: string): Promise<CheckpointStore>`,
   * which the suite loads in child processes (crash atomicity, two writers). Omit to skip those.
   */
  childModule?: string
  /** True when several processes may open one location at once (the two-process writer test). */
  multiProcess?: boolean
  /**
   * Damage checkpoint `checkpointId` of run `runId` as stored at `location` (the store handle is
   * closed first for persistent stores). Omit to skip the corruption tests.
   */
  corrupt?: (params: { location: string; store: CheckpointStore; runId: string; checkpointId: string; kind: CorruptionKind }) => Promise<void>
}
