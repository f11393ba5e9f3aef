import { CairnError, CheckpointError, CheckpointIntegrityError, CheckpointNotFoundError, InvalidArgumentError, StoreError } from '../core/errors.js'
import { newId } from '../core/ids.js'
import { defaultSchemas, type SchemaRegistry } from '../core/schema.js'
import type { CheckpointInfo, CheckpointInput, CheckpointRecord, CheckpointStore, CreateRunInput, EffectCompletion, EffectCompletionResult, EffectIntent } from './checkpoint-store.js'
import type { EffectRecord, ForkOptions, LatestQuery, ListCheckpointsQuery, ListRunsQuery, LoadRunQuery, LoadTailsQuery, CheckpointTail, OpenedRun } from './checkpoint-store.js'
import type { OpenRunQuery, PendingWriteRecord, PruneOptions, PruneResult, PutPendingWritesInput, RunRecord, UpdateRunInput, WriteBatch } from './checkpoint-store.js'
import { decodeWriteRow, orderWrites, writeRows } from './encoding/write-rows.js'
import { completionRow, decodeEffectRow } from './encoding/effect-rows.js'
import type { StorageEngine } from './engine/storage-engine.js'
import type { EffectRow } from './engine/rows.js'
import { FencedStore, type FenceHooks, type FencedCommit } from './leases/fenced-store.js'
import type { Fence } from './engine/lease-engine.js'
import { RunLeases } from './leases/run-leases.js'
import { CheckpointWrites } from './checkpoint-writes.js'
import { changeRun, decodeRunRow, newRunRow, swapPatch, toRunPatch } from './encoding/run-rows.js'
import { assertCheckpointInput, assertFence, assertId } from './encoding/validate.js'
import { toKeyRing, type KeyInput, type KeyRing } from './trust/key-ring.js'
import { resealEvents, SealedEventLog } from './trust/sealed-event-log.js'
import type { RekeyOptions, RekeyResult } from './trust/rekey.js'
import { assertLimit, CheckpointReads, trustedRead, type StoreCore } from './checkpoint-reads.js'
import { forkRun, pruneRuns, rekeyRuns, type MaintenanceContext } from './store-maintenance.js'
import { SealedEngine } from './trust/sealed-engine.js'
import { RunLog } from './run-log.js'
import type { RunEventLog } from './event-log/run-event-log.js'
import type { RunWaits } from './waits/run-waits.js'

/** Options every engine-backed store accepts. */
export interface EngineStoreOptions {
  /** Schema registry used to upgrade records on load. Defaults to `defaultSchemas`. */
  schemas?: SchemaRegistry
  /** Where warnings go (a record a listing skipped with `unreadable: 'skip'`). Defaults to `process.emitWarning`. */
  onWarning?: (message: string) => void
  /**
   * Sign every record a resume trusts (HMAC-SHA-256) with the first key of this ring and verify
   * it on every read with any of them: a record that does not verify is a
   * `CheckpointIntegrityError`. See {@link KeyRing} (and `KeyRing.fromEnv()` for `CAIRN_KEYS`).
   */
  keys?: KeyRing | readonly KeyInput[]
  /** With `keys`: also encrypt payloads, list items and effect outputs (AES-256-GCM). Default false. */
  encrypt?: boolean
}

/**
 * A {@link CheckpointStore} over any {@link StorageEngine}: the one place where payloads are
 * encoded, split into append-only lists, hashed, validated and migrated. `MemoryStore`,
 * `FileStore` and `SqliteStore` are this class over their engines.
 */
export class EngineStore implements CheckpointStore {
  readonly #engine: StorageEngine
  readonly #core: StoreCore
  #closed = false
  #leases: RunLeases | undefined
  #events: RunEventLog | undefined
  #rawEvents: RunEventLog | undefined
  #waits: RunWaits | undefined
  readonly #encrypted: boolean
  readonly #ring: KeyRing | undefined
  readonly #reads: CheckpointReads
  readonly #log: RunLog
  readonly #writes: CheckpointWrites

  constructor(engine: StorageEngine, options: EngineStoreOptions = {}) {
    if (options.encrypt === true && options.keys === undefined) {
      throw new InvalidArgumentError('encrypt: true needs keys: give the store a key ring ({ keys: [{ id, secret }] })')
    }
    this.#encrypted = options.encrypt === true
    this.#ring = options.keys === undefined ? undefined : toKeyRing(options.keys)
    this.#engine = this.#ring === undefined ? engine : new SealedEngine(engine, { ring: this.#ring, encrypt: options.encrypt === true })
    const warn = options.onWarning ?? ((message: string) => process.emitWarning(message, 'CairnWarning'))
    const core = { engine: this.#engine, schemas: options.schemas ?? defaultSchemas, call: this.#call.bind(this), trusted: this.#trusted.bind(this), warn }
    this.#core = core
    this.#reads = new CheckpointReads(core)
    this.#log = new RunLog(this.#engine, core.call)
    this.#writes = new CheckpointWrites({ ...core, log: this.#log, writerState: (runId) => this.#trusted(() => this.#reads.writerState(runId)) })
  }

  async createRun(input: CreateRunInput = {}): Promise<RunRecord> {
    const runId = input.runId ?? newId()
    assertId(runId, 'runId')
    const row = newRunRow(runId, input)
    const inserted = await this.#call(runId, 'create run', () => this.#engine.insertRun(row))
    if (!inserted) {
      throw new CheckpointError('run_exists', `run ${runId} already exists; pick another runId or resume the existing run`, { runId })
    }
    return decodeRunRow(row)
  }

  async getRun(runId: string): Promise<RunRecord | undefined> {
    assertId(runId, 'runId')
    const row = await this.#call(runId, 'read run', () => this.#engine.getRun(runId))
    return row && decodeRunRow(row)
  }

  async listRuns(query: ListRunsQuery = {}): Promise<RunRecord[]> {
    assertLimit(query.limit)
    const rows = await this.#call(undefined, 'list runs', () => this.#engine.listRuns(query))
    return rows.map(decodeRunRow)
  }

  async updateRun(runId: string, patch: UpdateRunInput): Promise<RunRecord> {
    assertId(runId, 'runId')
    const rowPatch = toRunPatch(patch)
    const row = await this.#call(runId, 'update run', () => changeRun(runId, () => this.#engine.getRun(runId), (before) => this.#engine.updateRun(runId, swapPatch(before, rowPatch))))
    if (!row) throw new CheckpointNotFoundError(`run ${runId} does not exist`, { runId, code: 'run_not_found' })
    this.#writes.seen(runId, row)
    if (rowPatch.status !== undefined) await this.#writes.withRunLock(runId, () => this.#log.append(runId, [['status', rowPatch.status!]]))
    return decodeRunRow(row)
  }

  async save<P>(input: CheckpointInput<P>): Promise<string> {
    assertCheckpointInput(input)
    const [id] = await this.write({ runId: input.runId, checkpoints: [input] })
    return id!
  }

  async write(batch: WriteBatch): Promise<string[]> {
    if (batch.fence !== undefined) assertFence(batch.fence)
    return (await this.#writes.write(batch, batch.fence)).ids
  }

  /** The queue and lease protocol of this store's backend, for the worker layer; undefined when it has none. */
  get leases(): RunLeases | undefined {
    const engine = this.#engine.leases
    if (!engine) return undefined
    this.#leases ??= new RunLeases(engine, (runId) => this.#call(runId, 'read run', () => this.#engine.getRun(runId)), (runId, what, fn) => this.#call(runId, what, fn), {
      append: (runId, entries) => this.#writes.withRunLock(runId, () => this.#log.append(runId, entries)),
      checkStatus: (runId, status) => this.#trusted(() => this.#log.checkStatus(runId, status)),
      forget: (runId) => this.#log.forget(runId),
    })
    return this.#leases
  }

  /** The runs' event logs; on an encrypted store every event is encrypted, as its checkpoints are. */
  get events(): RunEventLog | undefined {
    return this.#events
  }

  /** Timers, external events and schedules (see {@link RunWaits}); undefined for a store without them. */
  get waits(): RunWaits | undefined {
    return this.#waits
  }

  /** Give the store what runs wait for (each backend's store does, in its constructor); closed with the store. */
  protected useRunWaits(waits: RunWaits): void {
    this.#waits = waits
  }

  /** Give the store its event log (each backend's store does, in its constructor); closed with the store. */
  protected useEventLog(log: RunEventLog): void {
    this.#rawEvents = log
    this.#events = this.#encrypted && this.#ring !== undefined ? new SealedEventLog(log, this.#ring) : log
  }

  /**
   * A view of this store whose every write carries `fence` (see {@link WriteBatch.fence}): once a
   * write is rejected with {@link LeaseLostError}, the view refuses every later one without
   * trying. Reads go straight to the store.
   *
   * @example
   * ```ts
   * const [claimed] = await store.leases!.claim({ owner: 'w1', limit: 1, leaseMs: 30_000 })
   * const view = store.fenced(claimed.fence, { onLost: () => controller.abort() })
   * await view.save({ runId: claimed.run.runId, kind: 'demo', phase: 'p', payload: 1 }) // throws LeaseLostError once taken over
   * ```
   */
  fenced(fence: Fence, hooks: FenceHooks = {}): FencedStore {
    assertFence(fence)
    const commit: FencedCommit = {
      write: (batch) => this.#writes.write(batch, fence),
      effects: (runId, parts) => this.#writes.effects(runId, parts, fence),
    }
    return new FencedStore(this, fence, commit, hooks)
  }

  async openRun<P = unknown>(runId: string, query: OpenRunQuery = {}): Promise<OpenedRun<P>> {
    assertId(runId, 'runId')
    const opened = await this.#reads.openRun(runId, query)
    // What a resume read is where its first write goes on from: no read of the run before it.
    this.#writes.seen(runId, opened.run, opened.writer, opened.latest?.terminal === true)
    this.#log.remember(runId, opened.logLength)
    return {
      run: opened.run && decodeRunRow(opened.run),
      latest: opened.latest as CheckpointRecord<P> | undefined,
      base: opened.base as CheckpointRecord<P> | undefined,
      effects: opened.effects.map(decodeEffectRow),
    }
  }

  load<P = unknown>(checkpointId: string): Promise<CheckpointRecord<P>> {
    return this.#reads.load(checkpointId)
  }

  loadMany<P = unknown>(checkpointIds: readonly string[]): Promise<CheckpointRecord<P>[]> {
    return this.#reads.loadMany(checkpointIds)
  }

  loadTails<P = unknown>(checkpointIds: readonly string[], query: LoadTailsQuery): Promise<CheckpointTail<P>[]> {
    return this.#reads.loadTails(checkpointIds, query)
  }

  loadRun<P = unknown>(runId: string, query: LoadRunQuery = {}): Promise<CheckpointRecord<P>[]> {
    return this.#reads.loadRun(runId, query)
  }

  getLatest<P = unknown>(query: LatestQuery): Promise<CheckpointRecord<P> | undefined> {
    return this.#reads.getLatest(query)
  }

  listCheckpoints(query: ListCheckpointsQuery = {}): Promise<CheckpointInfo[]> {
    return this.#reads.listCheckpoints(query)
  }

  async delete(checkpointId: string): Promise<boolean> {
    assertId(checkpointId, 'checkpointId')
    const [row] = await this.#call(undefined, `read checkpoint ${checkpointId}`, () => this.#engine.getCheckpoints([checkpointId]))
    if (!row) return false
    return this.#writes.withRunLock(row.runId, async () => {
      this.#writes.forget(row.runId)
      return (await this.#call(row.runId, 'delete checkpoint', () => this.#engine.deleteCheckpoints(row.runId, [checkpointId]))) > 0
    })
  }

  async deleteRun(runId: string): Promise<boolean> {
    assertId(runId, 'runId')
    return this.#writes.withRunLock(runId, async () => {
      this.#writes.forget(runId)
      const deleted = await this.#call(runId, 'delete run', () => this.#engine.deleteRun(runId))
      const events = (await this.#events?.deleteRun(runId)) ?? 0
      await this.#waits?.clearRun(runId)
      return deleted || events > 0
    })
  }

  fork(options: ForkOptions): Promise<CheckpointRecord> {
    return forkRun(this, options)
  }

  /** An intent in a commit of its own; the row as stored after it (one more attempt when it was there). */
  async recordEffectIntent(intent: EffectIntent): Promise<EffectRecord> {
    assertId(intent.runId, 'runId')
    await this.#writes.write({ runId: intent.runId, intents: [intent] }, undefined)
    return (await this.#effectRow(intent.runId, intent.callId))!
  }

  async startEffect(runId: string, callId: string): Promise<EffectRecord> {
    assertId(runId, 'runId')
    // A compare-and-set inside one commit: pending → started happens once.
    await this.#writes.write({ runId, starts: [callId] }, undefined)
    return (await this.#effectRow(runId, callId))!
  }

  async completeEffect(completion: EffectCompletion): Promise<EffectCompletionResult> {
    const { runId, callId } = completion
    assertId(runId, 'runId')
    const sent = completionRow(completion, runId)
    const before = await this.#effectRow(runId, callId)
    if (!before) throw new InvalidArgumentError(`run ${runId} has no intent for effect ${callId}; record the intent before the effect starts`, { runId })
    if (before.status !== 'pending' && before.status !== 'started') return { recorded: false, effect: before }
    await this.#writes.write({ runId, completions: [completion] }, undefined)
    const effect = (await this.#effectRow(runId, callId))!
    // Recorded when this outcome is the one stored (another writer's may have landed first).
    const recorded = effect.status === completion.status && effect.completedAt !== null && effect.completedAt >= sent.completedAt && sent.outputHash.includes(effect.outputHash ?? '\u0000')
    return { recorded, effect }
  }

  async getEffect(runId: string, callId: string): Promise<EffectRecord | undefined> {
    const [row] = await this.#checkedEffects(runId, [callId], `read effect ${callId}`)
    return row && decodeEffectRow(row)
  }

  async getEffects(runId: string, callIds: readonly string[]): Promise<EffectRecord[]> {
    for (const callId of callIds) assertId(callId, 'callId')
    const byId = new Map((await this.#checkedEffects(runId, callIds, `read ${callIds.length} effects`)).map((row) => [row.callId, row]))
    return callIds.flatMap((callId) => byId.get(callId) ?? []).map(decodeEffectRow)
  }

  async listEffects(runId: string): Promise<EffectRecord[]> {
    return (await this.#checkedEffects(runId, undefined, 'list effects')).map(decodeEffectRow)
  }

  async putPendingWrites(input: PutPendingWritesInput): Promise<void> {
    const rows = writeRows(input, Date.now())
    const engine = this.#writesEngine(input.runId)
    if (rows.length > 0) await this.#call(input.runId, `store pending writes of checkpoint ${input.checkpointId}`, () => engine.putWrites!(rows))
  }

  async listPendingWrites(runId: string, checkpointIds: readonly string[]): Promise<PendingWriteRecord[]> {
    assertId(runId, 'runId')
    for (const checkpointId of checkpointIds) assertId(checkpointId, 'checkpointId')
    const engine = this.#writesEngine(runId)
    if (checkpointIds.length === 0) return []
    const rows = await this.#call(runId, 'read pending writes', () => engine.listWrites!(runId, checkpointIds))
    return orderWrites(rows.map(decodeWriteRow), checkpointIds)
  }

  prune(options: PruneOptions = {}): Promise<PruneResult> {
    return pruneRuns(this.#maintenance(), options)
  }

  /**
   * Rewrite every record of the store under the key ring's writing key (the first key), encrypted
   * or not as this store is configured: the step between adding a new key and dropping the old
   * one. Each record is verified before it is re-sealed. Turning encryption on or off needs
   * `encrypt: true` or `decrypt: true` (else an `EncryptionChangeError` before that run is
   * written); `signUnsigned` signs records written before the store had keys. Safe to run again.
   *
   * @example
   * ```ts
   * const store = new SqliteStore({ path, keys: [newKey, oldKey], encrypt: true })
   * await store.rekey({ onProgress: (p) => console.log(`${p.runsDone}/${p.runsTotal} ${p.runId}`) })
   * // every record now verifies with newKey alone
   * ```
   */
  rekey(options: RekeyOptions = {}): Promise<RekeyResult> {
    return rekeyRuns(this.#maintenance(), options)
  }

  async close(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    await this.#writes.settled()
    await this.#events?.close()
    await this.#waits?.close()
    await this.#engine.close()
  }

  #maintenance(): MaintenanceContext {
    return {
      ...this.#core,
      writes: this.#writes,
      log: this.#log,
      events: this.#events,
      resealEvents: async (runId, encrypt) => (this.#rawEvents && this.#ring ? resealEvents(this.#rawEvents, this.#ring, runId, encrypt) : 0),
    }
  }

  /** The engine, when it has a place for pending writes. */
  #writesEngine(runId: string): StorageEngine {
    if (this.#engine.putWrites && this.#engine.listWrites) return this.#engine
    throw new InvalidArgumentError(`run ${runId}: this store's backend has no place for pending writes; use a built-in store or give the engine putWrites and listWrites`, { runId })
  }

  /** An effect's row as stored now (after a write of this store), decoded. */
  async #effectRow(runId: string, callId: string): Promise<EffectRecord | undefined> {
    const [row] = await this.#call(runId, `read effect ${callId}`, () => this.#engine.listEffects(runId, [callId]))
    return row && decodeEffectRow(row)
  }

  /** The run's effect rows (those of `callIds` when given), checked against its log: a row put back to pending or deleted is refused, never run again. */
  #checkedEffects(runId: string, callIds: readonly string[] | undefined, what: string): Promise<EffectRow[]> {
    assertId(runId, 'runId')
    const read = () => this.#call(runId, what, () => this.#engine.listEffects(runId, callIds))
    return this.#trusted(() => this.#log.checkEffects(runId, read, callIds && new Set(callIds)))
  }

  /** A read of checkpoints; in a keyed store a record that fails any check is an integrity failure (see {@link trustedRead}). */
  #trusted<T>(read: () => Promise<T>): Promise<T> {
    return this.#ring ? trustedRead(read) : read()
  }

  async #call<T>(runId: string | undefined, what: string, fn: () => Promise<T>): Promise<T> {
    if (this.#closed) throw new StoreError(`cannot ${what}: the store is closed`, { runId, code: 'store_closed' })
    try {
      return await fn()
    } catch (err) {
      // A record that does not verify under a key whose secret is not the store's: a wrong key.
      if (err instanceof CheckpointIntegrityError && this.#engine instanceof SealedEngine) throw await this.#engine.explainIntegrity(err)
      if (err instanceof CairnError) throw err
      const where = runId === undefined ? '' : ` (run ${runId})`
      throw new StoreError(`failed to ${what}${where}: ${(err as Error).message ?? String(err)}`, { runId, cause: err })
    }
  }
}

