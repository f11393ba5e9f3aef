/**
 * Crash recovery for real: a worker process runs an agent with checkpointing, persists every
 * checkpoint to a file, and is killed with SIGKILL right after persisting one of them. A fresh
 * worker builds the same agent, loads the file and resumes. Every lookup the tool really makes
 * is appended to a side-effects log; at the end each key must be in it exactly once.
 *
 *   npx tsx examples/crash-recovery.ts [--crash-after N] [--dir DIR]
 *
 * `--crash-after N` kills the first worker after it persisted its Nth checkpoint (default 3:
 * cycle 1, `after_model`). `--dir DIR` keeps the files in DIR instead of a temporary directory
 * that is removed at the end.
 */
import { spawn } from 'node:child_process'
import { appendFile, mkdir, mkdtemp, open, readFile, rename, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { z } from 'zod'
import { Agent, tool, type AgentResultJSON, type CheckpointJSON, type ModelRequest } from 'cairn-agents'
import { ScriptedModel, type ScriptedTurn } from 'cairn-agents/testing'

const PROMPT = 'Look up several keys and summarize the results'

/** What the scripted model asks for, one tool-use cycle per entry, before it answers. */
const LOOKUPS: readonly (readonly string[])[] = [['alpha', 'beta'], ['gamma'], ['delta', 'epsilon']]

const CHECKPOINT_FILE = 'checkpoint.json'
const RESULT_FILE = 'result.json'
const SIDE_EFFECTS_FILE = 'side-effects.log'

if (process.argv[2] === 'work') {
  await work({ dir: process.argv[3]!, crashAfter: Number(process.argv[4] ?? 0) })
} else {
  process.exitCode = await main()
}

/** The parent: run a worker that gets killed, then a fresh one that resumes; check the side effects. */
async function main(): Promise<number> {
  const { values } = parseArgs({ options: { 'crash-after': { type: 'string', default: '3' }, dir: { type: 'string' } } })
  const crashAfter = Number(values['crash-after'])
  const dir = values.dir ?? (await mkdtemp(join(tmpdir(), 'cairn-crash-')))
  await mkdir(dir, { recursive: true })
  for (const file of [CHECKPOINT_FILE, RESULT_FILE, SIDE_EFFECTS_FILE]) await rm(join(dir, file), { force: true })
  try {
    console.log(`files in ${dir}`)
    console.log(`1. First worker, killed after persisting checkpoint ${crashAfter}:`)
    const first = await runWorker(dir, crashAfter)
    if (first.signal !== 'SIGKILL') {
      console.error(`expected the first worker to be killed by SIGKILL, but it exited with ${first.code ?? first.signal}`)
      return 1
    }
    const beforeCrash = await readSideEffects(dir)
    console.log(`KILLED: first worker killed by SIGKILL after looking up ${beforeCrash.join(', ') || 'nothing'}`)
    console.log('2. Fresh worker, resuming from the checkpoint file:')
    const second = await runWorker(dir, 0)
    if (second.code !== 0) {
      console.error(`the resuming worker failed with ${second.code ?? second.signal}`)
      return 1
    }
    const result = JSON.parse(await readFile(join(dir, RESULT_FILE), 'utf8')) as AgentResultJSON
    console.log(`STOP REASON: ${result.stopReason}`)
    console.log(`MESSAGE: ${JSON.stringify(result.message)}`)
    const sideEffects = await readSideEffects(dir)
    console.log(`SIDE EFFECTS: ${JSON.stringify(sideEffects)}`)
    const repeated = sideEffects.filter((key, i) => sideEffects.indexOf(key) !== i)
    const missing = LOOKUPS.flat().filter((key) => !sideEffects.includes(key))
    if (repeated.length > 0 || missing.length > 0) {
      console.error(`looked up more than once: ${repeated.join(', ') || 'none'}; never looked up: ${missing.join(', ') || 'none'}`)
      return 1
    }
    console.log('OK: every key was looked up exactly once across both processes')
    return 0
  } finally {
    if (values.dir === undefined) await rm(dir, { recursive: true, force: true })
  }
}

/**
 * The worker: start the run, or resume it from the checkpoint file if there is one. After every
 * checkpoint, persist it and resume from what was persisted, as a worker that may die would.
 */
async function work(params: { dir: string; crashAfter: number }): Promise<void> {
  const saved = await load(params.dir)
  const modelCallsBefore = typeof saved?.appData.modelCalls === 'number' ? saved.appData.modelCalls : 0
  const { agent, model } = buildAgent({ dir: params.dir, modelCallsBefore })
  if (saved) console.log(`   resuming from ${saved.position} of cycle ${saved.cycleIndex} (${modelCallsBefore} model calls already made)`)
  let result = await agent.invoke(saved ? [{ checkpointResume: { checkpoint: saved } }] : PROMPT)
  let persisted = 0
  while (result.stopReason === 'checkpoint') {
    const checkpoint = result.checkpoint!
    // Our own bookkeeping travels in appData; the snapshot stays opaque.
    checkpoint.appData = { modelCalls: modelCallsBefore + model.calls.length }
    await save(params.dir, checkpoint.toJSON())
    persisted++
    console.log(`   checkpoint ${persisted} persisted: ${checkpoint.position} of cycle ${checkpoint.cycleIndex}`)
    if (persisted === params.crashAfter) process.kill(process.pid, 'SIGKILL')
    result = await agent.invoke([{ checkpointResume: { checkpoint: (await load(params.dir))! } }])
  }
  await writeAtomically(join(params.dir, RESULT_FILE), JSON.stringify(result.toJSON()))
  await rm(join(params.dir, CHECKPOINT_FILE), { force: true })
  console.log(`   finished: ${result.stopReason}`)
}

/**
 * The same agent in every process: same model id, tools and system prompt. A fresh model starts
 * from its first turn, so it is given only the turns after the `modelCallsBefore` already in the
 * checkpoint; each turn checks that the conversation it is sent is the one it expects, so a
 * resume that asked the model again for an answer it already gave fails loudly.
 */
function buildAgent(params: { dir: string; modelCallsBefore: number }): { agent: Agent; model: ScriptedModel } {
  const expensiveLookup = tool({
    name: 'expensive_lookup',
    description: 'Look up the value stored under a key. Slow and billed per call.',
    inputSchema: z.object({ key: z.string() }),
    callback: async ({ key }) => {
      await appendFile(join(params.dir, SIDE_EFFECTS_FILE), `${key}\n`)
      return `${key.toUpperCase()}-${key.length}`
    },
  })
  const turns = scriptedTurns().slice(params.modelCallsBefore)
  const model = new ScriptedModel(turns.map((turn, i) => expectTurn(params.modelCallsBefore + i, turn)))
  const agent = new Agent({ model, tools: [expensiveLookup], systemPrompt: 'Use expensive_lookup for every key you need.', checkpointing: true })
  return { agent, model }
}

/** One turn per tool-use cycle in LOOKUPS, then an answer built from the tool results sent. */
function scriptedTurns(): ScriptedTurn[] {
  const lookups: ScriptedTurn[] = LOOKUPS.map((keys, cycle) =>
    keys.map((key) => ({ toolUse: { toolUseId: `lookup-${cycle}-${key}`, name: 'expensive_lookup', input: { key } } })),
  )
  const answer: ScriptedTurn = (request) => [{ text: `Summary: ${toolResultTexts(request).join(', ')}.` }]
  return [...lookups, answer]
}

/** Wrap turn `index` so that it fails unless the request holds exactly the `index` earlier answers. */
function expectTurn(index: number, turn: ScriptedTurn): ScriptedTurn {
  return (request) => {
    const answered = request.messages.filter((message) => message.role === 'assistant').length
    if (answered !== index) {
      throw new Error(`the model was asked for turn ${index} but the conversation holds ${answered} answers: a response already in the checkpoint was requested again`)
    }
    return typeof turn === 'function' ? turn(request) : turn
  }
}

function toolResultTexts(request: ModelRequest): string[] {
  return request.messages.flatMap((message) =>
    message.content.flatMap((block) => ('toolResult' in block ? block.toolResult.content.flatMap((part) => ('text' in part ? [part.text] : [])) : [])),
  )
}

async function save(dir: string, checkpoint: CheckpointJSON): Promise<void> {
  await writeAtomically(join(dir, CHECKPOINT_FILE), JSON.stringify(checkpoint))
}

async function load(dir: string): Promise<CheckpointJSON | undefined> {
  try {
    return JSON.parse(await readFile(join(dir, CHECKPOINT_FILE), 'utf8')) as CheckpointJSON
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw error
  }
}

/** Write to a temp file, flush it and rename: a crash leaves the old file or the new one, never half of one. */
async function writeAtomically(path: string, text: string): Promise<void> {
  const temp = `${path}.${process.pid}.tmp`
  const file = await open(temp, 'w')
  try {
    await file.writeFile(text)
    await file.sync()
  } finally {
    await file.close()
  }
  await rename(temp, path)
}

async function readSideEffects(dir: string): Promise<string[]> {
  const text = await readFile(join(dir, SIDE_EFFECTS_FILE), 'utf8').catch(() => '')
  return text.split('\n').filter((line) => line !== '')
}

async function runWorker(dir: string, crashAfter: number): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  const self = fileURLToPath(import.meta.url)
  const child = spawn(process.execPath, [...process.execArgv, self, 'work', dir, String(crashAfter)], { stdio: 'inherit' })
  return new Promise((resolve, reject) => {
    child.on('error', reject)
    child.on('exit', (code, signal) => resolve({ code, signal }))
  })
}
