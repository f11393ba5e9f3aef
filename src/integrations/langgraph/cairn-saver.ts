import type { RunnableConfig } from '@langchain/core/runnables'
import type {
  ChannelVersions,
  Checkpoint,
  CheckpointListOptions,
  CheckpointMetadata,
  CheckpointPendingWrite,
  CheckpointTuple,
  PendingWrite,
  SerializerProtocol,
} from '@langchain/langgraph-checkpoint'
import { CairnError, CheckpointError, InvalidArgumentError } from '../../core/errors.js'
import type { CheckpointInfo, CheckpointRecord, CheckpointStore, PendingWriteRecord } from '../../store/checkpoint-store.js'
import { LANGGRAPH_KIND, checkpointKeyOf, runIdOf, type ThreadNamespace } from './identity.js'
import { loadValue, storeArray, storeValue, type RevivedItemMemo, type StoredArray, type StoredItemMemo, type StoredValue, type WrittenItemMemo } from './stored-values.js'
import { listHeaders, threadRuns, type ListedHeader, type SavedHeader } from './thread-listing.js'
import { importPeer } from '../../core/peers.js'
import { WritesLedgers, corrupt, listWrites, type WritesTarget } from './pending-writes.js'

const { BaseCheckpointSaver, TASKS, WRITES_IDX_MAP, getCheckpointId, maxChannelVersion } = await importPeer<typeof import('@langchain/langgraph-checkpoint')>({
  name: '@langchain/langgraph-checkpoint',
  neededBy: 'cairn-agents/langgraph',
})

/** Checkpoints a listing reads from the store at once. */
const LIST_PAGE = 100

/** Options of {@link CairnSaver}. */
export interface CairnSaverOptions {
  /** Any Cairn store: `MemoryStore`, `FileStore`, `SqliteStore`, `PostgresStore`. */
  store: CheckpointStore
  /** How LangGraph values become bytes; LangGraph's default serializer when omitted. */
  serde?: SerializerProtocol
}

/** The payload of a LangGraph checkpoint in a Cairn checkpoint. */
interface SavedCheckpoint {
  /** The checkpoint without its channel values. */
  checkpoint: Omit<Checkpoint, 'channel_values'>
  /** The channel values the checkpoint stores, each through the saver's serde. */
  values: Record<string, StoredValue>
}

/**
 * A LangGraph checkpointer (`BaseCheckpointSaver`) over any Cairn {@link CheckpointStore}. Each
 * thread's namespace is a Cairn run and each LangGraph checkpoint a Cairn checkpoint of it, so
 * the store's integrity checks, retention, signing and tools apply. Array channels (the
 * conversation) are stored item by item through Cairn's append-only lists: a thread of n steps
 * stores O(n) bytes, not O(n²). Pending writes have their own place in the store.
 *
 * The latest checkpoint of a thread is the one put last; `getTuple` by id and the latest
 * checkpoint each take a constant number of store reads, however long the thread.
 *
 * @example
 * ```ts
 * const checkpointer = new CairnSaver({ store: new SqliteStore({ path: 'graph.db' }) })
 * const graph = builder.compile({ checkpointer })
 * await graph.invoke(input, { configurable: { thread_id: 'chat-1' } })
 * ```
 */
export class CairnSaver extends BaseCheckpointSaver {
  readonly store: CheckpointStore
  /** Runs known to exist, so a put creates each run once. */
  readonly #runs = new Set<string>()
  /** The channels each recently put checkpoint stores, by Cairn id: what its child may carry over. */
  readonly #stored = new Map<string, ChannelVersions>()
  /** The array channels each run stored last, by run, with the arrays they were made from: what the next put reuses items of. */
  readonly #arrays = new Map<string, Map<string, StoredArray>>()
  /** The stored form of every array item object put so far: a put serializes only new items. */
  readonly #items: StoredItemMemo = new WeakMap()
  /** The stored form of every array item object of a pending write, for the put that holds it next. */
  readonly #written: WrittenItemMemo = new WeakMap()
  /** What each checkpoint's pending writes are, and the ledger that proves it. */
  readonly #ledgers = new WritesLedgers()
  /** The puts under way, by Cairn id: the writes of a checkpoint wait for it to be saved. */
  readonly #saving = new Map<string, Promise<unknown>>()

  constructor(options: CairnSaverOptions) {
    super(options.serde)
    if (typeof options?.store?.putPendingWrites !== 'function' || typeof options.store.listPendingWrites !== 'function') {
      throw new InvalidArgumentError('CairnSaver needs a store with pending writes (putPendingWrites, listPendingWrites): every built-in Cairn store has them')
    }
    this.store = options.store
  }

  async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    const place = placeOf(config)
    if (!place) return undefined
    const checkpointId = getCheckpointId(config)
    const runId = runIdOf(place)
    let record: CheckpointRecord<SavedCheckpoint> | undefined
    if (checkpointId) {
      record = await this.#loadIfExists(checkpointKeyOf(place, checkpointId))
      if (record && record.runId !== runId) record = undefined
    } else {
      record = await this.store.getLatest<SavedCheckpoint>({ runId })
    }
    if (!record || record.kind !== LANGGRAPH_KIND) return undefined
    const target: WritesTarget = { place, checkpointId: headerOf(record)?.checkpointId ?? checkpointId ?? record.id, runId, checkpointKey: record.id }
    return this.#tuple(record, await listWrites(this.store, runId, [target]))
  }

  async *list(config: RunnableConfig, options: CheckpointListOptions = {}): AsyncGenerator<CheckpointTuple> {
    const threadId = threadIdOf(config)
    const ns = config.configurable?.checkpoint_ns as unknown
    const runs = await threadRuns(this.store, threadId, typeof ns === 'string' ? ns : undefined)
    const listed = await listHeaders(this.store, runs, {
      checkpointId: getCheckpointId(config) || undefined,
      before: options.before ? getCheckpointId(options.before) || undefined : undefined,
      limit: options.limit,
      filter: options.filter,
      metadataOf: (header) => this.#metadataOf(header),
    })
    // Load page by page, each run's checkpoints and pending writes in one read each; revive one at a
    // time, each stored item once for the whole listing (the states of a thread share their messages).
    const revived: RevivedItemMemo = new WeakMap()
    for (let start = 0; start < listed.length; start += LIST_PAGE) {
      const page = listed.slice(start, start + LIST_PAGE)
      const { records, writes } = await this.#loadListed(page)
      for (const { info } of page) yield await this.#tuple(records.get(info.id)!, writes.get(info.id) ?? [], revived)
    }
  }

  async put(config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, newVersions: ChannelVersions): Promise<RunnableConfig> {
    const place = placeOf(config)
    if (!place) throw new InvalidArgumentError('CairnSaver.put needs config.configurable.thread_id: pass { configurable: { thread_id } } to the graph')
    // LangGraph does not wait for a put before the checkpoint's tasks run and put their writes
    // (durability "async"): those writes wait for this put, so they follow the checkpoint into
    // the store and extend the ledger it starts, with no read of the store.
    const key = checkpointKeyOf(place, checkpoint.id)
    const saving = this.#put(place, key, config, checkpoint, metadata, newVersions)
    this.#saving.set(key, saving)
    try {
      return await saving
    } finally {
      if (this.#saving.get(key) === saving) this.#saving.delete(key)
    }
  }

  async #put(place: ThreadNamespace, key: string, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, newVersions: ChannelVersions): Promise<RunnableConfig> {
    // A thread's run and its last checkpoint's channels are known after its first put: no await for them.
    const known = runIdOf(place)
    const runId = this.#runs.has(known) ? known : await this.#ensureRun(place)
    const parentId = (config.configurable?.checkpoint_id as string | undefined) || null
    const parentKey = parentId === null ? null : checkpointKeyOf(place, parentId)
    const carried = parentKey === null ? {} : (this.#stored.get(parentKey) ?? (await this.#storedOf(parentKey)))
    const { channel_values: channelValues, ...rest } = checkpoint
    const values: Record<string, StoredValue> = {}
    const stored: ChannelVersions = {}
    const arrays = this.#arrays.get(runId)
    const storedArrays = new Map<string, StoredArray>()
    for (const [channel, value] of Object.entries(channelValues ?? {})) {
      const version = checkpoint.channel_versions?.[channel]
      const changed = Object.prototype.hasOwnProperty.call(newVersions, channel)
      const kept = version !== undefined && carried[channel] === version
      if (value === undefined || (!changed && !kept)) continue
      const reuse = { previous: arrays?.get(channel), memo: this.#items, written: this.#written }
      if (Array.isArray(value)) {
        const array = await storeArray(this.serde, value as unknown[], reuse)
        values[channel] = array.stored
        storedArrays.set(channel, array)
      } else values[channel] = await storeValue(this.serde, value, reuse)
      if (version !== undefined) stored[channel] = version
    }
    const header: SavedHeader = { ...place, checkpointId: checkpoint.id, parentId, metadata: await storeValue(this.serde, metadata), stored }
    const input = {
      id: key,
      runId,
      parentId: parentKey,
      kind: LANGGRAPH_KIND,
      phase: typeof metadata?.source === 'string' ? metadata.source : 'step',
      metadata: { langgraph: header } as never,
      payload: { checkpoint: rest, values } satisfies SavedCheckpoint,
    }
    try {
      await this.store.save(input)
      this.#ledgers.saved(key)
    } catch (err) {
      // The same checkpoint put again replaces the stored one, and its writes.
      if (!(err instanceof InvalidArgumentError) || !(await this.store.delete(key))) throw err
      await this.store.save(input)
      this.#ledgers.fresh(key)
    }
    this.#remember(key, stored)
    this.#rememberArrays(runId, storedArrays)
    return { configurable: { thread_id: place.threadId, checkpoint_ns: place.checkpointNs, checkpoint_id: checkpoint.id } }
  }

  async putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath?: string): Promise<void> {
    const place = placeOf(config)
    if (!place) throw new InvalidArgumentError('CairnSaver.putWrites needs config.configurable.thread_id')
    const checkpointId = config.configurable?.checkpoint_id as unknown
    if (typeof checkpointId !== 'string' || checkpointId === '') {
      throw new InvalidArgumentError('CairnSaver.putWrites needs config.configurable.checkpoint_id: the checkpoint the writes belong to')
    }
    const stored = await Promise.all(
      writes.map(async ([channel, value], idx) => ({
        taskId,
        index: WRITES_IDX_MAP[channel] ?? idx,
        channel,
        taskPath: taskPath ?? '',
        value: await storeValue(this.serde, value, { writing: this.#written }),
      })),
    )
    const target = { place, checkpointId, runId: runIdOf(place), checkpointKey: checkpointKeyOf(place, checkpointId) }
    // A put that fails leaves its writes to the ledger as the store holds it.
    await this.#saving.get(target.checkpointKey)?.catch(() => undefined)
    await this.#ledgers.append(this.store, target, stored)
  }

  async deleteThread(threadId: string): Promise<void> {
    for (const runId of await threadRuns(this.store, String(threadId), undefined)) {
      this.#runs.delete(runId)
      this.#arrays.delete(runId)
      await this.store.deleteRun(runId)
    }
    this.#stored.clear()
    this.#ledgers.forget()
  }

  async #ensureRun(place: ThreadNamespace): Promise<string> {
    const runId = runIdOf(place)
    if (this.#runs.has(runId)) return runId
    if (!(await this.store.getRun(runId))) {
      try {
        await this.store.createRun({ runId, name: LANGGRAPH_KIND, threadId: place.threadId, metadata: { langgraph: { ...place } } })
      } catch (err) {
        if (!(err instanceof CheckpointError) || err.code !== 'run_exists') throw err
      }
    }
    this.#runs.add(runId)
    return runId
  }

  async #storedOf(key: string): Promise<ChannelVersions> {
    const known = this.#stored.get(key)
    if (known) return known
    const record = await this.#loadIfExists(key)
    return (record && headerOf(record)?.stored) ?? {}
  }

  #remember(key: string, stored: ChannelVersions): void {
    this.#stored.set(key, stored)
    if (this.#stored.size > 256) this.#stored.delete(this.#stored.keys().next().value!)
  }

  #rememberArrays(runId: string, arrays: Map<string, StoredArray>): void {
    this.#arrays.delete(runId)
    if (arrays.size > 0) this.#arrays.set(runId, arrays)
    if (this.#arrays.size > 64) this.#arrays.delete(this.#arrays.keys().next().value!)
  }

  async #loadIfExists(key: string): Promise<CheckpointRecord<SavedCheckpoint> | undefined> {
    try {
      return await this.store.load<SavedCheckpoint>(key)
    } catch (err) {
      if (err instanceof CheckpointError && err.code === 'checkpoint_not_found') return undefined
      throw err
    }
  }

  async #metadataOf(header: SavedHeader): Promise<CheckpointMetadata> {
    return (await loadValue(this.serde, header.metadata)) as CheckpointMetadata
  }

  async #loadListed(listed: readonly ListedHeader[]) {
    const byRun = new Map<string, WritesTarget[]>()
    for (const { info, header } of listed) {
      const target = { place: { threadId: header.threadId, checkpointNs: header.checkpointNs }, checkpointId: header.checkpointId, runId: info.runId, checkpointKey: info.id }
      byRun.set(info.runId, [...(byRun.get(info.runId) ?? []), target])
    }
    const records = new Map<string, CheckpointRecord<SavedCheckpoint>>()
    const writes = new Map<string, PendingWriteRecord[]>()
    for (const [runId, targets] of byRun) {
      const ids = targets.map((target) => target.checkpointKey)
      const loaded = await this.store.loadMany<SavedCheckpoint>(ids)
      for (const record of loaded) records.set(record.id, record)
      for (const write of await listWrites(this.store, runId, targets)) writes.set(write.checkpointId, [...(writes.get(write.checkpointId) ?? []), write])
    }
    return { records, writes }
  }

  async #tuple(record: CheckpointRecord<SavedCheckpoint> | CheckpointInfo & { payload: SavedCheckpoint }, writes: readonly PendingWriteRecord[], revived?: RevivedItemMemo): Promise<CheckpointTuple> {
    const header = headerOf(record)
    if (!header) throw new CheckpointError('checkpoint_corrupt', `checkpoint ${record.id} of run ${record.runId} is not a LangGraph checkpoint`, { runId: record.runId, checkpointId: record.id })
    const place = { threadId: header.threadId, checkpointNs: header.checkpointNs }
    const target: WritesTarget = { place, checkpointId: header.checkpointId, runId: record.runId, checkpointKey: record.id }
    const checked = this.#ledgers.verify(target, writes)
    const channelValues: Record<string, unknown> = {}
    for (const [channel, value] of Object.entries(record.payload.values)) {
      channelValues[channel] = await revive(target, `its channel ${JSON.stringify(channel)}`, undefined, () => loadValue(this.serde, value, { revived, stored: this.#items }))
    }
    const checkpoint = { ...record.payload.checkpoint, channel_values: channelValues } as Checkpoint
    if (checkpoint.v < 4 && header.parentId !== null) await this.#migratePendingSends(checkpoint, place, header.parentId)
    const pendingWrites: CheckpointPendingWrite[] = await Promise.all(checked.map(async (write) => [write.taskId, write.channel, await this.#writeValue(target, write)] as CheckpointPendingWrite))
    const tuple: CheckpointTuple = {
      config: { configurable: { thread_id: header.threadId, checkpoint_ns: header.checkpointNs, checkpoint_id: header.checkpointId } },
      checkpoint,
      metadata: await this.#metadataOf(header),
      pendingWrites,
    }
    if (header.parentId !== null) {
      tuple.parentConfig = { configurable: { thread_id: header.threadId, checkpoint_ns: header.checkpointNs, checkpoint_id: header.parentId } }
    }
    return tuple
  }

  /** The value of a pending write, through the serde; a value the serde cannot read is a corrupt write. */
  #writeValue(target: WritesTarget, write: PendingWriteRecord): Promise<unknown> {
    return revive(target, `its write ${write.index} on channel ${JSON.stringify(write.channel)}`, write.taskId, () => loadValue(this.serde, write.value as StoredValue))
  }

  /** A checkpoint older than format 4 gets the sends its parent's tasks wrote, as LangGraph expects. */
  async #migratePendingSends(checkpoint: Checkpoint, place: ThreadNamespace, parentId: string): Promise<void> {
    const target: WritesTarget = { place, checkpointId: parentId, runId: runIdOf(place), checkpointKey: checkpointKeyOf(place, parentId) }
    const writes = this.#ledgers.verify(target, await listWrites(this.store, target.runId, [target]))
    const sends = await Promise.all(writes.filter((write) => write.channel === TASKS).map((write) => this.#writeValue(target, write)))
    checkpoint.channel_values ??= {}
    checkpoint.channel_values[TASKS] = sends
    checkpoint.channel_versions ??= {}
    const versions = Object.values(checkpoint.channel_versions)
    checkpoint.channel_versions[TASKS] = versions.length > 0 ? maxChannelVersion(...versions) : this.getNextVersion(undefined)
  }
}

/** A stored value revived, or a `CheckpointCorruptionError` naming where it is when it is not a value the saver stored. */
async function revive(target: WritesTarget, what: string, taskId: string | undefined, load: () => Promise<unknown>): Promise<unknown> {
  try {
    return await load()
  } catch (err) {
    if (err instanceof CairnError) throw err
    const subject = taskId === undefined ? 'the values of' : 'the pending writes of'
    throw corrupt(target, `${what} cannot be read back: ${(err as Error)?.message ?? String(err)}`, taskId, { subject, cause: err })
  }
}

function threadIdOf(config: RunnableConfig): string | undefined {
  const threadId = config?.configurable?.thread_id as unknown
  if (typeof threadId === 'string' && threadId !== '') return threadId
  if (typeof threadId === 'number') return String(threadId)
  return undefined
}

function placeOf(config: RunnableConfig): ThreadNamespace | undefined {
  const threadId = threadIdOf(config)
  if (threadId === undefined) return undefined
  const ns = config.configurable?.checkpoint_ns as unknown
  return { threadId, checkpointNs: typeof ns === 'string' ? ns : '' }
}

/** The LangGraph header of a Cairn checkpoint, if it has one. */
export function headerOf(info: Pick<CheckpointInfo, 'metadata'>): SavedHeader | undefined {
  const header = info.metadata?.langgraph as unknown
  return typeof header === 'object' && header !== null ? (header as SavedHeader) : undefined
}
