import { CheckpointCorruptionError, CheckpointIntegrityError, InvalidArgumentError } from '../../core/errors.js'
import { canonicalJson, sha256 } from '../../core/hash.js'
import { KeyedLock } from '../../core/keyed-lock.js'
import type { CheckpointStore, PendingWrite, PendingWriteRecord } from '../../store/checkpoint-store.js'
import type { ThreadNamespace } from './identity.js'

/**
 * The pending writes of a LangGraph checkpoint under the same checks as the checkpoint itself.
 * Next to a checkpoint's writes the saver keeps one more row, the checkpoint's ledger: the key
 * (task, index) and digest of every write the store holds for it. The digest binds the write to
 * its checkpoint, task, index, channel, task path and value, and the ledger is replaced in the
 * same atomic store call that adds writes, so a read finds a write deleted, added, changed, swapped
 * with another or moved from another checkpoint. On a store with keys every row, the ledger
 * included, is also signed: nobody without the key can write a ledger that agrees with an edit.
 */

/** The task id of a checkpoint's ledger row: LangGraph's task ids are UUIDs, and `putWrites` refuses this one. */
export const LEDGER_TASK = 'cairn:writes'
/** A special index: the newest ledger of a checkpoint replaces the one before. */
const LEDGER_INDEX = -1
const LEDGER_CHANNEL = '__cairn_writes__'
/** Checkpoints whose ledger a saver keeps in memory, so adding writes needs no read. */
const KNOWN_LEDGERS = 256

/** Where a checkpoint's writes belong: its thread namespace, LangGraph id, Cairn run and Cairn id. */
export interface WritesTarget {
  place: ThreadNamespace
  checkpointId: string
  runId: string
  checkpointKey: string
}

/** One write as the ledger lists it: `[taskId, index, digest]`. */
type LedgerEntry = [string, number, string]

interface Ledger {
  v: 1
  checkpoint: string
  writes: LedgerEntry[]
}

/** The ledgers of one saver: what each checkpoint's writes are, and one queue of additions per checkpoint. */
export class WritesLedgers {
  /** By Cairn checkpoint id: each write's key (`[taskId, index]` as JSON) and its entry. */
  readonly #known = new Map<string, Map<string, LedgerEntry>>()
  readonly #queues = new KeyedLock()

  /** A checkpoint just saved in place of a stored one (whose writes went with it) has no writes yet. */
  fresh(checkpointKey: string): void {
    this.#remember(checkpointKey, new Map())
  }

  /**
   * A checkpoint just saved for the first time has no writes, but those this saver put before it:
   * LangGraph puts a checkpoint only once the put before it is done, and its tasks' writes may
   * come first.
   */
  saved(checkpointKey: string): void {
    if (!this.#known.has(checkpointKey)) this.#remember(checkpointKey, new Map())
  }

  forget(): void {
    this.#known.clear()
  }

  /**
   * Store writes of one task with the checkpoint's new ledger, in one store call. LangGraph puts
   * the writes of parallel tasks at once: additions to one checkpoint take turns.
   */
  async append(store: CheckpointStore, target: WritesTarget, writes: readonly PendingWrite[]): Promise<void> {
    if (writes.some((write) => write.taskId === LEDGER_TASK)) {
      throw new InvalidArgumentError(`CairnSaver.putWrites: the task id ${JSON.stringify(LEDGER_TASK)} is reserved for Cairn's ledger of a checkpoint's writes; use another task id`)
    }
    if (writes.length === 0) return
    await this.#queues.run(target.checkpointKey, () => this.#append(store, target, writes))
  }

  /**
   * The writes of one checkpoint (as the store lists them) checked against its ledger: the writes
   * without the ledger row, or a `CheckpointCorruptionError` naming the thread, the checkpoint and
   * the task of the first write that does not match.
   */
  verify(target: WritesTarget, records: readonly PendingWriteRecord[]): PendingWriteRecord[] {
    const ledgerRows = records.filter((record) => record.taskId === LEDGER_TASK)
    const writes = records.filter((record) => record.taskId !== LEDGER_TASK)
    if (ledgerRows.length === 0) {
      if (writes.length > 0) throw corrupt(target, `${writes.length} pending write(s) but no ledger of them: the ledger row was deleted, or the writes were added around the saver`, writes[0]!.taskId)
      this.#remember(target.checkpointKey, new Map())
      return writes
    }
    const ledger = ledgerOf(target, ledgerRows[0]!.value)
    const expected = new Map(ledger.writes.map((entry) => [writeKey(entry[0], entry[1]), entry]))
    for (const write of writes) {
      const entry = expected.get(writeKey(write.taskId, write.index))
      if (!entry) throw corrupt(target, `its write ${write.index} on channel ${JSON.stringify(write.channel)} is not in the checkpoint's ledger: it was added or moved here from elsewhere`, write.taskId)
      if (digestOf(target, write) !== entry[2]) {
        throw corrupt(target, `its write ${write.index} on channel ${JSON.stringify(write.channel)} does not match the checkpoint's ledger: its value, channel or task path was changed, swapped with another write's, or moved here from another checkpoint`, write.taskId)
      }
    }
    if (writes.length !== expected.size) {
      const found = new Set(writes.map((write) => writeKey(write.taskId, write.index)))
      const missing = ledger.writes.find((entry) => !found.has(writeKey(entry[0], entry[1])))!
      throw corrupt(target, `its write ${missing[1]} is missing: the checkpoint's ledger lists ${expected.size} write(s) and the store holds ${writes.length}; a pending write was deleted or moved away`, missing[0])
    }
    this.#remember(target.checkpointKey, expected)
    return writes
  }

  async #append(store: CheckpointStore, target: WritesTarget, writes: readonly PendingWrite[]): Promise<void> {
    const entries = new Map(this.#known.get(target.checkpointKey) ?? (await this.#read(store, target)))
    for (const write of writes) {
      const key = writeKey(write.taskId, write.index)
      // As the store keeps them: the first regular write of a key, the newest special one.
      if (write.index >= 0 && entries.has(key)) continue
      entries.set(key, [write.taskId, write.index, digestOf(target, { ...write, taskPath: write.taskPath ?? '' })])
    }
    const ledger: Ledger = { v: 1, checkpoint: target.checkpointKey, writes: [...entries.values()] }
    const row: PendingWrite = { taskId: LEDGER_TASK, index: LEDGER_INDEX, channel: LEDGER_CHANNEL, taskPath: '', value: ledger }
    this.#known.delete(target.checkpointKey)
    await store.putPendingWrites!({ runId: target.runId, checkpointId: target.checkpointKey, writes: [...writes, row] })
    this.#remember(target.checkpointKey, entries)
  }

  /** The ledger of a checkpoint this saver has not seen, read and checked. */
  async #read(store: CheckpointStore, target: WritesTarget): Promise<Map<string, LedgerEntry>> {
    this.verify(target, await listWrites(store, target.runId, [target]))
    return this.#known.get(target.checkpointKey)!
  }

  #remember(checkpointKey: string, entries: Map<string, LedgerEntry>): void {
    this.#known.delete(checkpointKey)
    this.#known.set(checkpointKey, entries)
    if (this.#known.size > KNOWN_LEDGERS) this.#known.delete(this.#known.keys().next().value!)
  }
}

/**
 * The pending writes of some checkpoints of one run, as the store lists them. A row the store
 * itself refuses (unsigned, not verifying, unreadable) is reported with the thread and the
 * LangGraph checkpoint it belongs to, keeping the store's error class.
 */
export async function listWrites(store: CheckpointStore, runId: string, targets: readonly WritesTarget[]): Promise<PendingWriteRecord[]> {
  try {
    return await store.listPendingWrites(runId, targets.map((target) => target.checkpointKey))
  } catch (err) {
    if (!(err instanceof CheckpointCorruptionError)) throw err
    const target = targets.find((t) => t.checkpointKey === err.checkpointId) ?? targets[0]
    if (!target) throw err
    const where = describe(target)
    const options = { runId: target.runId, checkpointId: target.checkpointKey, cause: err }
    const message = `the pending writes of ${where} do not check out: ${err.message}`
    throw err instanceof CheckpointIntegrityError ? new CheckpointIntegrityError(message, { ...options, keyId: err.keyId }) : new CheckpointCorruptionError(message, options)
  }
}

/** A LangGraph checkpoint as an error message names it. */
function describe(target: WritesTarget): string {
  const ns = target.place.checkpointNs === '' ? '' : ` (namespace ${JSON.stringify(target.place.checkpointNs)})`
  return `LangGraph checkpoint ${JSON.stringify(target.checkpointId)} of thread ${JSON.stringify(target.place.threadId)}${ns}`
}

/**
 * The error of a checkpoint (its pending writes by default) that does not check out, naming the
 * thread, the checkpoint and the task.
 */
export function corrupt(target: WritesTarget, problem: string, taskId: string | undefined, options: { subject?: string; cause?: unknown } = {}): CheckpointCorruptionError {
  const where = describe(target)
  const task = taskId === undefined ? '' : `task ${JSON.stringify(taskId)}: `
  const subject = options.subject ?? 'the pending writes of'
  return new CheckpointCorruptionError(
    `${subject} ${where} ${subject.endsWith('of') ? 'are' : 'is'} not what CairnSaver stored (${task}${problem}). Restore the store from a backup, or delete the thread (saver.deleteThread) to start it anew`,
    { runId: target.runId, checkpointId: target.checkpointKey, cause: options.cause },
  )
}

function writeKey(taskId: string, index: number): string {
  return JSON.stringify([taskId, index])
}

/**
 * A write's digest: SHA-256 over its checkpoint, key, channel, task path and value. A value in the
 * form the saver stores (the serde's text, or items of it) is hashed by that text as it is, with
 * no canonical re-encoding; any other value (bytes, or something the saver never wrote) by its
 * canonical JSON.
 */
function digestOf(target: WritesTarget, write: Pick<PendingWriteRecord, 'taskId' | 'index' | 'channel' | 'taskPath' | 'value'>): string {
  try {
    const text = textOf(write.value)
    const value = text === undefined ? ['c', canonicalJson(write.value)] : ['s', text]
    return sha256(JSON.stringify([target.checkpointKey, write.taskId, write.index, write.channel, write.taskPath, value]))
  } catch (err) {
    throw corrupt(target, `its write ${write.index} cannot be read back: ${(err as Error).message}`, write.taskId)
  }
}

/** The serde's text of a stored value (`{ t, s }`, or `items` of such), as one string; undefined for any other form. */
function textOf(value: unknown): string | undefined {
  if (typeof value !== 'object' || value === null) return undefined
  const stored = value as { t?: unknown; s?: unknown; items?: unknown }
  if (typeof stored.t !== 'string') return undefined
  if (Object.keys(stored).length !== 2) return undefined
  if (typeof stored.s === 'string') return JSON.stringify([stored.t, stored.s])
  if (stored.t !== 'items' || !Array.isArray(stored.items)) return undefined
  const items: string[] = []
  for (const item of stored.items as unknown[]) {
    const text = textOf(item)
    if (text === undefined) return undefined
    items.push(text)
  }
  return `[${items.join(',')}]`
}

function ledgerOf(target: WritesTarget, value: unknown): Ledger {
  const ledger = value as Partial<Ledger> | null
  const entries = typeof ledger === 'object' && ledger !== null && Array.isArray(ledger.writes) ? ledger.writes : undefined
  const valid =
    ledger?.v === 1 &&
    entries !== undefined &&
    entries.every((entry: unknown) => Array.isArray(entry) && entry.length === 3 && typeof entry[0] === 'string' && Number.isSafeInteger(entry[1]) && typeof entry[2] === 'string')
  if (!valid) throw corrupt(target, 'the ledger of its writes is not one CairnSaver wrote', undefined)
  if (ledger.checkpoint !== target.checkpointKey) throw corrupt(target, `the ledger of its writes belongs to checkpoint ${String(ledger.checkpoint)}: it was moved here`, undefined)
  return ledger as Ledger
}
