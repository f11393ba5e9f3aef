/**
 * A worker process of the workers benchmark: `node --import tsx bench/workers-process.ts '<config>'`.
 * It serves `bench`, a scripted agent of `cycles` model turns each asking for one idempotent tool
 * call (which sleeps the `delayMs` the run's input names, 0 by default), and appends its worker
 * events to the log file as JSON lines with their time.
 */
import { appendFileSync } from 'node:fs'
import { Agent, tool, Worker, type ContentBlock, type Message } from '../src/index.js'
import { PostgresStore } from '../src/postgres.js'
import { ScriptedModel } from '../src/testing.js'

/** What a benchmark worker process is told. */
export interface BenchWorkerConfig {
  connectionString: string
  schema: string
  id: string
  logFile: string
  concurrency: number
  leaseMs: number
  heartbeatMs: number
  pollMs: number
  cycles: number
}

const config = JSON.parse(process.argv[2] ?? '') as BenchWorkerConfig

function log(entry: Record<string, unknown>): void {
  appendFileSync(config.logFile, `${JSON.stringify({ ...entry, worker: config.id, at: Date.now() })}\n`)
}

/** The run's input is `{"delayMs": n}` or anything else (no delay). */
function delayOf(messages: Message[]): number {
  const first = messages[0]?.content.find((block) => 'text' in block)
  try {
    return Number((JSON.parse(first && 'text' in first ? first.text : '{}') as { delayMs?: number }).delayMs ?? 0)
  } catch {
    return 0
  }
}

function benchAgent(): Agent {
  const turn = (request: { messages: Message[] }): ContentBlock[] => {
    const done = request.messages.flatMap((m) => m.content.filter((b) => 'toolResult' in b)).length
    if (done >= config.cycles) return [{ text: `done after ${done} steps` }]
    return [{ toolUse: { toolUseId: `step-${done}`, name: 'step', input: { n: done, delayMs: delayOf(request.messages) } } }]
  }
  const step = tool({
    name: 'step',
    description: 'One step of work.',
    idempotent: true,
    inputSchema: { type: 'object', properties: { n: { type: 'number' }, delayMs: { type: 'number' } }, required: ['n', 'delayMs'] },
    callback: async (input, ctx) => {
      const { n, delayMs } = input as { n: number; delayMs: number }
      if (delayMs > 0) await new Promise((resolve) => setTimeout(resolve, delayMs))
      ctx.signal.throwIfAborted()
      return `step ${n} done`
    },
  })
  return new Agent({ name: 'bench', model: new ScriptedModel(Array.from({ length: config.cycles + 1 }, () => turn)), tools: [step] })
}

const store = new PostgresStore({ connectionString: config.connectionString, schema: config.schema, onWarning: (message) => log({ type: 'warning', message }) })
const worker = new Worker({
  store,
  id: config.id,
  agents: { bench: benchAgent },
  concurrency: config.concurrency,
  leaseMs: config.leaseMs,
  heartbeatMs: config.heartbeatMs,
  pollMs: config.pollMs,
  onEvent: (event) => {
    if (event.type === 'error') log({ type: 'error', runId: event.runId, error: event.error.message })
    else log({ ...event })
  },
})

process.on('SIGTERM', () => {
  void worker
    .stop({ timeoutMs: 1000 })
    .then(() => store.close())
    .then(() => process.exit(0))
})

await store.ready()
await worker.start()
log({ type: 'started' })
