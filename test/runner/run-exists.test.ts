import { describe, expect, it } from 'vitest'
import { CheckpointError, Runner } from '../../src/index.js'
import { exportRun, importRun } from '../../src/store/portable-run.js'
import { researchAgent, sqliteStore, World } from './helpers.js'

describe('an existing run id', () => {
  it('is one error class whichever layer notices it first: a CheckpointError with code run_exists', async () => {
    const { store } = await sqliteStore()
    const runner = new Runner({ store })
    await runner.run(researchAgent(new World()).agent, { input: 'x', runId: 'taken' })
    const fromRunner = await runner.run(researchAgent(new World()).agent, { input: 'x', runId: 'taken' }).catch((err: unknown) => err)
    const fromStore = await store.createRun({ runId: 'taken' }).catch((err: unknown) => err)
    const fromImport = await importRun(store, await exportRun(store, 'taken')).catch((err: unknown) => err)
    for (const error of [fromRunner, fromStore, fromImport]) {
      expect(error).toBeInstanceOf(CheckpointError)
      expect(error).toMatchObject({ code: 'run_exists', runId: 'taken' })
    }
  })
})
