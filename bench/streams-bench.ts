/**
 * Durable stream benchmark: `npm run bench:streams`. What keeping a run's events in the store's
 * event log costs over the in-process `runner.stream()` alone, per streamed token and per run, on
 * SQLite and Postgres; and how long a reader reconnecting with a cursor waits for its first
 * event.
 *
 * Workload: one run of one model call that streams CAIRN_STREAM_TOKENS text deltas (default
 * 2000, no delay between them: the worst case for the log, which then batches by boundaries only)
 * and ends. Each trial runs it with `eventLog: false` and with the log on, on a fresh store of
 * the same backend, consuming `runner.stream()` both times. Added time = log-on wall time −
 * log-off wall time (medians over CAIRN_BENCH_TRIALS, default 5). Bytes = the JSON the log holds
 * for the run; appends = rows of the log the run wrote. Reconnect = time from `runner.events(runId,
 * { after })` to its first event, median of 50 reconnects at random cursors of a finished run.
 *
 * Environment: CAIRN_STREAM_PG (default postgresql://postgres@127.0.0.1:5432/test; "off" skips Postgres).
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Agent, Runner, type CheckpointStore, type Model, type ModelStreamEvent } from '../src/index.js'
import { PostgresStore } from '../src/postgres.js'
import { SqliteStore } from '../src/sqlite.js'
import { formatNumber, formatTable } from './format-table.js'
import { median } from './stats.js'

const TOKENS = Number(process.env.CAIRN_STREAM_TOKENS ?? 2000)
const TRIALS = Number(process.env.CAIRN_BENCH_TRIALS ?? 5)
const PG = process.env.CAIRN_STREAM_PG ?? 'postgresql://postgres@127.0.0.1:5432/test'

class TokenModel implements Model {
  readonly modelId = 'tokens'
  async *stream(): AsyncGenerator<ModelStreamEvent> {
    yield { type: 'messageStart' }
    yield { type: 'textStart' }
    for (let i = 0; i < TOKENS; i++) yield { type: 'textDelta', text: ' tok' }
    yield { type: 'messageStop', stopReason: 'end_turn' }
    yield { type: 'usage', usage: { inputTokens: 1, outputTokens: TOKENS, totalTokens: TOKENS + 1 } }
  }
}

async function timedRun(store: CheckpointStore, runId: string, log: boolean): Promise<number> {
  const runner = new Runner({ store, eventLog: log ? {} : false })
  const started = performance.now()
  for await (const _event of runner.stream(new Agent({ name: 'bench', model: new TokenModel() }), { input: 'go', runId })) {
    // consumed, as a server relaying the live stream would
  }
  return performance.now() - started
}

async function bench(name: string, open: (trial: number) => Promise<{ store: CheckpointStore; done: () => Promise<void> }>): Promise<string[]> {
  const off: number[] = []
  const on: number[] = []
  let bytes = 0
  let appends = 0
  const reconnects: number[] = []
  for (let trial = 0; trial < TRIALS; trial++) {
    const { store, done } = await open(trial)
    await timedRun(store, `warm-${trial}`, true)
    off.push(await timedRun(store, `off-${trial}`, false))
    on.push(await timedRun(store, `on-${trial}`, true))
    const events = await store.events!.read(`on-${trial}`, { limit: 10_000 })
    bytes = events.reduce((sum, e) => sum + JSON.stringify(e.event).length, 0)
    appends = events.length
    if (trial === 0) {
      const runner = new Runner({ store })
      for (let i = 0; i < 50; i++) {
        const after = events[Math.floor(Math.random() * (events.length - 1))]!.cursor
        const started = performance.now()
        const iterator = runner.events(`on-${trial}`, { after })
        await iterator.next()
        reconnects.push(performance.now() - started)
        await iterator.return(undefined)
      }
    }
    await done()
  }
  const added = median(on) - median(off)
  return [name, formatNumber(median(off), 1), formatNumber(median(on), 1), formatNumber((added * 1000) / TOKENS, 2), formatNumber(added, 1), String(appends), formatNumber(bytes / 1024, 1), formatNumber(bytes / TOKENS, 2), formatNumber(median(reconnects), 2)]
}

const rows: string[][] = []
const dir = await mkdtemp(join(tmpdir(), 'cairn-streams-bench-'))
try {
  rows.push(await bench('sqlite', async (trial) => {
    const store = new SqliteStore({ path: join(dir, `t${trial}.db`) })
    return { store, done: () => store.close() }
  }))
  if (PG !== 'off') {
    rows.push(await bench('postgres', async (trial) => {
      const schema = `cairn_streams_bench_${process.pid}_${trial}`
      const store = new PostgresStore({ connectionString: PG, schema })
      return {
        store,
        done: async () => {
          await store.close()
          const { default: pg } = await import('pg')
          const client = new pg.Client({ connectionString: PG })
          await client.connect()
          await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
          await client.end()
        },
      }
    }))
  }
} finally {
  await rm(dir, { recursive: true, force: true })
}
console.log(`Durable run streams: one run streaming ${TOKENS} deltas, ${TRIALS} trials (medians)\n`)
const headers = ['backend', 'stream() only ms', 'with log ms', 'added µs/token', 'added ms/run', 'log rows', 'log KiB', 'bytes/token', 'reconnect ms']
console.log(formatTable(headers.map((header, i) => ({ header, align: i === 0 ? 'left' : 'right' })), rows))
