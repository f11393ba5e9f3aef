import { setTimeout as sleep } from 'node:timers/promises'
import { CairnError, CheckpointCorruptionError, CheckpointError, CheckpointIntegrityError, CheckpointNotFoundError, EffectStartedError, LeaseLostError, StoreError } from '../core/errors.js'
import { newId } from '../core/ids.js'
import { defaultSchemas, type SchemaRegistry } from '../core/schema.js'
import type {
  CheckpointInfo,
  CheckpointInput,
  CheckpointRecord,
  CheckpointStore,
  CreateRunInput,
  EffectCompletion,
  EffectCompletionResult,
  EffectIntent,
  EffectRecord,
  ForkOptions,
  LatestQuery,
  ListCheckpointsQuery,
  ListRunsQuery,
  LoadRunQuery,
  PendingWriteRecord,
  PruneOptions,
  PruneResult,
  PutPendingWritesInput,
  RunRecord,
  UpdateRunInput,
  WriteBatch,
} from './checkpoint-store.js'
import { encodeBatch } from './encoding/batch.js'
import { decodeWriteRow, orderWrites, writeRows } from './encoding/write-rows.js'
import { completionRow, decodeEffectRow, intentRow } from './encoding/effect-rows.js'
import type { CommitRequest, StorageEngine } from './engine/storage-engine.js'
import type { CheckpointHeaderRow, CheckpointRow, RunRow } from './engine/rows.js'
import { aheadOfRun, checkLatestAgainstRun } from './encoding/rollback.js'
import { FencedStore, type FenceHooks, type FencedCommit } from './leases/fenced-store.js'
import type { Fence } from './engine/lease-engine.js'
import { ListCacheLru } from './encoding/list-cache.js'
import { SharedOutputs } from './encoding/shared-outputs.js'
import { decodeMany, readFound, readRows, readRunRows } from './encoding/load-many.js'
import { pruneRun } from './prune.js'
import { RunLeases } from './leases/run-leases.js'
import { checkRow, decodeCheckedHeader, decodeHeader, listCacheOf, readStoredCheckpoint, toRecord } from './encoding/checkpoint-rows.js'
import { checkRunRow, decodeRunRow, encodeMetadata, toRunPatch } from './encoding/run-rows.js'
import { runDigest, runProgressDigest } from './engine/run-digest.js'
import { assertCheckpointInput, assertId, assertRunPatch, assertWellFormed } from './encoding/validate.js'
import { toKeyRing, type KeyInput, type KeyRing } from './trust/key-ring.js'
import { checkRunForRekey, rekeyRun, resealRun, type RekeyOptions, type RekeyResult } from './trust/rekey.js'
import { SealedEngine } from './trust/sealed-engine.js'

/** Options every engine-backed store accepts. */
export interface EngineStoreOptions {
  /** Schema registry used to upgrade records on load. Defaults to `defaultSchemas`. */
  schemas?: SchemaRegistry
  /** Memory the writer may keep of recently saved lists, to append without reading back. Default 64 MiB. */
  listCacheBytes?: number
  /**
   * Where warnings go: a corrupt record skipped by a listing that asked for it
   * (`unreadable: 'skip'`). Defaults to `process.emitWarning`.
   */
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

const MAX_SAVE_ATTEMPTS = 12

/**
 * A {@link CheckpointStore} over any {@link StorageEngine}: the one place where payloads are
 * encoded, split into append-only lists, hashed, validated and migrated. `MemoryStore`,
 * `FileStore` and `SqliteStore` are this class over their engines.
 */
export class EngineStore implements CheckpointStore {
  readonly #engine: StorageEngine
  readonly #schemas: SchemaRegistry
  readonly #cache: ListCacheLru
  readonly #shared = new SharedOutputs()
  readonly #runLocks = new Map<string, Promise<unknown>>()
  readonly #warn: (message: string) => void
  #closed = false
  #leases: RunLeases | undefined

  readonly #keyed: boolean

  constructor(engine: StorageEngine, options: EngineStoreOptions = {}) {
    if (options.encrypt === true && options.keys === undefined) {
      throw new CheckpointError('invalid_argument', 'encrypt: true needs keys: give the store a key ring ({ keys: [{ id, secret }] })')
    }
    this.#keyed = options.keys !== undefined
    this.#engine = options.keys === undefined ? engine : new SealedEngine(engine, { ring: toKeyRing(options.keys), encrypt: options.encrypt === true })
    this.#schemas = options.schemas ?? defaultSchemas
    this.#cache = new ListCacheLru(options.listCacheBytes ?? 64 * 1024 * 1024)
    this.#warn = options.onWarning ?? ((message) => process.emitWarning(message, 'CairnWarning'))
  }

  async createRun(input: CreateRunInput = {}): Promise<RunRecord> {
    const runId = input.runId ?? newId()
    assertId(runId, 'runId')
    const now = Date.now()
    const fields = {
      runId,
      status: input.status ?? 'running',
      name: input.name ?? null,
      threadId: input.threadId ?? null,
      workflowName: input.workflowName ?? null,
      configSignature: input.configSignature ?? null,
      lastSeq: 0,
      createdAt: now,
      updatedAt: now,
      metadata: encodeMetadata(input.metadata),
    }
    assertRunPatch(fields)
    const row = { ...fields, digest: runDigest(fields), seal: runProgressDigest(runId, 0) }
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
    const row = await this.#call(runId, 'update run', () => this.#engine.updateRun(runId, rowPatch))
    if (!row) throw new CheckpointNotFoundError(`run ${runId} does not exist`, { runId, code: 'run_not_found' })
    return decodeRunRow(row)
  }

  async save<P>(input: CheckpointInput<P>): Promise<string> {
    assertCheckpointInput(input)
    const [id] = await this.write({ runId: input.runId, checkpoints: [input] })
    return id!
  }

  async write(batch: WriteBatch): Promise<string[]> {
    if (batch.fence !== undefined) assertFence(batch.fence)
    return (await this.#write(batch, batch.fence)).ids
  }

  /**
   * The queue and lease protocol of this store's backend, for the worker layer
   * (`CairnClient`, `Worker`); undefined when the backend has none.
   */
  get leases(): RunLeases | undefined {
    const engine = this.#engine.leases
    if (!engine) return undefined
    this.#leases ??= new RunLeases(engine, (runId) => this.getRun(runId), (runId, what, fn) => this.#call(runId, what, fn))
    return this.#leases
  }

  /**
   * A view of this store whose every write carries `fence`: it is stored only while the fenced
   * run is still held by `fence.owner` at `fence.epoch`, checked under the same lock as the
   * write. A rejected write throws {@link LeaseLostError}, and the view then refuses every later
   * write without trying. Reads go straight to the store. The worker layer hands this view to the
   * runner of a claimed run.
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
      write: (batch) => this.#write(batch, fence),
      effects: async (runId, parts) => {
        const run = newRunRow(runId, null, Date.now(), 0)
        const request: CommitRequest = { rows: [], appends: [], run, fence, ...parts }
        const result = await this.#withRunLock(runId, () => this.#call(runId, 'write under a lease', () => this.#engine.commit(request)))
        if (result.ok) {
          this.#shared.remember(runId, parts.effects?.completions ?? [])
          return { cancelRequested: result.cancelRequested === true }
        }
        if (result.reason === 'fenced') throw new LeaseLostError(fence)
        if (result.reason === 'effect_not_pending') throw notPendingError(runId, result)
        throw new StoreError(`run ${runId}: an effects-only write was refused (${result.reason})`, { runId })
      },
    }
    return new FencedStore(this, fence, commit, hooks)
  }

  async #write(batch: WriteBatch, fence: Fence | undefined): Promise<{ ids: string[]; cancelRequested: boolean }> {
    const { runId } = batch
    assertId(runId, 'runId')
    const inputs = batch.checkpoints ?? []
    for (const input of inputs) {
      assertCheckpointInput(input)
      if (input.runId !== runId) throw new CheckpointError('invalid_argument', `a write to run ${runId} holds a checkpoint of run ${input.runId}`, { runId })
    }
    const effects = {
      intents: (batch.intents ?? []).map((intent) => intentRow(intent, runId)),
      completions: (batch.completions ?? []).map((completion) => completionRow(completion, runId)),
      ...(batch.starts === undefined || batch.starts.length === 0 ? {} : { starts: startIds(batch.starts) }),
    }
    const runPatch = batch.run === undefined ? undefined : toRunPatch(batch.run)
    return this.#withRunLock(runId, async () => {
      for (let attempt = 1; attempt <= MAX_SAVE_ATTEMPTS; attempt++) {
        // An effects-only write (an effect start, an outcome, a run change) encodes nothing.
        const share = inputs.length === 0 ? undefined : this.#shared.sharer(runId, effects.completions)
        const encoded = inputs.length === 0 ? undefined : encodeBatch(inputs, await this.#writerState(runId), this.#schemas, share)
        const { rows, appends, next } = encoded ?? { rows: [], appends: [], next: undefined }
        const run = newRunRow(runId, rows[0]?.workflowName ?? null, rows[0]?.createdAt ?? Date.now(), rows[rows.length - 1]?.seq ?? 0)
        const request: CommitRequest = { rows, appends, run, effects, ...(runPatch ? { runPatch } : {}), ...(fence ? { fence } : {}) }
        const result = await this.#call(runId, 'save checkpoint', () => this.#engine.commit(request))
        if (result.ok) {
          if (next) this.#cache.set(runId, next)
          this.#shared.remember(runId, effects.completions)
          return { ids: rows.map((row) => row.id), cancelRequested: result.cancelRequested === true }
        }
        if (result.reason === 'effect_not_pending') throw notPendingError(runId, result)
        this.#cache.delete(runId)
        if (result.reason === 'fenced') throw new LeaseLostError(fence!)
        const explicitSeq = inputs[0]?.seq !== undefined
        if (result.reason === 'duplicate_id') {
          throw new CheckpointError('invalid_argument', `a checkpoint id of this write already exists; omit id to get a fresh one`, { runId })
        }
        if (result.reason === 'stale_seq' && explicitSeq) {
          throw new CheckpointError(
            'seq_conflict',
            `run ${runId} is already at seq ${result.lastSeq}; a checkpoint with seq ${inputs[0]?.seq} would move its latest backwards (omit seq to append)`,
            { runId, checkpointId: rows[0]?.id },
          )
        }
        // Another writer got in first: back off with jitter so one warm writer cannot starve the other.
        await sleep(Math.random() * 2 ** attempt)
      }
      throw new StoreError(`run ${runId}: save kept conflicting with concurrent writers after ${MAX_SAVE_ATTEMPTS} attempts`, { runId })
    })
  }

  async startEffect(runId: string, callId: string): Promise<EffectRecord> {
    assertId(runId, 'runId')
    // A compare-and-set inside one commit: pending → started happens once.
    await this.#write({ runId, starts: [callId] }, undefined)
    const row = await this.#call(runId, `read effect ${callId}`, () => this.#engine.getEffect(runId, callId))
    return decodeEffectRow(row!)
  }

  async load<P = unknown>(checkpointId: string): Promise<CheckpointRecord<P>> {
    assertId(checkpointId, 'checkpointId')
    return this.#trusted(async () => {
      const row = await this.#call(undefined, `load checkpoint ${checkpointId}`, () => this.#engine.getCheckpoint(checkpointId))
      if (!row) throw new CheckpointNotFoundError(`checkpoint ${checkpointId} does not exist`, { checkpointId })
      return (await this.#decode(row)) as CheckpointRecord<P>
    })
  }

  async loadMany<P = unknown>(checkpointIds: readonly string[]): Promise<CheckpointRecord<P>[]> {
    const given: unknown = checkpointIds
    if (!Array.isArray(given)) throw new CheckpointError('invalid_argument', 'loadMany needs an array of checkpoint ids')
    for (const checkpointId of checkpointIds) assertId(checkpointId, 'checkpointId')
    return this.#trusted(async () => {
      const rows = await this.#call(undefined, `load ${checkpointIds.length} checkpoints`, () => readRows(this.#engine, checkpointIds))
      return (await this.#call(rows[0]?.runId, `read ${rows.length} checkpoints`, () => decodeMany(rows, this.#engine, this.#schemas))) as CheckpointRecord<P>[]
    })
  }

  async loadRun<P = unknown>(runId: string, query: LoadRunQuery = {}): Promise<CheckpointRecord<P>[]> {
    assertId(runId, 'runId')
    if (query.kind !== undefined && typeof query.kind !== 'string') throw new CheckpointError('invalid_argument', `kind must be a string, got ${typeof query.kind}`)
    return this.#trusted(async () => {
      // The row first, as for getLatest: the checkpoints read after it are never older than it says.
      const run = await this.#call(runId, 'read run', () => this.#engine.getRun(runId))
      const rows = await this.#call(runId, 'read the checkpoints of the run', () => readRunRows(this.#engine, runId))
      await this.#confirmLatest(runId, run, rows.at(-1))
      const wanted = query.kind === undefined ? rows : rows.filter((row) => row.kind === query.kind)
      return (await this.#call(runId, `read ${wanted.length} checkpoints`, () => decodeMany(wanted, this.#engine, this.#schemas))) as CheckpointRecord<P>[]
    })
  }

  async getLatest<P = unknown>(query: LatestQuery): Promise<CheckpointRecord<P> | undefined> {
    if (query.runId !== undefined) assertId(query.runId, 'runId')
    else if (typeof query.workflowName !== 'string' || query.workflowName === '') {
      throw new CheckpointError('invalid_argument', 'getLatest needs { runId } or { workflowName }')
    }
    const { runId, workflowName } = query
    return this.#trusted(async () => {
      let row: CheckpointRow | undefined
      // A workflow's latest is its newest checkpoint across runs, by time: what is left of it.
      if (runId !== undefined) row = await this.#latestOfRun(runId)
      else row = await this.#call(undefined, 'read latest checkpoint', () => this.#engine.getLatest({ workflowName }))
      return row && ((await this.#decode(row)) as CheckpointRecord<P>)
    })
  }

  async listCheckpoints(query: ListCheckpointsQuery = {}): Promise<CheckpointInfo[]> {
    assertLimit(query.limit)
    if (query.runId !== undefined) assertId(query.runId, 'runId')
    if (query.before !== undefined) assertId(query.before, 'before')
    const { verify = true, ...engineQuery } = query
    // A run's history read from its newest end must reach the seq the run row records.
    const run = verify && query.runId !== undefined && query.before === undefined && query.workflowName === undefined ? await this.#call(query.runId, 'read run', () => this.#engine.getRun(query.runId!)) : undefined
    if (!verify) return (await this.#call(query.runId, 'list checkpoints', () => this.#engine.listCheckpoints(engineQuery))).map(decodeHeader)
    return this.#trusted(async () => {
      const rows = await this.#call(query.runId, 'list checkpoints', () => listRows(this.#engine, engineQuery))
      if (run) checkRunRow(run)
      if (run && checkLatestAgainstRun(run, rows[0], run.runId) === 'ahead') await this.#latestOfRun(run.runId)
      return rows.flatMap((row) => {
        try {
          checkRow(row)
          return [decodeCheckedHeader(row)]
        } catch (err) {
          if (query.unreadable !== 'skip' || !(err instanceof CheckpointCorruptionError)) throw err
          this.#warn(`skipped checkpoint ${row.id} of run ${row.runId} while listing, as asked (unreadable: 'skip'): ${err.message}`)
          return []
        }
      })
    })
  }

  async delete(checkpointId: string): Promise<boolean> {
    assertId(checkpointId, 'checkpointId')
    const row = await this.#call(undefined, `read checkpoint ${checkpointId}`, () => this.#engine.getCheckpoint(checkpointId))
    if (!row) return false
    return this.#withRunLock(row.runId, async () => {
      this.#cache.delete(row.runId)
      const deleted = await this.#call(row.runId, 'delete checkpoint', () => this.#engine.deleteCheckpoints(row.runId, [checkpointId]))
      return deleted > 0
    })
  }

  async deleteRun(runId: string): Promise<boolean> {
    assertId(runId, 'runId')
    return this.#withRunLock(runId, async () => {
      this.#cache.delete(runId)
      this.#shared.forget(runId)
      return this.#call(runId, 'delete run', () => this.#engine.deleteRun(runId))
    })
  }

  async fork(options: ForkOptions): Promise<CheckpointRecord> {
    const source = await this.load(options.checkpointId)
    const sourceRun = await this.getRun(source.runId)
    const forkedFrom = { runId: source.runId, checkpointId: source.id }
    const run = await this.createRun({
      ...(options.runId === undefined ? {} : { runId: options.runId }),
      name: sourceRun?.name ?? null,
      threadId: sourceRun?.threadId ?? null,
      workflowName: source.workflowName,
      configSignature: sourceRun?.configSignature ?? null,
      metadata: { ...(options.metadata ?? {}), forkedFrom },
    })
    const id = await this.save({
      runId: run.runId,
      parentId: source.id,
      kind: source.kind,
      phase: source.phase,
      schemaVersion: source.schemaVersion,
      workflowName: source.workflowName,
      metadata: { ...source.metadata, forkedFrom },
      payload: source.payload,
    })
    return this.load(id)
  }

  async recordEffectIntent(intent: EffectIntent): Promise<EffectRecord> {
    const row = intentRow(intent, intent.runId)
    const stored = await this.#call(intent.runId, `record intent of ${intent.callId}`, () => this.#engine.recordEffectIntent(row))
    return decodeEffectRow(stored)
  }

  async completeEffect(completion: EffectCompletion): Promise<EffectCompletionResult> {
    const row = completionRow(completion, completion.runId)
    const result = await this.#call(completion.runId, `complete effect ${completion.callId}`, () => this.#engine.completeEffect(row))
    if (result.row?.output) this.#shared.remember(completion.runId, [{ callId: row.callId, output: result.row.output }])
    if (!result.row) {
      throw new CheckpointError(
        'invalid_argument',
        `run ${completion.runId} has no intent for effect ${completion.callId}; record the intent before the effect starts`,
        { runId: completion.runId },
      )
    }
    return { recorded: result.recorded, effect: decodeEffectRow(result.row) }
  }

  async getEffect(runId: string, callId: string): Promise<EffectRecord | undefined> {
    assertId(runId, 'runId')
    const row = await this.#call(runId, `read effect ${callId}`, () => this.#engine.getEffect(runId, callId))
    return row && decodeEffectRow(row)
  }

  async listEffects(runId: string): Promise<EffectRecord[]> {
    assertId(runId, 'runId')
    const rows = await this.#call(runId, 'list effects', () => this.#engine.listEffects(runId))
    return rows.map(decodeEffectRow)
  }

  async putPendingWrites(input: PutPendingWritesInput): Promise<void> {
    const rows = writeRows(input, Date.now())
    const putWrites = this.#engine.putWrites?.bind(this.#engine)
    if (!putWrites) throw noWritesError(input.runId)
    if (rows.length === 0) return
    await this.#call(input.runId, `store pending writes of checkpoint ${input.checkpointId}`, () => putWrites(rows))
  }

  async listPendingWrites(runId: string, checkpointIds: readonly string[]): Promise<PendingWriteRecord[]> {
    assertId(runId, 'runId')
    for (const checkpointId of checkpointIds) assertId(checkpointId, 'checkpointId')
    const listWrites = this.#engine.listWrites?.bind(this.#engine)
    if (!listWrites) throw noWritesError(runId)
    if (checkpointIds.length === 0) return []
    const rows = await this.#call(runId, 'read pending writes', () => listWrites(runId, checkpointIds))
    return orderWrites(rows.map(decodeWriteRow), checkpointIds)
  }

  async prune(options: PruneOptions = {}): Promise<PruneResult> {
    const keepLast = Math.max(1, options.keepLast ?? 1)
    if (!Number.isInteger(keepLast)) throw new CheckpointError('invalid_argument', `keepLast must be an integer, got ${String(options.keepLast)}`)
    const olderThan = options.olderThan === undefined ? undefined : Number(options.olderThan)
    if (olderThan !== undefined && Number.isNaN(olderThan)) throw new CheckpointError('invalid_argument', 'olderThan must be a Date or Unix milliseconds')
    const runIds = options.runId !== undefined ? [options.runId] : await this.#allRunIds()
    const total: PruneResult = { checkpointsDeleted: 0, effectsDeleted: 0 }
    for (const runId of runIds) {
      assertId(runId, 'runId')
      const result = await this.#withRunLock(runId, async () => {
        this.#cache.delete(runId)
        this.#shared.forget(runId)
        return this.#call(runId, 'prune', () => pruneRun(this.#engine, { runId, keepLast, olderThan }))
      })
      total.checkpointsDeleted += result.checkpointsDeleted
      total.effectsDeleted += result.effectsDeleted
    }
    return total
  }

  /**
   * Rewrite every record of the store under the key ring's writing key (the first key), and
   * encrypted or not as this store is configured: the step between adding a new key and dropping
   * the old one. Each record is verified before it is re-sealed. With `signUnsigned`, records
   * written before the store had keys are checked against their plain digests and signed: the
   * explicit step that turns signing on for an existing store. Safe to run again after a stop.
   *
   * @example
   * ```ts
   * const store = new SqliteStore({ path, keys: [newKey, oldKey], encrypt: true })
   * await store.rekey({ onProgress: (p) => console.log(`${p.runsDone}/${p.runsTotal} ${p.runId}`) })
   * // every record now verifies with newKey alone
   * ```
   */
  async rekey(options: RekeyOptions = {}): Promise<RekeyResult> {
    const engine = this.#engine
    if (!(engine instanceof SealedEngine)) throw new CheckpointError('invalid_argument', 'rekey needs a store opened with keys ({ keys: [newKey, ...oldKeys] })')
    const rewrite = engine.inner.rewrite?.bind(engine.inner)
    if (!rewrite) throw new CheckpointError('invalid_argument', 'this store backend cannot rewrite records in place, so it cannot be rekeyed')
    const runIds = await this.#allRunIds()
    const result: RekeyResult = { runs: 0, checkpoints: 0, items: 0, effects: 0 }
    for (const runId of runIds) {
      const request = await this.#withRunLock(runId, async () => {
        this.#cache.delete(runId)
        const before = await this.#trusted(() => this.#call(runId, 'check the run row', () => checkRunForRekey(engine, runId)))
        const request = await this.#trusted(() => this.#call(runId, 'rekey', () => rekeyRun(engine, runId, options)))
        await this.#call(runId, 'rewrite records under the new key', () => rewrite(request))
        await this.#call(runId, 'sign the run row under the new key', () => resealRun(engine, runId, before))
        return request
      })
      result.runs++
      result.checkpoints += request.checkpoints.length
      result.items += request.items.length
      result.effects += request.effects.length
      const rewritten = request.checkpoints.length + request.items.length + request.effects.length
      options.onProgress?.({ runId, runsDone: result.runs, runsTotal: runIds.length, rewritten })
    }
    return result
  }

  async close(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    await Promise.allSettled([...this.#runLocks.values()])
    await this.#engine.close()
  }

  /** Every run id, listed below the signing layer (a rekey lists runs whose rows it has yet to sign). */
  async #allRunIds(): Promise<string[]> {
    const engine = this.#engine instanceof SealedEngine ? this.#engine.inner : this.#engine
    const ids: string[] = []
    let before: string | undefined
    for (;;) {
      const page = await this.#call(undefined, 'list runs', () => engine.listRuns({ limit: 500, ...(before === undefined ? {} : { before }) }))
      ids.push(...page.map((run) => run.runId))
      if (page.length < 500) return ids
      before = page[page.length - 1]?.runId
    }
  }

  async #writerState(runId: string) {
    const cached = this.#cache.get(runId)
    if (cached) return cached
    return this.#trusted(() => this.#readWriterState(runId))
  }

  async #readWriterState(runId: string) {
    // No rollback check here: a save after `delete` of the newest checkpoints (a workflow run
    // continued from an earlier checkpoint it names) is the caller's explicit choice; a resume
    // finds the run through getLatest, which refuses it.
    const run = await this.#call(runId, 'read run', () => this.#engine.getRun(runId))
    if (run) checkRunRow(run)
    const latest = run && (await this.#call(runId, 'read latest checkpoint', () => this.#engine.getLatest({ runId })))
    const lists = latest ? listCacheOf(await this.#call(runId, 'read latest checkpoint', () => readStoredCheckpoint(latest, this.#engine))) : new Map()
    return { lastSeq: run?.lastSeq ?? 0, lastId: latest?.id ?? null, lists }
  }

  /** The run's newest checkpoint row, refused when the run was rolled back (see `checkLatestAgainstRun`). */
  async #latestOfRun(runId: string): Promise<CheckpointRow | undefined> {
    return (await this.#runAndLatest(runId)).latest
  }

  async #runAndLatest(runId: string): Promise<{ run: RunRow | undefined; latest: CheckpointRow | undefined }> {
    const engine = this.#engine
    if (engine.getRunAndLatest) {
      const read = await this.#call(runId, 'read run and latest checkpoint', () => engine.getRunAndLatest!(runId))
      return { run: await this.#confirmLatest(runId, read.run, read.latest), latest: read.latest }
    }
    // The row first: a commit writes both at once, so a checkpoint read after its row is never older.
    const run = await this.#call(runId, 'read run', () => engine.getRun(runId))
    const latest = await this.#call(runId, 'read latest checkpoint', () => engine.getLatest({ runId }))
    return { run: await this.#confirmLatest(runId, run, latest), latest }
  }

  /** The run row, checked, after checking the run's newest checkpoint against it (see `checkLatestAgainstRun`). */
  async #confirmLatest(runId: string, run: RunRow | undefined, latest: CheckpointHeaderRow | undefined): Promise<RunRow | undefined> {
    if (run) checkRunRow(run)
    if (checkLatestAgainstRun(run, latest, runId) !== 'ahead') return run
    // A commit may have landed between the two reads: the row read again has caught up.
    const again = await this.#call(runId, 'read run', () => this.#engine.getRun(runId))
    if (again) checkRunRow(again)
    if (checkLatestAgainstRun(again, latest, runId) === 'ahead') throw aheadOfRun(again, latest!, runId)
    return again
  }

  async #decode(row: CheckpointRow): Promise<CheckpointRecord> {
    const stored = await this.#call(row.runId, `read checkpoint ${row.id}`, () => readStoredCheckpoint(row, this.#engine))
    return toRecord(stored, this.#schemas)
  }

  /**
   * Run a read of checkpoints; in a keyed store, a record that fails any check (a list whose
   * items do not match the signed refs, a torn body) is an integrity failure, not mere corruption.
   */
  async #trusted<T>(read: () => Promise<T>): Promise<T> {
    if (!this.#keyed) return read()
    try {
      return await read()
    } catch (err) {
      if (!(err instanceof CheckpointCorruptionError) || err instanceof CheckpointIntegrityError) throw err
      throw new CheckpointIntegrityError(`${err.message} (this store verifies its records: nothing of this one is used)`, {
        runId: err.runId,
        checkpointId: err.checkpointId,
        cause: err,
      })
    }
  }

  async #withRunLock<T>(runId: string, fn: () => Promise<T>): Promise<T> {
    const previous = this.#runLocks.get(runId) ?? Promise.resolve()
    const next = previous.then(fn, fn)
    const settled = next.then(
      () => undefined,
      () => undefined,
    )
    this.#runLocks.set(runId, settled)
    try {
      return await next
    } finally {
      if (this.#runLocks.get(runId) === settled) this.#runLocks.delete(runId)
    }
  }

  async #call<T>(runId: string | undefined, what: string, fn: () => Promise<T>): Promise<T> {
    if (this.#closed) throw new StoreError(`cannot ${what}: the store is closed`, { runId, code: 'store_closed' })
    try {
      return await fn()
    } catch (err) {
      if (err instanceof CairnError) throw err
      const where = runId === undefined ? '' : ` (run ${runId})`
      throw new StoreError(`failed to ${what}${where}: ${(err as Error).message ?? String(err)}`, { runId, cause: err })
    }
  }
}

/**
 * The whole rows of a listing, in one read where the engine can; otherwise its headers and then
 * their rows (a row deleted between the two reads is gone, not hidden).
 */
async function listRows(engine: StorageEngine, query: Omit<ListCheckpointsQuery, 'verify'>): Promise<CheckpointRow[]> {
  if (engine.listCheckpointRows) return engine.listCheckpointRows(query)
  return readFound(engine, await engine.listCheckpoints(query))
}

/** The run a commit creates when it does not exist yet, with its digest and the progress digest of `seq`, the seq the commit leaves it at. */
function newRunRow(runId: string, workflowName: string | null, now: number, seq: number): RunRow {
  const row: RunRow = {
    runId,
    status: 'running' as const,
    name: null,
    threadId: null,
    workflowName,
    configSignature: null,
    lastSeq: 0,
    createdAt: now,
    updatedAt: now,
    metadata: '{}',
  }
  return { ...row, digest: runDigest(row), seal: runProgressDigest(runId, seq) }
}

function assertFence(fence: Fence): void {
  assertId(fence?.runId, 'runId')
  if (typeof fence.owner !== 'string' || fence.owner === '' || !Number.isSafeInteger(fence.epoch)) {
    throw new CheckpointError('invalid_argument', 'a fence needs a run id, a non-empty owner and an integer epoch', { runId: fence.runId })
  }
}

function startIds(starts: readonly string[]): string[] {
  for (const callId of starts) {
    if (typeof callId !== 'string' || callId === '') throw new CheckpointError('invalid_argument', `an effect start needs a call id, got ${JSON.stringify(callId)}`)
    assertWellFormed(callId, 'effect callId')
  }
  return [...starts]
}

/** The error of a commit whose effect start found the effect not `pending`. */
function notPendingError(runId: string, result: { callId: string; status: EffectRecord['status'] | null }): CairnError {
  if (result.status === null || result.status === 'pending') {
    return new CheckpointError('invalid_argument', `run ${runId} has no intent for effect ${result.callId}; record the intent before the effect starts`, { runId })
  }
  return new EffectStartedError({ runId, callId: result.callId, status: result.status })
}

function noWritesError(runId: string): CairnError {
  return new CheckpointError('invalid_argument', `run ${runId}: this store's backend has no place for pending writes; use a built-in store or give the engine putWrites and listWrites`, { runId })
}

function assertLimit(limit: number | undefined): void {
  if (limit !== undefined && (!Number.isInteger(limit) || limit < 1)) {
    throw new CheckpointError('invalid_argument', `limit must be a positive integer, got ${String(limit)}`)
  }
}
