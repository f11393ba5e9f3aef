import { EngineStore, MemoryEngine } from '../../src/engine.js'
import { type CheckpointRow, type ListRef } from '../../src/engine.js'
import { runStoreConformance, type CorruptionKind } from '../../src/testing.js'

/** A memory engine that can damage what it hands back, as a disk or a careless operator would. */
class TamperingEngine extends MemoryEngine {
  readonly damaged = new Map<string, CorruptionKind>()

  override async getCheckpoint(id: string): Promise<CheckpointRow | undefined> {
    return this.#damage(await super.getCheckpoint(id))
  }

  override async getLatest(query: { runId: string } | { workflowName: string }): Promise<CheckpointRow | undefined> {
    return this.#damage(await super.getLatest(query))
  }

  override async readLists(runId: string, refs: readonly ListRef[]): Promise<string[][]> {
    const lists = await super.readLists(runId, refs)
    const editedList = [...this.damaged.entries()].some(([, kind]) => kind === 'edit-list-item')
    if (editedList && lists[0] && lists[0].length > 0) lists[0][0] = lists[0][0]!.replace('m0:', 'M0:')
    return lists
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
