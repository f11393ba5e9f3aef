import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { EngineStore } from '../src/engine.js'
import { type CommitRequest, type CommitResult, type StorageEngine } from '../src/engine.js'
import type { BenchBackend } from './backends.js'
import { benchMessage, type BenchMessage } from './messages.js'
import { median, microsSince } from './stats.js'

/** One run's save and commit times, in step order. */
export interface BreakdownTrial {
  backend: string
  n: number
  saves: number[]
  commits: number[]
}

/** Where one backend's save time goes at one `n`: the engine's commit, and everything before it. */
export interface SaveBreakdown {
  backend: string
  n: number
  trials: number
  saveMedianUs: number
  /** The engine's atomic write (for SQLite: the transaction and its fsync). */
  commitMedianUs: number
  /** Per save, the save minus its commit: encoding, list split, hashing, digest, locking. */
  outsideCommitMedianUs: number
}

/**
 * Run the workload once on an `EngineStore` over the backend's engine with its `commit` timed.
 * This is how the stores are built; only the timing wrapper is added.
 */
export async function measureSaveBreakdown(backend: BenchBackend, n: number): Promise<BreakdownTrial> {
  const location = await mkdtemp(join(tmpdir(), `cairn-bench-breakdown-${backend.name}-`))
  try {
    const commits: number[] = []
    const store = new EngineStore(timeCommits(backend.openEngine(location), commits))
    const saves: number[] = []
    try {
      const messages: BenchMessage[] = []
      for (let i = 0; i < n; i++) {
        messages.push(benchMessage(i))
        const start = process.hrtime.bigint()
        await store.save({ runId: 'breakdown-run', kind: 'bench', phase: i % 2 ? 'after_tools' : 'after_model', payload: { messages } })
        saves.push(microsSince(start))
      }
    } finally {
      await store.close()
    }
    if (commits.length !== saves.length) throw new Error(`${saves.length} saves made ${commits.length} commits; a save retried`)
    return { backend: backend.name, n, saves, commits }
  } finally {
    await rm(location, { recursive: true, force: true })
  }
}

/** Pool the trials of one backend at one `n` (at least one). */
export function summarizeBreakdown(trials: readonly BreakdownTrial[]): SaveBreakdown {
  const first = trials[0]
  if (!first) throw new Error('summarizeBreakdown needs at least one trial')
  return {
    backend: first.backend,
    n: first.n,
    trials: trials.length,
    saveMedianUs: median(trials.flatMap((t) => t.saves)),
    commitMedianUs: median(trials.flatMap((t) => t.commits)),
    outsideCommitMedianUs: median(trials.flatMap((t) => t.saves.map((save, i) => save - (t.commits[i] ?? 0)))),
  }
}

/** The engine with each `commit` timed into `commits`; other methods pass through. */
function timeCommits(engine: StorageEngine, commits: number[]): StorageEngine {
  const commit = async (request: CommitRequest): Promise<CommitResult> => {
    const start = process.hrtime.bigint()
    try {
      return await engine.commit(request)
    } finally {
      commits.push(microsSince(start))
    }
  }
  return new Proxy(engine, {
    get(target, key) {
      if (key === 'commit') return commit
      const value: unknown = Reflect.get(target, key, target)
      // Engines keep state in private fields, so their methods must run on the engine itself.
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value
    },
  })
}
