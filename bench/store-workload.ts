import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { CheckpointStore } from '../src/index.js'
import type { BenchBackend } from './backends.js'
import { benchMessage, messagesBytes, type BenchMessage } from './messages.js'
import { microsSince, timed } from './stats.js'

/** The raw measurements of one run of `n` checkpoints on one backend (one trial). */
export interface WorkloadTrial {
  backend: string
  n: number
  /** Microseconds of each `await store.save`, in step order. */
  saves: number[]
  /** Bytes on disk with the writer still open, and after `close()`; null for memory. */
  bytesOpen: number | null
  bytesClosed: number | null
  /** Microseconds of the first `getLatest` (decode included) of each fresh store instance. */
  coldReads: number[]
  /** Milliseconds of each listing of the run's whole history (headers only). */
  lists: number[]
  /** JSON size of the final message list. */
  messagesBytes: number
}

/** How many times, per trial, the cold read and the history listing are repeated. */
export const COLD_READS = 5
export const LIST_REPEATS = 5

const RUN_ID = 'bench-run'

/** Save `n` checkpoints of a growing conversation on `backend`, then read and list the run. */
export async function runStoreWorkload(backend: BenchBackend, n: number): Promise<WorkloadTrial> {
  const location = await mkdtemp(join(tmpdir(), `cairn-bench-${backend.name}-`))
  try {
    const store = backend.open(location)
    let writerOpen = true
    try {
      const { saves, messages } = await saveConversation(store, RUN_ID, n)
      const bytesOpen = (await backend.diskBytes(location)) ?? null
      const lists = await timeHistoryListing(store, n)
      const memoryReads = backend.persistent ? [] : await timeColdReads(() => store, n, false)
      writerOpen = false
      await store.close()
      const bytesClosed = (await backend.diskBytes(location)) ?? null
      const coldReads = backend.persistent ? await timeColdReads(() => backend.open(location), n, true) : memoryReads
      return { backend: backend.name, n, saves, bytesOpen, bytesClosed, coldReads, lists, messagesBytes: messagesBytes(messages) }
    } finally {
      if (writerOpen) await store.close()
    }
  } finally {
    await rm(location, { recursive: true, force: true })
  }
}

/** Save untimed checkpoints on a throwaway store so JIT warm-up does not land in the first measurement. */
export async function warmUpStore(backend: BenchBackend, saves: number): Promise<void> {
  const location = await mkdtemp(join(tmpdir(), `cairn-bench-warmup-${backend.name}-`))
  try {
    const store = backend.open(location)
    try {
      await saveConversation(store, 'warmup-run', saves)
      await store.listCheckpoints({ runId: 'warmup-run' })
      await store.getLatest({ runId: 'warmup-run' })
    } finally {
      await store.close()
    }
  } finally {
    await rm(location, { recursive: true, force: true })
  }
}

/** The agent loop's shape: one array, one message pushed per step, a save after each push. */
async function saveConversation(store: CheckpointStore, runId: string, n: number): Promise<{ saves: number[]; messages: BenchMessage[] }> {
  const messages: BenchMessage[] = []
  const saves: number[] = []
  for (let i = 0; i < n; i++) {
    messages.push(benchMessage(i))
    const start = process.hrtime.bigint()
    await store.save({ runId, kind: 'bench', phase: i % 2 ? 'after_tools' : 'after_model', payload: { messages } })
    saves.push(microsSince(start))
  }
  return { saves, messages }
}

async function timeHistoryListing(store: CheckpointStore, n: number): Promise<number[]> {
  const times: number[] = []
  for (let rep = 0; rep < LIST_REPEATS; rep++) {
    const { micros, value } = await timed(() => store.listCheckpoints({ runId: RUN_ID }))
    if (value.length !== n) throw new Error(`listCheckpoints returned ${value.length} checkpoints, expected ${n}`)
    times.push(micros / 1000)
  }
  return times
}

/** Time the first `getLatest` (with decode) of `open()`'s store; close it after when `fresh`. */
async function timeColdReads(open: () => CheckpointStore, n: number, fresh: boolean): Promise<number[]> {
  const times: number[] = []
  for (let rep = 0; rep < COLD_READS; rep++) {
    const store = open()
    try {
      const { micros, value } = await timed(() => store.getLatest<{ messages?: unknown[] }>({ runId: RUN_ID }))
      const count = value?.payload.messages?.length
      if (count !== n) throw new Error(`getLatest returned ${String(count)} messages, expected ${n}`)
      times.push(micros)
    } finally {
      if (fresh) await store.close()
    }
  }
  return times
}
