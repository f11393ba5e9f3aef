import { MemoryEngine } from '../../src/engine.js'
import { type StorageEngine } from '../../src/engine.js'
import { runEngineConformance } from '../../src/testing.js'

// The data lives in the engine instance: the same location gives the same engine.
const engines = new Map<string, StorageEngine>()
await runEngineConformance({
  name: 'memory',
  persistent: false,
  open: (location) => {
    const engine = engines.get(location) ?? new MemoryEngine()
    engines.set(location, engine)
    return engine
  },
})
