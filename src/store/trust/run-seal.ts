import type { AcquireOutcome, AcquireRequest, ClaimRequest, ClaimedRun, EnqueueJob, LeaseEngine, LeaseSubscription, RequeueOutcome, RequeueRequest } from '../engine/lease-engine.js'
import type { CheckpointRow, RunDigestOf, RunPatch, RunRow } from '../engine/rows.js'
import { RUN_DIGEST_FIELDS, runDigest, runProgressDigest, type RunDigestField } from '../engine/run-digest.js'
import type { KeyRing } from './key-ring.js'
import { integrity, isSignature, sign, verify, type SealContext } from './seal.js'

/**
 * The signature of a run row's fields (those of `RUN_DIGEST_FIELDS`: id, status, names, config
 * signature, metadata, creation time), kept in its `digest`: bound to the run id, so a row copied
 * from another run does not verify either.
 */
export function runFieldsSeal(ring: KeyRing, row: Pick<RunRow, RunDigestField>): string {
  return sign(ring, 'run-fields', fieldsOf(row))
}

/**
 * Check a stored run row's field signature: a row whose status, name, thread, workflow name,
 * config signature, metadata or creation time was edited, or whose signature is missing or
 * replaced by an unkeyed digest, is a `CheckpointIntegrityError`.
 */
export function verifyRunFields(ring: KeyRing, row: RunRow): void {
  const context: SealContext = { runId: stringOr(row.runId), what: `run ${String(row.runId)}` }
  if (row.digest === null || row.digest === undefined) {
    throw integrity(context, 'has no signature over its fields (written before run rows were signed whole): sign them with store.rekey()')
  }
  verify(ring, row.digest, 'run-fields', fieldsOf(row), context)
}

/** A verified run row as the store above reads it: its digests in their plain, unkeyed form. */
export function openedRun(row: RunRow): RunRow {
  return { ...row, digest: runDigest(row), seal: runProgressDigest(row.runId, row.lastSeq) }
}

/** A run patch whose digest is the field signature (the unkeyed digest a caller asked for is replaced). */
export function signedPatch(ring: KeyRing, patch: RunPatch): RunPatch {
  return patch.digestOf ? { ...patch, digestOf: signer(ring) } : patch
}

/** Computes the field signature of a row as an engine is about to store it, once the row it replaces verifies. */
export function signer(ring: KeyRing): RunDigestOf {
  return (row, before) => {
    verifyRunFields(ring, before)
    return runFieldsSeal(ring, row)
  }
}

/** Whether a stored row's fields are signed (not necessarily verifiable). */
export function fieldsSigned(row: RunRow): boolean {
  return isSignature(row.digest)
}

/**
 * A run row's progress signature: HMAC over the run id, its last seq and the id and stored
 * (signed) digest of the checkpoint at that seq. It changes only when a commit advances the run,
 * so lease columns, status, name and metadata are outside it.
 */
export function runSeal(ring: KeyRing, runId: string, lastSeq: number, newest: Pick<CheckpointRow, 'id' | 'digest'> | undefined): string {
  return sign(ring, 'run-progress', progressFields(runId, lastSeq, newest))
}

/**
 * Check a stored run row against its seal and the newest stored checkpoint of the run: the row
 * must carry a signature over its last seq and exactly that checkpoint. A last seq lowered to an
 * older checkpoint (with the newer ones deleted), a row copied from another run, a row restored
 * from before later commits, or a newest checkpoint replaced is a `CheckpointIntegrityError`. A
 * row whose last seq is beyond every checkpoint left is not refused here: the rollback check
 * (`checkLatestAgainstRun`) refuses to resume it.
 */
export function verifyRunSeal(ring: KeyRing, row: RunRow, newest: CheckpointRow | undefined): void {
  const context: SealContext = { runId: stringOr(row.runId), checkpointId: newest?.id, what: `run ${String(row.runId)}` }
  const lastSeq = typeof row.lastSeq === 'number' ? row.lastSeq : undefined
  if (newest !== undefined && lastSeq !== undefined && newest.seq > lastSeq) {
    const found = `its newest checkpoint ${newest.id} is at seq ${newest.seq} but its row records seq ${lastSeq}`
    throw integrity(context, `was replayed: ${found}, so the run row was restored from an older copy or edited`)
  }
  // Checkpoints removed after the row's last seq: the rollback check refuses the run (see `checkLatestAgainstRun`);
  // the signature cannot be checked without the checkpoint it names, but an unsigned one is refused here.
  if (lastSeq !== undefined && (newest?.seq ?? 0) < lastSeq) {
    if (!isSignature(row.seal)) throw integrity(context, 'is not signed, but this store verifies signatures: sign the records written before keys were given with store.rekey({ signUnsigned: true })')
    return
  }
  verify(ring, row.seal, 'run-progress', progressFields(row.runId, row.lastSeq, newest), context)
}

/**
 * Whether a run row's seal covers one of `earlier`, the run's checkpoints before its newest: a
 * commit whose checkpoints became durable before its run row was rewritten (the file store writes
 * them one file at a time, so a crash can fall in between). The checkpoints after the sealed one
 * are each signed and bound to this run and seq, and checked when they are read, so accepting the
 * row rolls nothing back.
 */
export function sealCoversEarlier(ring: KeyRing, row: RunRow, earlier: readonly CheckpointRow[]): boolean {
  for (const checkpoint of earlier) {
    try {
      verify(ring, row.seal, 'run-progress', progressFields(row.runId, checkpoint.seq, checkpoint), { runId: stringOr(row.runId), what: `run ${String(row.runId)}` })
      return true
    } catch {
      // Not this checkpoint: try the one before it.
    }
  }
  return false
}

/** The lease protocol of a keyed engine: runs it creates are sealed, runs it hands out verified. */
export class SealedLeases implements LeaseEngine {
  readonly #inner: LeaseEngine
  readonly #ring: KeyRing
  readonly #open: (row: RunRow) => Promise<RunRow>

  constructor(inner: LeaseEngine, ring: KeyRing, open: (row: RunRow) => Promise<RunRow>) {
    this.#inner = inner
    this.#ring = ring
    this.#open = open
  }

  async subscribe(onWake: () => void): Promise<LeaseSubscription | undefined> {
    return this.#inner.subscribe ? this.#inner.subscribe(onWake) : undefined
  }

  enqueue(row: RunRow, job: EnqueueJob): Promise<boolean> {
    return this.#inner.enqueue(this.#sealNew(row), job)
  }

  async claim(request: ClaimRequest): Promise<ClaimedRun[]> {
    const claimed = await this.#inner.claim(request)
    return Promise.all(claimed.map(async ({ run, lease }) => ({ run: await this.#open(run), lease })))
  }

  heartbeat: LeaseEngine['heartbeat'] = (request) => this.#inner.heartbeat(request)
  release: LeaseEngine['release'] = (request) => this.#inner.release(request.patch ? { ...request, patch: signedPatch(this.#ring, request.patch) } : request)
  cancel: LeaseEngine['cancel'] = (runId, digestOf) => this.#inner.cancel(runId, digestOf && signer(this.#ring))
  requeuePaused: LeaseEngine['requeuePaused'] = (request) => this.#inner.requeuePaused(this.#sealedRequeue(request))
  #sealedRequeue(request: RequeueRequest): RequeueRequest {
    return {
      ...request,
      // The row as stored under the engine's lock: its fields verified before its metadata is rewritten from them.
      metadata: (row) => {
        verifyRunFields(this.#ring, row)
        return request.metadata(openedRun(row))
      },
      ...(request.digestOf ? { digestOf: signer(this.#ring) } : {}),
    }
  }
  async requeuePausedMany(requests: readonly RequeueRequest[]): Promise<(RequeueOutcome | undefined)[]> {
    const inner = this.#inner
    if (inner.requeuePausedMany) return inner.requeuePausedMany(requests.map((request) => this.#sealedRequeue(request)))
    const outcomes: (RequeueOutcome | undefined)[] = []
    for (const request of requests) outcomes.push(await inner.requeuePaused(this.#sealedRequeue(request)))
    return outcomes
  }
  getLease: LeaseEngine['getLease'] = (runId) => this.#inner.getLease(runId)

  async acquire(request: AcquireRequest): Promise<AcquireOutcome> {
    const outcome = await this.#inner.acquire(request.create ? { ...request, create: this.#sealNew(request.create) } : request)
    return outcome.outcome === 'acquired' ? { ...outcome, run: await this.#open(outcome.run) } : outcome
  }

  #sealNew(row: RunRow): RunRow {
    return { ...row, seal: runSeal(this.#ring, row.runId, row.lastSeq, undefined), digest: runFieldsSeal(this.#ring, row) }
  }
}

function fieldsOf(row: Pick<RunRow, RunDigestField>): (string | number | null | undefined)[] {
  return RUN_DIGEST_FIELDS.map((field) => {
    const value: unknown = row[field]
    return typeof value === 'string' || typeof value === 'number' || value === null ? value : undefined
  })
}

function progressFields(runId: unknown, lastSeq: unknown, newest: Pick<CheckpointRow, 'id' | 'digest'> | undefined) {
  return [stringOr(runId), typeof lastSeq === 'number' ? lastSeq : undefined, newest?.id ?? null, newest?.digest ?? null]
}

function stringOr(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined
}
