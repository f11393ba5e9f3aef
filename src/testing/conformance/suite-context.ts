import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach } from 'vitest'
import type { CheckpointStore } from '../../store/checkpoint-store.js'
import type { StoreFactory } from './store-factory.js'

export { conversation } from './fixtures.js'

/** What each conformance case gets: a fresh location and store per test. */
export interface SuiteContext {
  factory: StoreFactory
  /** The temp directory of the current test. */
  location(): string
  /** The store opened for the current test. */
  store(): CheckpointStore
  /** Close the current store and open the same location again (persistent stores only). */
  reopen(): Promise<CheckpointStore>
  /** Open an extra handle on the same location; closed after the test. */
  openAnother(): Promise<CheckpointStore>
}

/** Register per-test setup and teardown and return the accessors. */
export function useSuiteContext(factory: StoreFactory): SuiteContext {
  let location = ''
  let current: CheckpointStore | undefined
  const extra: CheckpointStore[] = []

  beforeEach(async () => {
    location = await mkdtemp(join(tmpdir(), `cairn-conformance-${factory.name}-`))
    current = await factory.open(location)
  })

  afterEach(async () => {
    await Promise.allSettled([current?.close(), ...extra.map((store) => store.close())])
    extra.length = 0
    current = undefined
    await rm(location, { recursive: true, force: true })
  })

  return {
    factory,
    location: () => location,
    store: () => {
      if (!current) throw new Error('no store is open for this test')
      return current
    },
    reopen: async () => {
      await current?.close()
      current = await factory.open(location)
      return current
    },
    openAnother: async () => {
      const store = await factory.open(location)
      extra.push(store)
      return store
    },
  }
}
