import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach } from 'vitest'
import { EngineStore } from '../../store/engine-store.js'
import type { StorageEngine } from '../../store/engine/storage-engine.js'
import type { EngineFactory } from './engine-factory.js'

/** What each engine case gets: a fresh location per test and handles on it. */
export interface EngineContext {
  factory: EngineFactory
  /** The engine opened for the current test. */
  engine(): StorageEngine
  /** Another handle on the current test's data (the same instance for an in-process engine). */
  openEngine(): Promise<StorageEngine>
  /** A store over a new handle on the current test's data. */
  openStore(): Promise<EngineStore>
}

/** Register per-test setup and teardown: a temp location, its first engine, and cleanup. */
export function useEngineContext(factory: EngineFactory): EngineContext {
  let location = ''
  let first: StorageEngine | undefined
  const opened = new Set<StorageEngine>()

  const openEngine = async (): Promise<StorageEngine> => {
    const engine = await factory.open(location)
    opened.add(engine)
    return engine
  }

  beforeEach(async () => {
    location = await mkdtemp(join(tmpdir(), `cairn-engine-${factory.name.replace(/[^A-Za-z0-9_-]/g, '_')}-`))
    first = await openEngine()
  })

  afterEach(async () => {
    await Promise.allSettled([...opened].map((engine) => engine.close()))
    opened.clear()
    first = undefined
    await rm(location, { recursive: true, force: true })
  })

  return {
    factory,
    engine: () => {
      if (!first) throw new Error('no engine is open for this test')
      return first
    },
    openEngine,
    // Closing the engine is the context's job, so the store is not closed on its own.
    openStore: async () => new EngineStore(await openEngine(), { onWarning: () => {} }),
  }
}

/** The optional capabilities of an engine the suite found. */
export interface EngineCapabilities {
  leases: boolean
  pendingWrites: boolean
}

/** Open one engine on a scratch location to see which optional capabilities it has, then close it. */
export async function probeCapabilities(factory: EngineFactory): Promise<EngineCapabilities> {
  const location = await mkdtemp(join(tmpdir(), 'cairn-engine-probe-'))
  try {
    const engine = await factory.open(location)
    try {
      return { leases: engine.leases !== undefined, pendingWrites: typeof engine.putWrites === 'function' && typeof engine.listWrites === 'function' }
    } finally {
      await engine.close()
    }
  } finally {
    await rm(location, { recursive: true, force: true })
  }
}
