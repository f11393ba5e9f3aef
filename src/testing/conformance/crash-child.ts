/**
 * Child process of the conformance suite. Usage:
 *   crash-child <storeModule> <location> save-loop <runId>
 *     continue the run from its latest checkpoint and save forever, printing `saved <i>` after
 *     each save returns (the parent kills it with SIGKILL at a random instant);
 *   crash-child <storeModule> <location> writer <runId> <writerName> <count>
 *     save `count` checkpoints to the run, then exit.
 */
import { pathToFileURL } from 'node:url'
import type { CheckpointStore } from '../../store/checkpoint-store.js'
import { conversation } from './fixtures.js'

const [storeModule, location, mode, runId, writer, count] = process.argv.slice(2)
if (!storeModule || !location || !mode || !runId) throw new Error('usage: crash-child <storeModule> <location> <mode> <runId> …')
const { openStore } = (await import(pathToFileURL(storeModule).href)) as { openStore: (location: string) => Promise<CheckpointStore> }
const store = await openStore(location)

if (mode === 'save-loop') {
  const latest = await store.getLatest<{ i: number }>({ runId })
  for (let i = latest ? latest.payload.i + 1 : 0; ; i++) {
    await store.save({ runId, kind: 'torture', phase: i % 2 === 0 ? 'after_model' : 'after_tools', metadata: { i }, payload: { i, messages: conversation(i + 1) } })
    process.stdout.write(`saved ${i}\n`)
  }
} else if (mode === 'writer') {
  const total = Number(count)
  for (let k = 0; k < total; k++) {
    await store.save({ runId, kind: 'writer', phase: 'p', payload: { writer, k, messages: conversation((k % 7) + 1, writer) } })
  }
  await store.close()
} else {
  throw new Error(`unknown mode ${mode}`)
}
