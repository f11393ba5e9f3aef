import type { PostgresTarget } from '../fixtures/postgres-target.js'
import { postgresTarget } from '../fixtures/postgres-target.js'
import { validateCairnSaver } from './validation-suite.js'

let target: PostgresTarget | undefined

await validateCairnSaver({
  name: 'PostgresStore',
  beforeAll: async () => {
    target = await postgresTarget()
  },
  afterAll: async () => target?.close(),
  open: async () => {
    target ??= await postgresTarget()
    return target.openStore(target.freshSchema())
  },
})
