/**
 * Time of `CairnSaver.put` + `putWrites` as a thread grows, on SQLite: each step appends one ~1 KB
 * message (the same message objects carried from step to step, as LangGraph does) and writes one
 * pending write. Prints µs per step by window of steps.
 *
 *   npx tsx bench/saver-put-profile.ts [steps] [synchronous]     (default: 1000 normal)
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { AIMessage, type BaseMessage } from '@langchain/core/messages'
import { emptyCheckpoint, uuid6, type Checkpoint } from '@langchain/langgraph-checkpoint'
import { CairnSaver } from '../src/langgraph.js'
import { SqliteStore } from '../src/sqlite.js'

const steps = Number(process.argv[2] ?? 1000)
const synchronous = (process.argv[3] ?? 'normal') as 'full' | 'normal'
const dir = mkdtempSync(join(tmpdir(), 'cairn-saver-put-'))
const store = new SqliteStore({ path: join(dir, 'saver.db'), synchronous })
const saver = new CairnSaver({ store })
let config = { configurable: { thread_id: 'profile', checkpoint_ns: '' } } as Record<string, Record<string, unknown>>
const messages: BaseMessage[] = []
const window = 100
let started = performance.now()
for (let step = 0; step < steps; step++) {
  messages.push(new AIMessage({ content: `message ${step} `.repeat(80), id: `m${step}` }))
  const checkpoint: Checkpoint = { ...emptyCheckpoint(), id: uuid6(-1), channel_values: { messages: [...messages], step }, channel_versions: { messages: step + 1, step: step + 1 } }
  config = (await saver.put(config, checkpoint, { source: 'loop', step, parents: {} }, { messages: step + 1, step: step + 1 })) as typeof config
  await saver.putWrites(config, [['messages', [messages[messages.length - 1]]]], `task-${step}`)
  if ((step + 1) % window === 0) {
    const now = performance.now()
    console.log(`steps ${step + 1 - window}–${step + 1}: ${(((now - started) / window) * 1000).toFixed(0)} µs/step`)
    started = now
  }
}
await store.close()
rmSync(dir, { recursive: true, force: true })
