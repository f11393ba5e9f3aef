/**
 * `cairn-agents/engine`: everything needed to write a storage backend for Cairn. A backend is a
 * {@link StorageEngine}: it stores rows and strings and never parses payloads; {@link EngineStore}
 * turns it into a full `CheckpointStore` (codec, append-only lists, digests, validation,
 * migrations). The optional lease capability ({@link LeaseEngine}, the engine's `leases` field)
 * lets workers share the backend; {@link LeaseTable} implements it for engines whose rows live
 * in the process. Check a backend with `runEngineConformance` from `cairn-agents/testing`.
 *
 * Beside the SPI, the parts a backend or a store wrapper builds on: the in-process engines
 * (`MemoryEngine`, `FileEngine`), `DelegatingStore` (forward every call, override a few), the
 * lease protocol (`RunLeases`, `FencedStore`), the codec's tagged-value encoding, canonical
 * hashing, ids, the schema registry and the depth ceiling of decoding, and the optional-peer loader
 * (`importPeer`, `requirePeer`: a missing driver is a `MissingDependencyError`).
 *
 * @example
 * ```ts
 * import { EngineStore, type StorageEngine } from 'cairn-agents/engine'
 * class MyEngine implements StorageEngine { ... }
 * const store = new EngineStore(new MyEngine())
 * ```
 */
export type { CheckpointListing, CommitRequest, CommitResult, ListRange, RewriteRequest, RunLoad, StorageEngine } from './store/engine/storage-engine.js'
export { listRows } from './store/engine/storage-engine.js'
export type {
  CheckpointHeaderRow,
  CheckpointRow,
  EffectCompletionRow,
  EffectRow,
  ListAppend,
  ListRef,
  PendingWriteRow,
  RunChanged,
  RunPatch,
  RunRow,
  RunSwap,
} from './store/engine/rows.js'
export { RUN_DIGEST_FIELDS, runDigest, runProgressDigest, type RunDigestField } from './store/engine/run-digest.js'
export { applyRunPatch, RUN_CHANGED, swapFails } from './store/engine/run-patch.js'
export type {
  CancelOutcome,
  ClaimedRun,
  ClaimRequest,
  EnqueueJob,
  Fence,
  HeartbeatRequest,
  HeartbeatRow,
  LeaseEngine,
  LeaseRow,
  LeaseSubscription,
  ReleaseRequest,
  RequeueOutcome,
  RequeueRequest,
} from './store/engine/lease-engine.js'
export { CLAIMABLE_STATUSES } from './store/engine/lease-engine.js'
export type { AcquireOutcome, AcquireRequest } from './store/engine/lease-engine.js'
export { checkCommit, effectWrites, type CommitRefusal, type CommitView } from './store/engine/commit-checks.js'
export type { EffectStatus, ListCheckpointsQuery, ListRunsQuery, RunStatus } from './store/checkpoint-store.js'
export { compareCheckpointsNewestFirst, compareRunsNewestFirst, page, statusMatches } from './store/engine/row-order.js'
export { retainedListLengths } from './store/engine/list-retention.js'
export { LeaseTable, TableLeases, unleased, type LeaseEntry, type TableLeasesHost } from './store/leases/lease-table.js'
export { EngineStore, type EngineStoreOptions } from './store/engine-store.js'
export { importPeer, requirePeer, type OptionalPeer, type PeerRequest } from './core/peers.js'
export { DelegatingRunStore, DelegatingStore } from './store/delegating-store.js'
export { FencedStore, type FenceHooks } from './store/leases/fenced-store.js'
export { DEFAULT_QUEUE, RunLeases } from './store/leases/run-leases.js'
export { FINISHED_STATUSES, WAITING_STATUSES } from './store/checkpoint-store.js'
export { FileEngine } from './store/backends/file/file-engine.js'
export { MemoryEngine } from './store/backends/memory/memory-engine.js'
export { decodeValue, encodeValue, type DecodeContext } from './core/codec.js'
export { canonicalJson, sha256 } from './core/hash.js'
export { idTimestamp, newId } from './core/ids.js'
export { defaultSchemas, SchemaRegistry, type Migration, type UpgradeInput } from './core/schema.js'
export { MAX_DEPTH_CEILING } from './core/limits.js'
export { RUN_DOCUMENT_FORMAT } from './store/portable-run.js'
export { describeCheckpoints, runtimeOf, type TimelineContext } from './runner/timeline.js'
export { expandPhases, loadPhase, storedIdOf, type PhaseLog, type PhaseLogEntry } from './runner/phase-log.js'
export { MemoryEventLog } from './store/event-log/memory-event-log.js'
export { MemoryRunWaits } from './store/waits/memory-run-waits.js'
export type { ExternalEventRow, RunWaits, ScheduleRow, TakeEventRequest, TimerRow, WaitRow } from './store/waits/run-waits.js'
