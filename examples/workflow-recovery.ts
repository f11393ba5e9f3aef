/**
 * The automatic recovery pattern for workflows: a loop that builds the workflow, starts it
 * fresh or resumes it from the latest checkpoint, and consumes its events. Interruptions are
 * random: after a super step the loop may stop consuming (a simulated interruption), and the
 * worker may throw in the middle of a super step (a simulated crash). Either way the next
 * attempt resumes from the latest checkpoint, and the result is the same as without them:
 * every item processed exactly once, in order.
 *
 *   npx tsx examples/workflow-recovery.ts [--seed N] [--dir DIR]
 *
 * `--seed N` makes the interruptions reproducible (default: a random seed, printed).
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { Executor, FileStore, WorkflowBuilder, type CheckpointRecord, type CheckpointStorage, type WorkflowCheckpoint, type WorkflowContext } from 'cairn-agents'

interface Item {
  id: number
}

const ITEMS = 10
const MAX_ATTEMPTS = 100

/** The stateful worker: it keeps the items it processed in its executor state. */
class StatefulWorker extends Executor<Item> {
  #processedItems: number[] = []
  #totalCount = 0
  readonly #random: () => number

  constructor(id: string, random: () => number) {
    super(id)
    this.#random = random
  }

  async handle(item: Item, ctx: WorkflowContext<Item, string>): Promise<void> {
    this.#processedItems.push(item.id)
    this.#totalCount += 1
    if (this.#random() < 0.15) throw new Error(`simulated crash while processing item ${item.id}`)
    if (this.#totalCount >= ITEMS) await ctx.yieldOutput(`Processed ${this.#totalCount} items: ${this.#processedItems.join(', ')}`)
    else await ctx.sendMessage({ id: item.id + 1 })
  }

  override async onCheckpointSave(): Promise<{ processedItems: number[]; totalCount: number }> {
    return { processedItems: this.#processedItems, totalCount: this.#totalCount }
  }

  override async onCheckpointRestore(state: { processedItems?: number[]; totalCount?: number }): Promise<void> {
    this.#processedItems = state.processedItems ?? []
    this.#totalCount = state.totalCount ?? 0
  }
}

function createWorkflow(storage: CheckpointStorage, random: () => number) {
  const worker = new StatefulWorker('worker', random)
  return new WorkflowBuilder<Item, string>({ name: 'data-pipeline', startExecutor: worker, store: storage }).addEdge(worker, worker).build()
}

const { values } = parseArgs({ options: { seed: { type: 'string' }, dir: { type: 'string' } } })
const seed = Number(values.seed ?? Math.floor(Math.random() * 2 ** 31))
const dir = values.dir ?? (await mkdtemp(join(tmpdir(), 'cairn-recovery-')))
console.log(`seed ${seed}, checkpoints in ${dir}`)
const store = new FileStore({ directory: dir })
try {
  process.exitCode = await recover(store, mulberry32(seed))
} finally {
  // Closing waits for the store's pending background writes, so none lands in a removed directory.
  await store.close()
  if (values.dir === undefined) await rm(dir, { recursive: true, force: true })
}

/** The retention loop: start or resume, consume events, and retry from the latest checkpoint. */
async function recover(storage: CheckpointStorage, random: () => number): Promise<number> {
  let latestCheckpoint: CheckpointRecord<WorkflowCheckpoint> | undefined
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    const workflow = createWorkflow(storage, random)
    try {
      // Start from a checkpoint or fresh.
      let eventStream
      if (latestCheckpoint) {
        console.log(`Resuming from checkpoint ${latestCheckpoint.checkpointId} (iteration ${latestCheckpoint.payload.iterationCount})`)
        eventStream = workflow.stream({ checkpointId: latestCheckpoint.checkpointId })
      } else {
        console.log('Starting new workflow')
        eventStream = workflow.stream({ message: { id: 1 } })
      }
      // Process events.
      for await (const event of eventStream) {
        if (event.type === 'output') {
          console.log(`Workflow completed: ${event.data}`)
          console.log(`ATTEMPTS: ${attempt}`)
          return 0 // Success!
        }
        if (event.type === 'superstep_completed' && random() < 0.3) {
          // Randomly simulate interruptions.
          console.log(`Simulated interruption after superstep ${event.iteration}`)
          break
        }
      }
      // Get the latest checkpoint for the retry.
      latestCheckpoint = await storage.getLatest<WorkflowCheckpoint>({ workflowName: workflow.name })
    } catch (error) {
      console.log(`Error: ${(error as Error).message}`)
      latestCheckpoint = await storage.getLatest<WorkflowCheckpoint>({ workflowName: workflow.name })
    }
  }
  console.error(`gave up after ${MAX_ATTEMPTS} attempts`)
  return 1
}

/** A small seeded random number generator, so a run's interruptions can be replayed. */
function mulberry32(state: number): () => number {
  return () => {
    state = (state + 0x6d2b79f5) | 0
    let t = Math.imul(state ^ (state >>> 15), 1 | state)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}
