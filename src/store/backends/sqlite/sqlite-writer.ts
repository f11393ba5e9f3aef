import { existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import type * as WorkerThreads from 'node:worker_threads'
import { StoreError } from '../../../core/errors.js'
import type { CommitRequest, CommitResult } from '../../engine/storage-engine.js'
import type { SqliteConnectionOptions } from './driver.js'
import type { WriterReply, WriterRequest, WriterThreadData } from './writer-thread.js'

/** What the engine needs of a writer: commits off the caller's thread, and a clean close. */
export interface CommitWriter {
  commit(request: CommitRequest): Promise<CommitResult>
  close(): Promise<void>
}

/** How much work the writer thread has done. */
export interface WriterStats {
  /** Commits the writer thread made. */
  commits: number
  /** Time spent inside those transactions (writing and syncing), in microseconds. */
  micros: number
}

/**
 * Runs a SQLite store's commits on a worker thread with its own connection to the file, so
 * that writing and syncing (the fsync of every commit) never block the event loop: an agent
 * loop's write-behind checkpoints really are behind it, and the other runs of a process keep
 * going while one run's commit is synced. Commits are posted in order and run one at a time in
 * that order; reads stay on the main connection, which sees a commit once its promise resolves.
 *
 * The thread starts when the store opens (its start-up, loading a connection and the commit
 * code, is then done by the first commit) and keeps the process alive only while a commit is in
 * flight. A thread that cannot start or stops fails every pending and later commit with a
 * {@link StoreError} naming the database.
 */
export class SqliteWriter implements CommitWriter {
  readonly stats: WriterStats = { commits: 0, micros: 0 }
  readonly #data: WriterThreadData
  readonly #pending = new Map<number, { resolve: (result: CommitResult) => void; reject: (err: Error) => void }>()
  /** Commits posted and not yet answered, for `close` to wait on. */
  readonly #inFlight = new Set<Promise<CommitResult>>()
  #worker: WorkerThreads.Worker | undefined
  #nextId = 1
  #failure: Error | undefined
  #closing: Promise<void> | undefined

  constructor(path: string, connection: SqliteConnectionOptions) {
    this.#data = { path, connection }
  }

  /** Start the thread now, so that the first commit does not wait for it to load. */
  start(): void {
    if (!this.#failure && !this.#closing) this.#start()
  }

  commit(request: CommitRequest): Promise<CommitResult> {
    if (this.#failure) return Promise.reject(this.#failure)
    if (this.#closing) return Promise.reject(new StoreError(`the SQLite writer for ${this.#data.path} is closed`, { code: 'store_closed' }))
    const worker = this.#start()
    const id = this.#nextId++
    const committed = new Promise<CommitResult>((resolve, reject) => {
      if (this.#pending.size === 0) worker.ref()
      this.#pending.set(id, { resolve, reject })
      worker.postMessage({ type: 'commit', id, request } satisfies WriterRequest)
    })
    this.#inFlight.add(committed)
    const settled = () => this.#inFlight.delete(committed)
    committed.then(settled, settled)
    return committed
  }

  /** Wait for the commits in flight, then stop the thread. */
  close(): Promise<void> {
    this.#closing ??= this.#close()
    return this.#closing
  }

  async #close(): Promise<void> {
    const worker = this.#worker
    if (!worker) return
    await Promise.allSettled([...this.#inFlight])
    if (this.#failure) {
      await worker.terminate()
      return
    }
    await new Promise<void>((resolve) => {
      worker.once('exit', () => resolve())
      // Held until the thread has closed its connection: a process must not exit before that.
      worker.ref()
      worker.postMessage({ type: 'close' } satisfies WriterRequest)
    })
  }

  #start(): WorkerThreads.Worker {
    if (this.#worker) return this.#worker
    const worker = spawnWriterThread(this.#data)
    worker.unref()
    worker.on('message', (reply: WriterReply) => this.#onReply(reply))
    worker.on('error', (err) => this.#fail(err))
    worker.on('exit', (code) => {
      if (this.#pending.size > 0 || (!this.#closing && code !== 0)) this.#fail(new Error(`the thread exited with code ${code}`))
    })
    this.#worker = worker
    return worker
  }

  #onReply(reply: WriterReply): void {
    const entry = this.#pending.get(reply.id)
    if (!entry) return
    this.#pending.delete(reply.id)
    if (this.#pending.size === 0) this.#worker?.unref()
    if (reply.type === 'done') {
      this.stats.commits++
      this.stats.micros += reply.micros
      entry.resolve(reply.result)
    } else {
      const err = new Error(reply.error.message) as Error & { code?: string }
      if (reply.error.code !== undefined) err.code = reply.error.code
      entry.reject(err)
    }
  }

  #fail(cause: Error): void {
    this.#failure ??= new StoreError(`the SQLite writer thread for ${this.#data.path} stopped: ${cause.message}; reopen the store`, { cause })
    for (const [id, entry] of this.#pending) {
      this.#pending.delete(id)
      entry.reject(this.#failure)
    }
    this.#worker?.unref()
  }
}

/**
 * Start the writer thread: the built `writer-thread.js` beside this module (the build puts it
 * at the root of dist/, beside every chunk this module can be bundled into), or, when Cairn runs
 * from its TypeScript sources (its own tests and scripts), the `.ts` entry loaded through tsx, a
 * development dependency.
 */
function spawnWriterThread(data: WriterThreadData): WorkerThreads.Worker {
  // Loaded on first use: a process whose stores commit on their own connection never needs it.
  const { Worker } = createRequire(import.meta.url)('node:worker_threads') as typeof WorkerThreads
  const compiled = new URL('./writer-thread.js', import.meta.url)
  if (existsSync(fileURLToPath(compiled))) return new Worker(compiled, { workerData: data })
  const source = new URL('./writer-thread.ts', import.meta.url)
  // Resolved here, beside the sources, so the thread finds tsx whatever the working directory.
  const tsxRoot = dirname(createRequire(import.meta.url).resolve('tsx/package.json'))
  const tsx = pathToFileURL(join(tsxRoot, 'dist', 'esm', 'api', 'index.mjs')).href
  const bootstrap = `import(${JSON.stringify(tsx)}).then((tsx) => { tsx.register(); return import(${JSON.stringify(source.href)}) })`
  return new Worker(bootstrap, { eval: true, workerData: data })
}
