import { MemoryStore } from 'cairn-agents'
import { validateCairnSaver } from './validation-suite.js'

await validateCairnSaver({ name: 'MemoryStore', open: () => new MemoryStore() })
