/**
 * Readers racing a writer on a keyed store: a run that commits many steps, and a loop of reads of
 * it (`getRun`, `getLatest`, `listCheckpoints`, `listEffects`) in the writer's process or in
 * another one. Every read must see a consistent run: a read that meets a commit half-way is never
 * reported as a rollback. Shared by the test and its child process (`read-race-child.ts`).
 */
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { Agent, FileStore, tool, type CheckpointStore, type ContentBlock, type Message } from '../../src/index.js'
import { SqliteStore } from '../../src/sqlite.js'
import { PostgresStore } from '../../src/postgres.js'
import { ScriptedModel } from '../../src/testing.js'
import { serverUrl } from '../fixtures/postgres-target.js'
import { KEY_A } from './scenario.js'

/** Where a raced store lives: a directory (file), a database file (SQLite) or a schema on the test server (Postgres). */
export interface RaceTarget {
  kind: 'file' | 'sqlite' | 'postgres'
  location: string
  encrypt: boolean
}

export function openRaceStore(target: RaceTarget): CheckpointStore {
  const keys = { keys: [KEY_A], encrypt: target.encrypt }
  if (target.kind === 'file') return new FileStore({ directory: target.location, ...keys })
  if (target.kind === 'sqlite') return new SqliteStore({ path: target.location, ...keys })
  return new PostgresStore({ connectionString: serverUrl(), schema: target.location, ...keys })
}

/** An agent that calls a non-idempotent tool `steps` times, one call a turn, then answers. */
export function steppingAgent(steps: number, beforeStep: (n: number) => Promise<void> = async () => undefined): Agent {
  const turn = (request: { messages: Message[] }): ContentBlock[] => {
    const done = request.messages.flatMap((m) => m.content.filter((b) => 'toolResult' in b)).length
    if (done >= steps) return [{ text: `done after ${done} steps` }]
    return [{ toolUse: { toolUseId: `step-${done}`, name: 'step', input: { n: done } } }]
  }
  const step = tool({
    name: 'step',
    description: 'One step (not idempotent).',
    inputSchema: { type: 'object', properties: { n: { type: 'number' } }, required: ['n'] },
    callback: async (input) => {
      const { n } = input as { n: number }
      await beforeStep(n)
      // A tool waits on the outside world: readers in this process get their turn (a SQLite store's calls never yield on their own).
      await new Promise((resolve) => setImmediate(resolve))
      return `step ${n} done`
    },
  })
  return new Agent({ name: 'stepper', model: new ScriptedModel(Array.from({ length: steps + 1 }, () => turn)), tools: [step], systemPrompt: 'Step.' })
}

/** What a reader loop saw. */
export interface ReadTally {
  reads: number
  /** The distinct last seqs `getRun` reported: the reader saw the run move. */
  seqsSeen: number
  errors: string[]
}

/** Read the run over and over until `stop()` holds; every error is counted, never thrown. */
export async function readUntil(store: CheckpointStore, runId: string, stop: () => boolean): Promise<ReadTally> {
  const tally: ReadTally = { reads: 0, seqsSeen: 0, errors: [] }
  const seqs = new Set<number>()
  while (!stop()) {
    for (const read of [
      async () => {
        const run = await store.getRun(runId)
        if (run) seqs.add(run.lastSeq)
      },
      () => store.getLatest({ runId }),
      () => store.listCheckpoints({ runId, limit: 3 }),
      () => store.listEffects(runId),
    ]) {
      try {
        await read()
      } catch (err) {
        tally.errors.push(`${(err as Error).name}: ${(err as Error).message}`)
      }
      tally.reads++
    }
    await new Promise((resolve) => setImmediate(resolve))
  }
  tally.seqsSeen = seqs.size
  return tally
}

/** The file whose existence tells a child reader to stop. */
export function stopFile(dir: string): string {
  return join(dir, 'stop')
}

export function stopped(dir: string): boolean {
  return existsSync(stopFile(dir))
}
