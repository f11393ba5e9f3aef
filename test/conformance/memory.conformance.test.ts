import { EngineStore, MemoryEngine } from '../../src/engine.js'
import { type CheckpointHeaderRow, type CheckpointListing, type CheckpointRow, type ListRange, type RunLoad } from '../../src/engine.js'
import { runStoreConformance, type CorruptionKind } from '../../src/testing.js'

/** A memory engine that can damage what it hands back, as a disk or a careless operator would. */
class TamperingEngine extends MemoryEngine {
  readonly damaged = new Map<string, CorruptionKind>()

  override async getCheckpoints(ids: readonly string[]): Promise<CheckpointRow[]> {
    return (await super.getCheckpoints(ids)).map((row) => this.#damage(row)!)
  }

  override async listCheckpoints(query: CheckpointListing): Promise<CheckpointHeaderRow[]> {
    const rows = await super.listCheckpoints(query)
    return query.rows === true ? rows.map((row) => this.#damage(row as CheckpointRow)!) : rows
  }

  override async getLatest(query: { runId: string } | { workflowName: string }): Promise<CheckpointRow | undefined> {
    return this.#damage(await super.getLatest(query))
  }

  override async readLists(runId: string, refs: readonly ListRange[]): Promise<string[][]> {
    const lists = await super.readLists(runId, refs)
    if (lists[0]) this.#damageItems(lists[0])
    return lists
  }

  override async loadRun(runId: string, request: { recent: number }): Promise<RunLoad> {
    const read = await super.loadRun(runId, request)
    const data = read.lists.find((list) => list.id !== 'run-log')
    if (data) this.#damageItems(data.items)
    return { ...read, checkpoints: read.checkpoints.map((row) => this.#damage(row)!) }
  }

  #damageItems(items: string[]): void {
    const editedList = [...this.damaged.entries()].some(([, kind]) => kind === 'edit-list-item')
    if (editedList && items.length > 0) items[0] = items[0]!.replace('m0:', 'M0:')
  }

  #damage(row: CheckpointRow | undefined): CheckpointRow | undefined {
    const kind = row && this.damaged.get(row.id)
    if (!row || !kind) return row
    switch (kind) {
      case 'truncate':
        return { ...row, body: row.body.slice(0, Math.floor(row.body.length / 2)) }
      case 'garble':
        return { ...row, body: `${row.body.slice(0, 5)}\u0000\u00ff#garbage${row.body.slice(14)}` }
      case 'edit':
        return { ...row, body: row.body.replace('"n":4', '"n":40') }
      case 'edit-list-item':
        return row
    }
  }
}

const engines = new WeakMap<object, TamperingEngine>()

await runStoreConformance({
  name: 'memory',
  persistent: false,
  open: () => {
    const engine = new TamperingEngine()
    const store = new EngineStore(engine)
    engines.set(store, engine)
    return store
  },
  corrupt: async ({ store, checkpointId, kind }) => {
    engines.get(store)!.damaged.set(checkpointId, kind)
  },
})
