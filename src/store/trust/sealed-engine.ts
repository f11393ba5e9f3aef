import { InvalidArgumentError, WrongKeyError, type CairnError, type CheckpointIntegrityError } from '../../core/errors.js'
import type { ListRunsQuery } from '../checkpoint-store.js'
import { listRows, type CheckpointListing, type CommitRequest, type CommitResult, type ListRange, type RunLoad, type StorageEngine } from '../engine/storage-engine.js'
import type { CheckpointHeaderRow, CheckpointRow, EffectCompletionRow, EffectRow, ListAppend, ListRef, PendingWriteRow, RunPatch, RunRow } from '../engine/rows.js'
import { checkpointDigest } from '../encoding/checkpoint-rows.js'
import { RUN_LOG_LIST } from '../engine/list-retention.js'
import type { KeyRing } from './key-ring.js'
import { decrypt, encrypt, integrity, isCiphertext, keyCheckValue, sign, verify, type SealContext } from './seal.js'
import { openedRun, runFieldsSeal, runSeal, sealCoversEarlier, SealedLeases, signedPatch, verifyRunFields, verifyRunSeal } from './run-seal.js'

/** Most checkpoints one commit can leave ahead of its run row when a crash cuts it short. */
const LAGGING_COMMIT_LIMIT = 16
/** Most times a read of a run row and its newest checkpoint is made again while commits land in between. */
const CATCH_UP_READS = 8
import type { LeaseEngine } from '../engine/lease-engine.js'

/** What a keyed store does to what it writes. */
export interface SealOptions {
  ring: KeyRing
  /** Encrypt payloads, list items and effect outputs (signing is always on with keys). */
  encrypt: boolean
}

/**
 * A {@link StorageEngine} that signs (and, with `encrypt`, encrypts) every record a resume
 * trusts on its way into the engine below, and verifies (and decrypts) it on the way out, so
 * every backend gets the same protection from one place.
 *
 * - A checkpoint row's `digest` becomes an HMAC over its SHA-256 digest, which covers the run id,
 *   id, seq, parent, header, metadata, body and list refs: an edit, a swap with another row or a
 *   row copied from another run does not verify. With encryption the body and the list refs'
 *   chain hashes are one AES-GCM ciphertext bound to the row's identity; ids, seqs, phases, times
 *   and list lengths stay readable.
 * - List items are covered by the chain hashes in the signed rows that refer to them; with
 *   encryption each item is a ciphertext bound to its run, list and index.
 * - An effect's intent (name, input hash, idempotency key) and its outcome (status, output) are
 *   each signed with its run and call id; the outcome's output is encrypted.
 *
 * - A run row carries a progress signature (its `seal`) over its run id, last seq and the id and
 *   signed digest of the checkpoint at that seq, written by the commit that advances it and
 *   checked on every read of the row (`getRun`, `listRuns`, claims, and the rollback check of
 *   `getLatest`): a lowered last seq, a deleted or replaced newest checkpoint, or a row restored
 *   from before later commits does not verify.
 *
 * - A run row's fields (run id, status, name, thread, workflow name, config signature, metadata,
 *   creation time) are signed in its `digest`, bound to the run id, by every write that changes
 *   them (a patch's `digestOf`, the lease code's release, requeue and cancel), each after the row
 *   it replaces verifies; checked on every read of the row.
 *
 * A run row's update time, list headers and lease columns pass through unchanged.
 */
export class SealedEngine implements StorageEngine {
  readonly #inner: StorageEngine
  readonly #ring: KeyRing
  readonly #encrypt: boolean

  constructor(inner: StorageEngine, options: SealOptions) {
    this.#inner = inner
    this.#ring = options.ring
    this.#encrypt = options.encrypt
  }

  get leases(): LeaseEngine | undefined {
    const inner = this.#inner.leases
    if (!inner) return undefined
    this.#leases ??= new SealedLeases(inner, this.#ring, async (row) => (await this.#openRun(row)).run)
    return this.#leases
  }

  #leases: SealedLeases | undefined

  /** The engine below, for administration (rekeying) that moves sealed rows as they are. */
  get inner(): StorageEngine {
    return this.#inner
  }

  /**
   * Before the first write: store the writing key's check value, or, when the store holds
   * another value for its key id, throw {@link WrongKeyError} (a wrong secret writes nothing).
   * Once per engine; a store whose engine keeps no check values is not checked.
   */
  async checkWritingKey(): Promise<void> {
    if (this.#writerChecked) return
    const put = this.#inner.putKeyCheck?.bind(this.#inner)
    const key = this.#ring.writer()
    const mine = keyCheckValue(key)
    if (put && (await put(key.id, mine)) !== mine) throw new WrongKeyError({ keyId: key.id })
    this.#writerChecked = true
  }

  #writerChecked = false

  /**
   * What to report for a record that does not verify: a {@link WrongKeyError} when the store's
   * check value for the key it names is not that of the ring's secret, else `err` (tampering).
   */
  async explainIntegrity(err: CheckpointIntegrityError): Promise<CairnError> {
    const key = err.keyId === undefined ? undefined : this.#ring.key(err.keyId)
    if (!key || !this.#inner.getKeyCheck) return err
    const stored = await this.#inner.getKeyCheck(key.id)
    return stored !== undefined && stored !== keyCheckValue(key) ? new WrongKeyError({ keyId: key.id, cause: err }) : err
  }

  async insertRun(row: RunRow): Promise<boolean> {
    await this.checkWritingKey()
    return this.#inner.insertRun({ ...row, seal: runSeal(this.#ring, row.runId, row.lastSeq, undefined), digest: runFieldsSeal(this.#ring, row) })
  }
  async getRun(runId: string): Promise<RunRow | undefined> {
    const row = await this.#inner.getRun(runId)
    return row && (await this.#openRun(row)).run
  }

  async listRuns(query: ListRunsQuery): Promise<RunRow[]> {
    const rows = await this.#inner.listRuns(query)
    return Promise.all(rows.map(async (row) => (await this.#openRun(row)).run))
  }
  async updateRun(runId: string, patch: RunPatch): Promise<RunRow | undefined> {
    await this.checkWritingKey()
    // The seal is the commit's to write, never a caller's; the digest is the field signature.
    const { seal: _seal, ...fields } = patch
    const row = await this.#inner.updateRun(runId, signedPatch(this.#ring, fields))
    return row && (await this.#openRun(row)).run
  }
  deleteRun(runId: string): Promise<boolean> {
    return this.#inner.deleteRun(runId)
  }

  async commit(request: CommitRequest): Promise<CommitResult> {
    if (!this.#writerChecked) await this.checkWritingKey()
    const { effects } = request
    const rows = request.rows.map((row) => this.sealCheckpoint(row))
    const newest = rows[rows.length - 1]
    const { runId } = request.run
    const seal = runSeal(this.#ring, runId, newest?.seq ?? 0, newest)
    const sealed: CommitRequest = {
      ...request,
      rows,
      appends: this.#encrypt ? request.appends.map((append) => this.#sealAppend(runId, append)) : request.appends,
      // A commit that advances the run writes the signature of its new last seq and newest checkpoint with them.
      run: { ...request.run, seal, digest: runFieldsSeal(this.#ring, request.run) },
    }
    if (request.runPatch) sealed.runPatch = signedPatch(this.#ring, request.runPatch)
    if (effects) {
      sealed.effects = {
        ...effects,
        ...(effects.intents ? { intents: effects.intents.map((row) => this.sealIntent(row)) } : {}),
        ...(effects.completions ? { completions: effects.completions.map((row) => this.sealCompletion(row)) } : {}),
      }
    }
    return this.#inner.commit(sealed)
  }

  async getCheckpoints(checkpointIds: readonly string[]): Promise<CheckpointRow[]> {
    return (await this.#inner.getCheckpoints(checkpointIds)).map((row) => this.openCheckpoint(row))
  }

  async getLatest(query: { runId: string } | { workflowName: string }): Promise<CheckpointRow | undefined> {
    const row = await this.#inner.getLatest(query)
    return row && this.openCheckpoint(row)
  }

  async listCheckpoints(query: CheckpointListing): Promise<CheckpointHeaderRow[]> {
    const rows = await this.#inner.listCheckpoints(query)
    return query.rows === true ? rows.map((row) => this.openCheckpoint(row as CheckpointRow)) : rows
  }

  async readLists(runId: string, ranges: readonly ListRange[]): Promise<string[][]> {
    const lists = await this.#inner.readLists(runId, ranges)
    return lists.map((items, k) => {
      const range = ranges[k]
      return items.map((item, idx) => this.openItem(runId, range?.id ?? '?', (range?.from ?? 0) + idx, item))
    })
  }

  /**
   * The run read at once, its row checked against its seal and newest checkpoint as `getRun`
   * checks it (read again the same way when the two disagree: an engine that could not read
   * them in one snapshot), every row verified and every item opened.
   */
  async loadRun(runId: string, request: { recent: number }): Promise<RunLoad> {
    const read = await this.#inner.loadRun(runId, request)
    const newest = read.checkpoints[0]
    let run: RunRow | undefined
    if (read.run && newest && typeof read.run.lastSeq === 'number' && newest.seq > read.run.lastSeq) run = await this.getRun(runId)
    else run = read.run && (await this.#checkRun(read.run, newest))
    return {
      run,
      checkpoints: read.checkpoints.map((row) => this.openCheckpoint(row)),
      lists: read.lists.map(({ id, items }) => ({ id, items: items.map((item, idx) => this.openItem(runId, id, idx, item)) })),
      effects: read.effects.map((row) => this.openEffect(row)),
    }
  }

  deleteCheckpoints(runId: string, checkpointIds: readonly string[]): Promise<number> {
    return this.#inner.deleteCheckpoints(runId, checkpointIds)
  }

  async listEffects(runId: string, callIds?: readonly string[]): Promise<EffectRow[]> {
    return (await this.#inner.listEffects(runId, callIds)).map((row) => this.openEffect(row))
  }

  deleteEffects(runId: string): Promise<number> {
    return this.#inner.deleteEffects(runId)
  }

  async putWrites(rows: readonly PendingWriteRow[]): Promise<void> {
    if (!this.#inner.putWrites) throw new InvalidArgumentError('this store backend has no place for pending writes; use a built-in store or give the engine putWrites and listWrites')
    await this.#inner.putWrites(rows.map((row) => this.#sealWrite(row)))
  }

  async listWrites(runId: string, checkpointIds: readonly string[]): Promise<PendingWriteRow[]> {
    if (!this.#inner.listWrites) throw new InvalidArgumentError('this store backend has no place for pending writes; use a built-in store or give the engine putWrites and listWrites')
    return (await this.#inner.listWrites(runId, checkpointIds)).map((row) => this.#openWrite(row))
  }

  close(): Promise<void> {
    return this.#inner.close()
  }

  /** A pending write as stored: its value encrypted when asked, then signed with its key. */
  #sealWrite(row: PendingWriteRow): PendingWriteRow {
    const value = this.#encrypt ? JSON.stringify(encrypt(this.#ring, row.value, writeAad(row))) : row.value
    return { ...row, value: `${value}|${sign(this.#ring, 'pending-write', writeFields(row, value))}` }
  }

  #openWrite(row: PendingWriteRow): PendingWriteRow {
    const context: SealContext = { runId: stringOr(row.runId), checkpointId: stringOr(row.checkpointId), what: `a pending write (task ${String(row.taskId)}, index ${String(row.idx)}) of checkpoint ${String(row.checkpointId)}` }
    const [value, signature] = splitSealed(row.value)
    verify(this.#ring, signature, 'pending-write', writeFields(row, value), context)
    if (value === undefined) throw integrity(context, 'has no value')
    const plain = value.startsWith('"e1.') ? decrypt(this.#ring, JSON.parse(value) as string, writeAad(row), context) : value
    return { ...row, value: plain }
  }

  /**
   * A stored run row checked against its seal and its newest checkpoint (see {@link verifyRunSeal}),
   * and that newest checkpoint as stored (not yet opened).
   */
  async #openRun(row: RunRow): Promise<{ run: RunRow; newest: CheckpointRow | undefined }> {
    let current = row
    let newest = await this.#inner.getLatest({ runId: row.runId })
    // Commits may land between the two reads (one or several, on a busy run): read the row again,
    // then the newest checkpoint, until the row has caught up. A row put back stays behind on
    // every read and is refused below.
    for (let attempt = 1; attempt <= CATCH_UP_READS && newest && typeof current.lastSeq === 'number' && newest.seq > current.lastSeq; attempt++) {
      current = (await this.#inner.getRun(row.runId)) ?? current
      newest = await this.#inner.getLatest({ runId: row.runId })
    }
    return { run: await this.#checkRun(current, newest), newest }
  }

  /** A run row read with its newest checkpoint (as stored), checked against its seal and its field signature. */
  async #checkRun(current: RunRow, newest: CheckpointRow | undefined): Promise<RunRow> {
    try {
      verifyRunSeal(this.#ring, current, newest)
    } catch (err) {
      // The engine reports progress up to its newest checkpoint, but the seal is over an earlier
      // one: a commit cut short between its checkpoints and its run row (see sealCoversEarlier).
      if (newest === undefined || current.lastSeq !== newest.seq || !(await this.#sealCoversEarlier(current))) throw err
    }
    verifyRunFields(this.#ring, current)
    return openedRun(current)
  }

  /** The few checkpoints before the newest, read whole, checked against the row's seal. */
  async #sealCoversEarlier(row: RunRow): Promise<boolean> {
    const earlier = (await listRows(this.#inner, { runId: row.runId, limit: LAGGING_COMMIT_LIMIT + 1 })).slice(1)
    return sealCoversEarlier(this.#ring, row, earlier)
  }

  /** Seal a run row as a commit would, from its stored newest checkpoint (for `rekey`). */
  sealRun(row: RunRow, newest: CheckpointRow | undefined): string {
    return runSeal(this.#ring, row.runId, row.lastSeq, newest)
  }

  /** Check a stored run row's seal (for `rekey`). */
  verifyRun(row: RunRow, newest: CheckpointRow | undefined): void {
    verifyRunSeal(this.#ring, row, newest)
  }

  /** Check a stored run row's field signature (for `rekey`). */
  verifyRunFields(row: RunRow): void {
    verifyRunFields(this.#ring, row)
  }

  /** Sign a run row's fields (for `rekey`). */
  sealRunFields(row: RunRow): string {
    return runFieldsSeal(this.#ring, row)
  }

  /** A checkpoint row as it is stored: encrypted when asked, signed always. */
  sealCheckpoint(row: CheckpointRow): CheckpointRow {
    if (!this.#encrypt) return { ...row, digest: sign(this.#ring, 'checkpoint', [checkpointDigest(row)]) }
    const refs = JSON.parse(row.lists) as ListRef[]
    const stored = {
      ...row,
      body: JSON.stringify(encrypt(this.#ring, JSON.stringify([row.body, row.lists]), checkpointAad(row))),
      lists: JSON.stringify(refs.map((ref) => ({ id: ref.id, n: ref.n, h: '' }))),
    }
    return { ...stored, digest: sign(this.#ring, 'checkpoint', [checkpointDigest(stored)]) }
  }

  /** Verify (and decrypt) a stored checkpoint row into the plain row the store decodes. */
  openCheckpoint(row: CheckpointRow): CheckpointRow {
    const context = checkpointContext(row)
    const digest = checkpointDigest(row)
    verify(this.#ring, row.digest, 'checkpoint', [digest], context)
    if (typeof row.body !== 'string' || !row.body.startsWith('"e1.')) return { ...row, digest }
    const opened = parseSealedPair(decrypt(this.#ring, JSON.parse(row.body) as string, checkpointAad(row), context), context)
    const plain = { ...row, body: opened[0], lists: opened[1] }
    return { ...plain, digest: checkpointDigest(plain) }
  }

  /** An effect intent row as stored: its input hash carries the intent's signature. */
  sealIntent(row: EffectRow): EffectRow {
    return { ...row, inputHash: `${row.inputHash}|${sign(this.#ring, 'effect-intent', intentFields(row, row.inputHash))}` }
  }

  /** An effect outcome as stored: output encrypted when asked, output hash carrying the outcome's signature. */
  sealCompletion(row: EffectCompletionRow): EffectCompletionRow {
    const output = this.#encrypt ? JSON.stringify(encrypt(this.#ring, row.output, effectAad(row.runId, row.callId, row.status))) : row.output
    const signature = sign(this.#ring, 'effect-outcome', [row.runId, row.callId, row.status, output, row.outputHash])
    return { ...row, output, outputHash: `${row.outputHash}|${signature}` }
  }

  /** Verify (and decrypt) a stored effect row. */
  openEffect(row: EffectRow): EffectRow {
    const context: SealContext = { runId: stringOr(row.runId), what: `effect ${String(row.callId)} of run ${String(row.runId)}` }
    const [inputHash, intentSignature] = splitSealed(row.inputHash)
    verify(this.#ring, intentSignature, 'effect-intent', intentFields(row, inputHash), context)
    // A signature over strings verified: the fields are strings.
    if (inputHash === undefined) throw integrity(context, 'has no input hash')
    const done = row.status === 'succeeded' || row.status === 'failed'
    if (!done) {
      if (row.output !== null || row.outputHash !== null) throw integrity(context, `is marked ${String(row.status)} but holds an outcome: its status was rolled back`)
      return { ...row, inputHash }
    }
    const [outputHash, outcomeSignature] = splitSealed(row.outputHash)
    verify(this.#ring, outcomeSignature, 'effect-outcome', [row.runId, row.callId, row.status, row.output, outputHash], context)
    if (outputHash === undefined || typeof row.output !== 'string') throw integrity(context, 'has no output')
    const output = typeof row.output === 'string' && row.output.startsWith('"e1.') ? decrypt(this.#ring, JSON.parse(row.output) as string, effectAad(row.runId, row.callId, row.status), context) : row.output
    return { ...row, inputHash, output, outputHash }
  }

  /** The id of the key this engine writes with, and whether it encrypts. */
  get sealing(): { keyId: string; encrypt: boolean } {
    return { keyId: this.#ring.writeKeyId, encrypt: this.#encrypt }
  }

  #sealAppend(runId: string, append: ListAppend): ListAppend {
    // The run's log holds call ids and statuses, nothing secret, and is checked without a key.
    if (append.listId === RUN_LOG_LIST) return append
    return { ...append, items: append.items.map((item, k) => this.sealItem(runId, append.listId, append.expectedLength + k, item)) }
  }

  /** A list item as stored: a ciphertext bound to its place when encrypting, else as is. */
  sealItem(runId: string, listId: string, idx: number, item: string): string {
    return this.#encrypt ? JSON.stringify(encrypt(this.#ring, item, itemAad(runId, listId, idx))) : item
  }

  /** A stored list item decrypted (a plain item is returned as is: the chain hashes of signed rows cover it). */
  openItem(runId: string, listId: string, idx: number, item: string): string {
    if (typeof item !== 'string' || !item.startsWith('"e1.')) return item
    let sealed: unknown
    try {
      sealed = JSON.parse(item)
    } catch {
      return item
    }
    if (!isCiphertext(sealed)) return item
    return decrypt(this.#ring, sealed, itemAad(runId, listId, idx), { runId, what: `item ${idx} of list ${listId} of run ${runId}` })
  }
}

function checkpointAad(row: CheckpointRow): string {
  return JSON.stringify(['checkpoint', row.runId, row.id, row.seq])
}

function itemAad(runId: string, listId: string, idx: number): string {
  return JSON.stringify(['item', runId, listId, idx])
}

function effectAad(runId: string, callId: string, status: string): string {
  return JSON.stringify(['effect', runId, callId, status])
}

function writeAad(row: PendingWriteRow): string {
  return JSON.stringify(['write', row.runId, row.checkpointId, row.taskId, row.idx])
}

function writeFields(row: PendingWriteRow, value: string | undefined): (string | undefined)[] {
  return [row.runId, row.checkpointId, row.taskId, String(row.idx), row.channel, row.taskPath, value].map(stringOr)
}

function intentFields(row: EffectRow, inputHash: unknown): (string | undefined)[] {
  return [row.runId, row.callId, row.name, stringOr(inputHash), row.idempotencyKey].map(stringOr)
}

function checkpointContext(row: CheckpointRow): SealContext {
  return { runId: stringOr(row.runId), checkpointId: stringOr(row.id), what: `checkpoint ${String(row.id)} of run ${String(row.runId)}` }
}

/** `original|signature` → [original, signature]; a value without one yields no signature. */
function splitSealed(value: unknown): [string | undefined, string | undefined] {
  if (typeof value !== 'string') return [undefined, undefined]
  const at = value.lastIndexOf('|s1.')
  return at < 0 ? [value, undefined] : [value.slice(0, at), value.slice(at + 1)]
}

function parseSealedPair(text: string, context: SealContext): [string, string] {
  let pair: unknown
  try {
    pair = JSON.parse(text)
  } catch {
    pair = undefined
  }
  if (!Array.isArray(pair) || pair.length !== 2 || typeof pair[0] !== 'string' || typeof pair[1] !== 'string') {
    throw integrity(context, 'holds a ciphertext that is not a checkpoint body')
  }
  return [pair[0], pair[1]]
}

function stringOr(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined
}
