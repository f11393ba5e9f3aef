/**
 * A tour of Cairn's store: a job checkpoints after every step into the embedded SQLite store, is
 * killed with SIGKILL halfway, and a fresh process resumes it from the latest checkpoint. Each
 * step's side effect goes through the effect journal, so none runs twice.
 *
 *   npx tsx examples/checkpoint-tour.ts
 */
import { spawn } from 'node:child_process'
import { rm, stat } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import { hashValue, type CheckpointStore } from 'cairn-agents'
import { SqliteStore } from 'cairn-agents/sqlite'

const DB_PATH = '.cairn/tour.db'
const RUN_ID = 'tour-run'
const STEPS = 12

interface JobState {
  step: number
  messages: { role: 'assistant' | 'user'; content: { text: string }[] }[]
  sent: string[]
}

if (process.argv[2] === 'work') {
  await work(Number(process.argv[3] ?? 0))
} else {
  await main()
}

async function main(): Promise<void> {
  await rm('.cairn/tour.db', { force: true })
  await rm('.cairn/tour.db-wal', { force: true })
  await rm('.cairn/tour.db-shm', { force: true })
  console.log(`1. Starting the job in a child process (checkpoints go to ${DB_PATH}) …`)
  await runChild({ killAfterStep: 5 })
  console.log('2. It was killed with SIGKILL after sending step 5\'s email but before checkpointing. A fresh process resumes the run:')
  await runChild({})

  const store = new SqliteStore({ path: DB_PATH })
  const latest = await store.getLatest<JobState>({ runId: RUN_ID })
  const history = await store.listCheckpoints({ runId: RUN_ID })
  const effects = await store.listEffects(RUN_ID)
  const run = await store.getRun(RUN_ID)
  await store.close()
  const bytes = (await stat(DB_PATH)).size
  console.log('3. Result')
  console.log(`   run status: ${run?.status}, steps done: ${latest?.payload.step}, messages: ${latest?.payload.messages.length}`)
  console.log(`   checkpoints: ${history.length} (seq ${history.at(-1)?.seq}…${history[0]?.seq}); phases: ${[...new Set(history.map((cp) => cp.phase))].join(', ')}`)
  const replayed = effects.filter((e) => e.attempts > 1).map((e) => e.callId)
  console.log(`   side effects journaled: ${effects.length}, all succeeded: ${effects.every((e) => e.status === 'succeeded')}, replayed instead of re-sent: ${replayed.join(', ') || 'none'}`)
  console.log(`   emails sent: ${latest?.payload.sent.join(', ')}`)
  console.log(`   database size: ${(bytes / 1024).toFixed(0)} KiB for ${history.length} checkpoints of a growing conversation`)
}

/** The job: one step per checkpoint, resuming from the latest one if there is one. */
async function work(killAfterStep: number): Promise<void> {
  const store = new SqliteStore({ path: DB_PATH })
  const latest = await store.getLatest<JobState>({ runId: RUN_ID })
  const state: JobState = latest?.payload ?? { step: 0, messages: [], sent: [] }
  if (latest) console.log(`   resumed at step ${state.step} from checkpoint seq ${latest.seq}`)
  while (state.step < STEPS) {
    const step = state.step + 1
    state.messages.push({ role: 'assistant', content: [{ text: `step ${step}: ${'thinking '.repeat(100)}` }] })
    state.sent.push(await sendEmailOnce(store, step))
    if (step === killAfterStep) process.kill(process.pid, 'SIGKILL') // dies after the email, before the checkpoint
    state.messages.push({ role: 'user', content: [{ text: `result of step ${step}` }] })
    state.step = step
    await store.save({ runId: RUN_ID, kind: 'tour', phase: 'after_step', metadata: { step }, payload: state })
    console.log(`   step ${step} checkpointed`)
  }
  await store.updateRun(RUN_ID, { status: 'completed' })
  await store.close()
}

/** A side effect made exactly-once with the effect journal: intent first, outcome after. */
async function sendEmailOnce(store: CheckpointStore, step: number): Promise<string> {
  const callId = `email-${step}`
  const input = { to: 'ops@example.com', step }
  const intent = await store.recordEffectIntent({ runId: RUN_ID, callId, name: 'send_email', inputHash: hashValue(input), idempotencyKey: `${RUN_ID}:${callId}` })
  if (intent.status === 'succeeded') {
    console.log(`   step ${step}: email already sent before the crash; replayed ${String(intent.output)} from the journal`)
    return intent.output as string
  }
  const receipt = `mail#${step}` // a real tool would call the mail API here with the idempotency key
  const { effect } = await store.completeEffect({ runId: RUN_ID, callId, status: 'succeeded', output: receipt })
  return effect.output as string
}

async function runChild(options: { killAfterStep?: number }): Promise<void> {
  const self = fileURLToPath(import.meta.url)
  const child = spawn(process.execPath, [...process.execArgv, self, 'work', String(options.killAfterStep ?? 0)], { stdio: 'inherit' })
  await new Promise<void>((resolve, reject) =>
    child.on('exit', (code, signal) => (code === 0 || signal === 'SIGKILL' ? resolve() : reject(new Error(`job exited with ${code ?? signal}`)))),
  )
}
