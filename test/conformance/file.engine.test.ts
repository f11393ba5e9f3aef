import { FileEngine } from '../../src/engine.js'
import { runEngineConformance } from '../../src/testing.js'

await runEngineConformance({ name: 'file', open: (location) => new FileEngine({ directory: location, onWarning: () => {} }) })
