/**
 * The squares workflow, crashed for real: a worker process runs the squares
 * workflow (a start executor and a worker in a self-loop, one number per super step, checkpoints
 * after every super step) and is killed with SIGKILL right after super step N is checkpointed.
 * A fresh process builds the same workflow, finds the latest checkpoint, resumes, and must print
 * the same results as an uninterrupted run in a third process.
 *
 *   npx tsx examples/workflow-squares.ts [--kill-after N] [--store file|sqlite] [--dir DIR]
 *
 * `--kill-after N` (default 4) picks the super step after which the first worker dies.
 * `--store sqlite` keeps checkpoints in SQLite instead of files: any CheckpointStore works.
 */
import { spawn } from 'node:child_process'
import { mkdir, mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { Executor, FileStore, WorkflowBuilder, type CheckpointStore, type WorkflowCheckpoint, type WorkflowContext } from 'cairn-agents'
import { SqliteStore } from 'cairn-agents/sqlite'

interface Task {
  remaining: number[]
}

class StartExecutor extends Executor<number> {
  async handle(limit: number, ctx: WorkflowContext<Task>): Promise<void> {
    await ctx.sendMessage({ remaining: Array.from({ length: limit }, (_, i) => i + 1) })
  }
}

class WorkerExecutor extends Executor<Task> {
  #results: Record<number, number> = {}

  async handle(task: Task, ctx: WorkflowContext<Task, Record<number, number>>): Promise<void> {
    const num = task.remaining.shift()!
    this.#results[num] = num * num // Simple computation
    if (task.remaining.length === 0) await ctx.yieldOutput(this.#results)
    else await ctx.sendMessage(task)
  }

  override async onCheckpointSave(): Promise<{ results: Record<number, number> }> {
    return { results: this.#results }
  }

  override async onCheckpointRestore(state: { results?: Record<number, number> }): Promise<void> {
    this.#results = state.results ?? {}
  }
}

if (process.argv[2] === 'work') {
  await work({ dir: process.argv[3]!, store: process.argv[4] === 'sqlite' ? 'sqlite' : 'file', killAfter: Number(process.argv[5] ?? 0) })
} else {
  process.exitCode = await main()
}

/** The parent: an uninterrupted run, then a run killed after super step N and its resume. */
async function main(): Promise<number> {
  const { values } = parseArgs({ options: { 'kill-after': { type: 'string', default: '4' }, store: { type: 'string', default: 'file' }, dir: { type: 'string' } } })
  const killAfter = Number(values['kill-after'])
  const dir = values.dir ?? (await mkdtemp(join(tmpdir(), 'cairn-squares-')))
  await mkdir(dir, { recursive: true })
  try {
    console.log(`checkpoints (${values.store}) in ${dir}`)
    console.log('1. An uninterrupted run, in its own process and storage:')
    const reference = await runWorker({ dir: join(dir, 'uninterrupted'), store: values.store, killAfter: 0 })
    console.log(`2. A run killed with SIGKILL after super step ${killAfter} is checkpointed:`)
    const killed = await runWorker({ dir: join(dir, 'crashed'), store: values.store, killAfter })
    if (killed.signal !== 'SIGKILL') {
      console.error(`expected the worker to be killed by SIGKILL, but it exited with ${killed.code ?? killed.signal}`)
      return 1
    }
    console.log(`KILLED: the worker died by SIGKILL after super step ${killAfter}`)
    console.log('3. A fresh process with the same storage:')
    const resumed = await runWorker({ dir: join(dir, 'crashed'), store: values.store, killAfter: 0 })
    const expected = results(reference.stdout)
    const actual = results(resumed.stdout)
    if (reference.code !== 0 || resumed.code !== 0 || expected === undefined || actual !== expected) {
      console.error(`the resumed run printed ${actual ?? 'nothing'}, the uninterrupted one ${expected ?? 'nothing'}`)
      return 1
    }
    console.log('OK: the resumed run printed the same results as the uninterrupted one')
    return 0
  } finally {
    if (values.dir === undefined) await rm(dir, { recursive: true, force: true })
  }
}

/** The worker: the squares workflow's `main()`, resuming from the latest checkpoint when there is one. */
async function work(params: { dir: string; store: 'file' | 'sqlite'; killAfter: number }): Promise<void> {
  await mkdir(params.dir, { recursive: true })
  const storage: CheckpointStore =
    params.store === 'sqlite' ? new SqliteStore({ path: join(params.dir, 'checkpoints.db') }) : new FileStore({ directory: join(params.dir, 'checkpoints') })
  const start = new StartExecutor('start')
  const worker = new WorkerExecutor('worker')
  const workflow = new WorkflowBuilder<number, Record<number, number>>({ name: 'squares', startExecutor: start, store: storage })
    .addEdge(start, worker)
    .addEdge(worker, worker) // Self-loop
    .build()

  // Check for an existing checkpoint.
  const latest = await storage.getLatest<WorkflowCheckpoint>({ workflowName: workflow.name })
  let events
  if (latest) {
    console.log(`Resuming from iteration ${latest.payload.iterationCount}`)
    events = workflow.stream({ checkpointId: latest.checkpointId })
  } else {
    console.log('Starting new workflow')
    events = workflow.stream({ message: 10 })
  }
  let next = await events.next()
  while (!next.done) {
    const event = next.value
    if (event.type === 'superstep_completed') {
      console.log(`   superstep ${event.iteration} checkpointed: ${event.checkpointId}`)
      if (event.iteration === params.killAfter) process.kill(process.pid, 'SIGKILL')
    }
    next = await events.next()
  }
  const result = next.value // what workflow.run() would have returned
  console.log(`Results: ${JSON.stringify(result.getOutputs())}`)
  await storage.close()
}

function results(stdout: string): string | undefined {
  return stdout.split('\n').find((line) => line.startsWith('Results: '))
}

async function runWorker(params: { dir: string; store: string; killAfter: number }): Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string }> {
  const self = fileURLToPath(import.meta.url)
  const child = spawn(process.execPath, [...process.execArgv, self, 'work', params.dir, params.store, String(params.killAfter)], { stdio: ['ignore', 'pipe', 'inherit'] })
  let stdout = ''
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk
    process.stdout.write(chunk)
  })
  return new Promise((resolve, reject) => {
    child.on('error', reject)
    child.on('close', (code, signal) => resolve({ code, signal, stdout }))
  })
}
