import { InvalidArgumentError, WrongKeyError, type CairnError, type CheckpointIntegrityError } from '../../core/errors.js'
import type { ListRunsQuery } from '../checkpoint-store.js'
import { listRows, type CheckpointListing, type CommitRequest, type CommitResult, type ListRange, type RunLoad, type StorageEngine } from '../engine/storage-engine.js'
import { requeueAll, type AcquireOutcome, type AcquireRequest, type CancelOutcome, type ClaimRequest, type ClaimedRun, type LeaseEngine, type LeaseSubscription, type ReleaseRequest, type RequeueOutcome, type RequeueRequest } from '../engine/lease-engine.js'
import type { CheckpointHeaderRow, CheckpointRow, EffectRow, PendingWriteRow, RunChanged, RunPatch, RunRow, RunSwap } from '../engine/rows.js'
import { runDigest, runProgressDigest } from '../engine/run-digest.js'
import type { KeyRing } from './key-ring.js'
import { keyCheckValue } from './seal.js'
import { RecordSeal } from './record-seal.js'
import { isRunChanged } from '../encoding/run-rows.js'
import { runFieldsSeal, runSeal, sealCoversEarlier, sealNewRun, signedPatch, verifyRunFields, verifyRunSeal } from './run-seal.js'

/** Most checkpoints one commit can leave ahead of its run row when a crash cuts it short. */
const LAGGING_COMMIT_LIMIT = 16
/** Most times a read of a run row and its newest checkpoint is made again while commits land in between. */
const CATCH_UP_READS = 8
const NO_WRITES = 'this store backend has no place for pending writes; use a built-in store or give the engine putWrites and listWrites'

/**
 * A {@link StorageEngine} that signs (and, with `encrypt`, encrypts) every record a resume
 * trusts on its way into the engine below, and verifies (and decrypts) it on the way out, so
 * every backend gets the same protection from one place: records one at a time
 * ({@link RecordSeal}), run rows by their progress and field signatures (`run-seal.ts`). The
 * engine below compares and stores strings; it computes nothing. A run row's update time, list
 * headers and lease columns pass through unchanged.
 */
export class SealedEngine implements StorageEngine {
  /** The key ring records are signed with. */
  readonly ring: KeyRing
  /** How each record is sealed and opened. */
  readonly records: RecordSeal
  #leases: SealedLeases | undefined
  #writerChecked = false

  /**
   * `inner` is the engine below, for administration (rekeying) that moves sealed rows as they
   * are; `encrypt` encrypts payloads, list items and effect outputs (signing is always on).
   */
  constructor(readonly inner: StorageEngine, { ring, encrypt }: { ring: KeyRing; encrypt: boolean }) {
    this.ring = ring
    this.records = new RecordSeal(ring, encrypt)
  }

  get leases(): LeaseEngine | undefined {
    if (!this.inner.leases) return undefined
    this.#leases ??= new SealedLeases(this.inner.leases, this)
    return this.#leases
  }

  /**
   * Before the first write: store the writing key's check value, or, when the store holds
   * another value for its key id, throw {@link WrongKeyError} (a wrong secret writes nothing).
   * Once per engine; a store whose engine keeps no check values is not checked.
   */
  async checkWritingKey(): Promise<void> {
    if (this.#writerChecked) return
    const key = this.ring.writer()
    const mine = keyCheckValue(key)
    if (this.inner.putKeyCheck && (await this.inner.putKeyCheck(key.id, mine)) !== mine) throw new WrongKeyError({ keyId: key.id })
    this.#writerChecked = true
  }

  /**
   * What to report for a record that does not verify: a {@link WrongKeyError} when the store's
   * check value for the key it names is not that of the ring's secret, else `err` (tampering).
   */
  async explainIntegrity(err: CheckpointIntegrityError): Promise<CairnError> {
    const key = err.keyId === undefined ? undefined : this.ring.key(err.keyId)
    if (!key || !this.inner.getKeyCheck) return err
    const stored = await this.inner.getKeyCheck(key.id)
    return stored !== undefined && stored !== keyCheckValue(key) ? new WrongKeyError({ keyId: key.id, cause: err }) : err
  }

  async insertRun(row: RunRow): Promise<boolean> {
    await this.checkWritingKey()
    return this.inner.insertRun(sealNewRun(this.ring, row))
  }

  async getRun(runId: string): Promise<RunRow | undefined> {
    const row = await this.inner.getRun(runId)
    return row && this.openRun(row)
  }

  async listRuns(query: ListRunsQuery): Promise<RunRow[]> {
    return Promise.all((await this.inner.listRuns(query)).map(async (row) => this.openRun(row)))
  }

  async updateRun(runId: string, patch: RunPatch): Promise<RunRow | RunChanged | undefined> {
    await this.checkWritingKey()
    // The seal is the commit's to write, never a caller's; the swap is re-signed from the stored row.
    const { seal: _seal, ...fields } = patch
    const stored = await this.inner.getRun(runId)
    if (!stored) return undefined
    const signed = signedPatch(this.ring, stored, fields)
    if (isRunChanged(signed)) return signed
    const row = await this.inner.updateRun(runId, signed)
    return row && !('outcome' in row) ? this.openRun(row) : row
  }

  deleteRun: StorageEngine['deleteRun'] = (runId) => this.inner.deleteRun(runId)

  async commit(request: CommitRequest): Promise<CommitResult> {
    if (!this.#writerChecked) await this.checkWritingKey()
    const { effects, run: { runId } } = request
    const records = this.records
    const rows = request.rows.map((row) => records.sealCheckpoint(row))
    const newest = rows[rows.length - 1]
    // A commit that advances the run writes the signature of its new last seq and newest checkpoint with them.
    const run = { ...request.run, seal: runSeal(this.ring, runId, newest?.seq ?? 0, newest), digest: runFieldsSeal(this.ring, request.run) }
    const sealed: CommitRequest = { ...request, rows, appends: request.appends.map((append) => records.sealAppend(runId, append)), run }
    if (request.runPatch?.swap) {
      // The run row the patch changes: as stored, or the one this commit creates.
      const runPatch = signedPatch(this.ring, (await this.inner.getRun(runId)) ?? run, request.runPatch)
      if (isRunChanged(runPatch)) return { ok: false, reason: 'run_changed' }
      sealed.runPatch = runPatch
    }
    if (effects) {
      sealed.effects = {
        ...effects,
        ...(effects.intents ? { intents: effects.intents.map((row) => records.sealIntent(row)) } : {}),
        ...(effects.completions ? { completions: effects.completions.map((row) => records.sealCompletion(row)) } : {}),
      }
    }
    return this.inner.commit(sealed)
  }

  async getCheckpoints(checkpointIds: readonly string[]): Promise<CheckpointRow[]> {
    return (await this.inner.getCheckpoints(checkpointIds)).map((row) => this.records.openCheckpoint(row))
  }

  async getLatest(query: { runId: string } | { workflowName: string }): Promise<CheckpointRow | undefined> {
    const row = await this.inner.getLatest(query)
    return row && this.records.openCheckpoint(row)
  }

  async listCheckpoints(query: CheckpointListing): Promise<CheckpointHeaderRow[]> {
    const rows = await this.inner.listCheckpoints(query)
    return query.rows === true ? rows.map((row) => this.records.openCheckpoint(row as CheckpointRow)) : rows
  }

  async readLists(runId: string, ranges: readonly ListRange[]): Promise<string[][]> {
    const lists = await this.inner.readLists(runId, ranges)
    return lists.map((items, k) => items.map((item, idx) => this.records.openItem(runId, ranges[k]?.id ?? '?', (ranges[k]?.from ?? 0) + idx, item)))
  }

  /**
   * The run read at once, its row checked against its seal and newest checkpoint as `getRun`
   * checks it (read again the same way when the two disagree: an engine that could not read
   * them in one snapshot), every row verified and every item opened.
   */
  async loadRun(runId: string, request: { recent: number }): Promise<RunLoad> {
    const read = await this.inner.loadRun(runId, request)
    const newest = read.checkpoints[0]
    const behind = read.run && newest && typeof read.run.lastSeq === 'number' && newest.seq > read.run.lastSeq
    return {
      run: behind ? await this.getRun(runId) : read.run && (await this.#checkRun(read.run, newest)),
      checkpoints: read.checkpoints.map((row) => this.records.openCheckpoint(row)),
      lists: read.lists.map(({ id, items }) => ({ id, items: items.map((item, idx) => this.records.openItem(runId, id, idx, item)) })),
    }
  }

  deleteCheckpoints: StorageEngine['deleteCheckpoints'] = (runId, checkpointIds) => this.inner.deleteCheckpoints(runId, checkpointIds)

  async listEffects(runId: string, callIds?: readonly string[]): Promise<EffectRow[]> {
    return (await this.inner.listEffects(runId, callIds)).map((row) => this.records.openEffect(row))
  }

  deleteEffects: StorageEngine['deleteEffects'] = (runId) => this.inner.deleteEffects(runId)

  async putWrites(rows: readonly PendingWriteRow[]): Promise<void> {
    if (!this.inner.putWrites) throw new InvalidArgumentError(NO_WRITES)
    await this.inner.putWrites(rows.map((row) => this.records.sealWrite(row)))
  }

  async listWrites(runId: string, checkpointIds: readonly string[]): Promise<PendingWriteRow[]> {
    if (!this.inner.listWrites) throw new InvalidArgumentError(NO_WRITES)
    return (await this.inner.listWrites(runId, checkpointIds)).map((row) => this.records.openWrite(row))
  }

  close: StorageEngine['close'] = () => this.inner.close()

  /** @internal A stored run row read with the run's newest checkpoint, checked against its seal and its field signature. */
  async openRun(row: RunRow): Promise<RunRow> {
    let current = row
    let newest = await this.inner.getLatest({ runId: row.runId })
    // Commits may land between the two reads (one or several, on a busy run): read the row again,
    // then the newest checkpoint, until the row has caught up. A row put back stays behind on
    // every read and is refused below.
    for (let attempt = 1; attempt <= CATCH_UP_READS && newest && typeof current.lastSeq === 'number' && newest.seq > current.lastSeq; attempt++) {
      current = (await this.inner.getRun(row.runId)) ?? current
      newest = await this.inner.getLatest({ runId: row.runId })
    }
    return this.#checkRun(current, newest)
  }

  /** A run row read with its newest checkpoint (as stored), checked against its seal and its field signature. */
  async #checkRun(current: RunRow, newest: CheckpointRow | undefined): Promise<RunRow> {
    try {
      verifyRunSeal(this.ring, current, newest)
    } catch (err) {
      // The engine reports progress up to its newest checkpoint, but the seal is over an earlier
      // one: a commit cut short between its checkpoints and its run row (see sealCoversEarlier).
      if (newest === undefined || current.lastSeq !== newest.seq) throw err
      const earlier = (await listRows(this.inner, { runId: current.runId, limit: LAGGING_COMMIT_LIMIT + 1 })).slice(1)
      if (!sealCoversEarlier(this.ring, current, earlier)) throw err
    }
    verifyRunFields(this.ring, current)
    // As the store above reads it: its digests in their plain, unkeyed form.
    return { ...current, digest: runDigest(current), seal: runProgressDigest(current.runId, current.lastSeq) }
  }
}

/**
 * The lease protocol of a keyed engine: runs it creates are sealed, runs a claim hands out
 * verified, and every change of a run's fields (release, cancel, requeue) re-signed from the
 * stored row (see `signedPatch`).
 */
class SealedLeases implements LeaseEngine {
  constructor(private readonly inner: LeaseEngine, private readonly engine: SealedEngine) {}

  async subscribe(onWake: () => void): Promise<LeaseSubscription | undefined> {
    return this.inner.subscribe?.(onWake)
  }

  enqueue: LeaseEngine['enqueue'] = (row, job) => this.inner.enqueue(sealNewRun(this.engine.ring, row), job)
  heartbeat: LeaseEngine['heartbeat'] = (request) => this.inner.heartbeat(request)
  getLease: LeaseEngine['getLease'] = (runId) => this.inner.getLease(runId)

  async claim(request: ClaimRequest): Promise<ClaimedRun[]> {
    const claimed = await this.inner.claim(request)
    return Promise.all(claimed.map(async ({ run, lease }) => ({ run: await this.engine.openRun(run), lease })))
  }

  async release(request: ReleaseRequest): Promise<boolean | RunChanged> {
    const { patch } = request
    if (!patch?.swap) return this.inner.release(request)
    const signed = await this.#signed(request.fence.runId, () => patch)
    if (signed === undefined) return false
    return isRunChanged(signed) ? signed : this.inner.release({ ...request, patch: signed })
  }

  async cancel(runId: string, swap?: RunSwap): Promise<CancelOutcome | RunChanged | undefined> {
    if (!swap) return this.inner.cancel(runId)
    const signed = await this.#signed(runId, (stored) => ({ status: 'cancelled', updatedAt: stored.updatedAt, swap }))
    return signed === undefined || isRunChanged(signed) ? signed : this.inner.cancel(runId, signed.swap)
  }

  async requeuePaused(request: RequeueRequest): Promise<RequeueOutcome | RunChanged | undefined> {
    const sealed = await this.#sealedRequeue(request)
    return sealed === undefined || isRunChanged(sealed) ? sealed : this.inner.requeuePaused(sealed)
  }

  async requeuePausedMany(requests: readonly RequeueRequest[]): Promise<(RequeueOutcome | RunChanged | undefined)[]> {
    const sealed = await Promise.all(requests.map((request) => this.#sealedRequeue(request)))
    const outcomes = await requeueAll(this.inner, sealed.filter((request): request is RequeueRequest => request !== undefined && !isRunChanged(request)))
    let next = 0
    return sealed.map((request) => (request === undefined || isRunChanged(request) ? request : outcomes[next++]))
  }

  /**
   * The lease of a named run; the run handed out has its fields' signature verified. Its progress
   * (last seq) is checked against its newest checkpoint by the read a resume makes next
   * (`loadRun`), so the acquire does not read that checkpoint as well: the row's seal is left out.
   */
  async acquire(request: AcquireRequest): Promise<AcquireOutcome> {
    const outcome = await this.inner.acquire(request.create ? { ...request, create: sealNewRun(this.engine.ring, request.create) } : request)
    if (outcome.outcome !== 'acquired') return outcome
    verifyRunFields(this.engine.ring, outcome.run)
    return { ...outcome, run: { ...outcome.run, digest: runDigest(outcome.run), seal: null } }
  }

  /** A requeue with its swap re-signed from the stored row. */
  async #sealedRequeue(request: RequeueRequest): Promise<RequeueRequest | RunChanged | undefined> {
    const signed = await this.#signed(request.runId, () => ({ status: 'queued', metadata: request.metadata, updatedAt: request.now, swap: request.swap }))
    return signed === undefined || isRunChanged(signed) ? signed : { ...request, swap: signed.swap }
  }

  /** A change re-signed from the stored row (see `signedPatch`); undefined when there is no such run. */
  async #signed<P extends RunPatch>(runId: string, patchOf: (stored: RunRow) => P): Promise<P | RunChanged | undefined> {
    const stored = await this.engine.inner.getRun(runId)
    return stored && signedPatch(this.engine.ring, stored, patchOf(stored))
  }
}
