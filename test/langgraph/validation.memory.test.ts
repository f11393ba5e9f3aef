import { MemoryStore } from 'cairn'
import { validateCairnSaver } from './validation-suite.js'

await validateCairnSaver({ name: 'MemoryStore', open: () => new MemoryStore() })
