/**
 * A worker process of the wake kills (see wake-kills.ts): `node --import tsx wake-worker.ts
 * <target> <dir> <id> <sleepMs> <kill>`. It serves `napper`, an agent of one idempotent tool that
 * logs `before <ms>`, sleeps `sleepMs`, logs `after <ms>`, performs its effect in the effect log
 * (keyed by `ctx.idempotencyKey`) and returns. `kill` says where the process SIGKILLs itself,
 * once per scenario (a marker file in `dir` keeps the other processes alive):
 *
 *   none          never (the harness may kill it from outside)
 *   claim         when it claims the run after the run went to sleep (the wake's claim)
 *   after-wake    right after the code after the sleep started, before the effect
 *   after-effect  right after the effect, before the tool's outcome is stored
 *
 * `target` is `sqlite:<path>` or `postgres:<schema>`.
 */
import { appendFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Agent, tool, Worker, type ContentBlock, type Message } from '../src/index.js'
import { ScriptedModel } from '../src/testing.js'
import type { EngineStore } from '../src/engine.js'
import { PostgresStore } from '../src/postgres.js'
import { SqliteStore } from '../src/sqlite.js'
import { EffectLog } from './side-effects.js'

/** Where a wake-kill worker kills itself. */
export type WakeKill = 'none' | 'claim' | 'after-wake' | 'after-effect'

const [target = '', dir = '', id = '', sleepArg = '', killArg = ''] = process.argv.slice(2)
if (!target || !dir || !id || !sleepArg || !killArg) throw new Error('usage: wake-worker <target> <dir> <id> <sleepMs> <none|claim|after-wake|after-effect>')
const sleepMs = Number(sleepArg)
const kill = killArg as WakeKill
const log = (line: string) => appendFileSync(join(dir, 'log'), `${line}\n`)
const effects = new EffectLog(join(dir, 'effects.log'))

/** SIGKILL this process at `point` if it is the scenario's kill point and no process was killed there yet. */
function killAt(point: WakeKill): void {
  const marker = join(dir, 'killed')
  if (kill !== point || existsSync(marker)) return
  try {
    writeFileSync(marker, `${id} ${point} ${Date.now()}`, { flag: 'wx' })
  } catch {
    return // another process took the kill
  }
  process.kill(process.pid, 'SIGKILL')
}

function napper(): Agent {
  const turn = (request: { messages: Message[] }): ContentBlock[] => {
    const results = request.messages.flatMap((m) => m.content.flatMap((b) => ('toolResult' in b ? [b.toolResult] : [])))
    if (results.length > 0) return [{ text: 'rested' }]
    return [{ toolUse: { toolUseId: 'nap-1', name: 'nap', input: {} } }]
  }
  const nap = tool({
    name: 'nap',
    description: 'Sleep, then act once.',
    inputSchema: { type: 'object', properties: {} },
    idempotent: true,
    callback: async (_input, ctx) => {
      log(`before ${Date.now()} ${id}`)
      await ctx.sleep(sleepMs)
      log(`after ${Date.now()} ${id}`)
      killAt('after-wake')
      effects.perform({ key: ctx.idempotencyKey, tool: 'nap', idempotent: true })
      killAt('after-effect')
      return 'rested'
    },
  })
  return new Agent({ name: 'napper', model: new ScriptedModel([turn, turn]), tools: [nap], systemPrompt: 'Rest.' })
}

const store: EngineStore = target.startsWith('sqlite:')
  ? new SqliteStore({ path: target.slice('sqlite:'.length) })
  : new PostgresStore({ connectionString: process.env.DATABASE_URL || 'postgresql://postgres@127.0.0.1:5432/test', schema: target.slice('postgres:'.length) })
const slept = () => existsSync(join(dir, 'log')) && readFileSync(join(dir, 'log'), 'utf8').includes('before ')
const worker = new Worker({
  store,
  id,
  pollMs: 25,
  sweepMs: 25,
  leaseMs: 1000,
  agents: { napper },
  onEvent: (event) => {
    if (event.type !== 'claimed') return
    log(`claimed ${Date.now()} ${id}`)
    if (slept()) killAt('claim')
  },
})
process.on('SIGTERM', () => {
  void worker
    .stop({ timeoutMs: 1000 })
    .then(() => store.close())
    .then(() => process.exit(0))
})
await worker.start()
