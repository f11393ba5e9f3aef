import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { Agent, Runner, type ContentBlock, type Message } from '../../src/index.js'
import { SqliteStore } from '../../src/sqlite.js'
import { ScriptedModel } from '../../src/testing.js'
import { logOf, ManualClock, sleeperAgent, waiterAgent } from './fixtures/time-agents.js'

const cleanups: (() => Promise<unknown>)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

const MINUTE = 60_000

/** A parent that calls its `helper` subagent once and answers with what came back. */
function parentAgent(runner: Runner, child: () => Agent, seen: string[]): Agent {
  const helper = runner.asTool(child, { name: 'helper', description: 'Ask the helper.' })
  const turn = (request: { messages: Message[] }): ContentBlock[] => {
    const results = request.messages.flatMap((m) => m.content.flatMap((b) => ('toolResult' in b ? [b.toolResult] : [])))
    if (results.length > 0) {
      seen.push(JSON.stringify(results[0]!.content))
      return [{ text: 'helped' }]
    }
    return [{ toolUse: { toolUseId: 'h1', name: 'helper', input: { prompt: 'go' } } }]
  }
  return new Agent({ name: 'parent', model: new ScriptedModel([turn, turn]), tools: [helper], systemPrompt: 'Delegate.' })
}

async function setup() {
  const dir = await mkdtemp(join(tmpdir(), 'cairn-subagent-time-'))
  cleanups.push(() => rm(dir, { recursive: true, force: true }))
  const store = new SqliteStore({ path: join(dir, 'cairn.db') })
  cleanups.push(() => store.close())
  const clock = new ManualClock()
  return { dir, store, clock, runner: new Runner({ store, clock }) }
}

describe('a subagent that sleeps or waits', () => {
  it('a child that sleeps makes its parent sleep until the child wakes; then the child goes on past its sleep, once', async () => {
    const { dir, store, clock, runner } = await setup()
    const seen: string[] = []
    const parent = () => parentAgent(runner, () => sleeperAgent(dir, 10 * MINUTE), seen)
    const first = await runner.run(parent(), { input: 'help me', runId: 'boss' })
    expect(first.state).toBe('sleeping')
    expect((await store.getRun('boss:h1'))?.status).toBe('sleeping')
    expect(await store.waits!.getTimer('boss')).toBe(clock.now() + 10 * MINUTE)

    clock.advance(10 * MINUTE - 1)
    expect((await runner.resume(parent(), { runId: 'boss' })).state).toBe('sleeping')
    expect(logOf(dir)).toEqual(['before'])

    clock.advance(1)
    const done = await runner.resume(parent(), { runId: 'boss' })
    expect(done.state).toBe('completed')
    expect((await store.getRun('boss:h1'))?.status).toBe('completed')
    expect(logOf(dir).filter((line) => line === 'after')).toHaveLength(1)
    expect(logOf(dir).filter((line) => line === 'effect')).toHaveLength(1)
    expect(seen).toHaveLength(1)
    expect(seen[0]).toContain('done')
  })

  it('a child that waits for an event fails the call with subagent_waiting, naming the limit', async () => {
    const { dir, runner } = await setup()
    const seen: string[] = []
    const result = await runner.run(parentAgent(runner, () => waiterAgent(dir, 'o-1'), seen), { input: 'help me', runId: 'boss' })
    expect(result.state).toBe('completed')
    expect(seen[0]).toContain('waits for an event')
    expect(seen[0]).toContain('boss:h1')
  })
})
