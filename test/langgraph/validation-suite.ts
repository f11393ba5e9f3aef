import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import type { CheckpointStore } from 'cairn-agents'
import { CairnSaver } from 'cairn-agents/langgraph'

/** One store backend under LangGraph's checkpointer validation suite. */
export interface SaverBackend {
  name: string
  /** A fresh, empty store: each checkpointer of the suite sees only its own writes. */
  open(): CheckpointStore | Promise<CheckpointStore>
  beforeAll?(): Promise<void>
  afterAll?(): Promise<void>
}

/**
 * Run LangGraph's own checkpointer validation suite (every case, and the opt-in delta-channel
 * history cases) against `CairnSaver` on `backend`. The suite is written for test globals, so
 * vitest's are handed to it first.
 */
export async function validateCairnSaver(backend: SaverBackend): Promise<void> {
  Object.assign(globalThis, { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it })
  const { validate, deltaChannelHistoryTests } = await import('@langchain/langgraph-checkpoint-validation')
  const stores = new WeakMap<CairnSaver, CheckpointStore>()
  const initializer = {
    checkpointerName: `CairnSaver on ${backend.name}`,
    beforeAllTimeout: 60_000,
    beforeAll: () => backend.beforeAll?.(),
    afterAll: () => backend.afterAll?.(),
    createCheckpointer: async () => {
      const store = await backend.open()
      const saver = new CairnSaver({ store })
      stores.set(saver, store)
      return saver
    },
    destroyCheckpointer: async (saver: CairnSaver) => {
      await stores.get(saver)?.close()
    },
  }
  validate(initializer)
  deltaChannelHistoryTests(initializer)
}
