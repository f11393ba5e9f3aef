/**
 * The SQLite writer thread (see `sqlite-writer.ts`): one connection to the store's database
 * file that runs commits posted by the main thread, one at a time, in the order they came.
 */
import { parentPort, workerData } from 'node:worker_threads'
import Database from 'better-sqlite3'
import type { CommitRequest, CommitResult } from '../../engine/storage-engine.js'
import { configureConnection, WalRest, type SqliteConnectionOptions, type SqliteDatabase } from './driver.js'
import { commitImmediate, commitInTransaction, prepareStatements } from './sqlite-commit.js'

/** What the main thread starts the writer thread with. */
export interface WriterThreadData {
  path: string
  connection: SqliteConnectionOptions
}

/** A message to the writer thread. */
export type WriterRequest = { type: 'commit'; id: number; request: CommitRequest } | { type: 'close' }

/** The writer thread's answer to one commit, with the time the transaction took. */
export type WriterReply =
  | { type: 'done'; id: number; result: CommitResult; micros: number }
  | { type: 'failed'; id: number; error: { message: string; code?: string } }

const port = parentPort
if (!port) throw new Error('writer-thread.ts runs as a worker thread of SqliteStore, not on its own')
const { path, connection } = workerData as WriterThreadData
const db = new Database(path, { fileMustExist: true }) as unknown as SqliteDatabase & { close(): void }
configureConnection(db, connection)
const statements = prepareStatements(db)
const commit = db.transaction((request: CommitRequest) => commitInTransaction(statements, request))
const walRest = new WalRest(db)

port.on('message', (message: WriterRequest) => {
  if (message.type === 'close') {
    walRest.stop()
    db.close()
    port.close()
    return
  }
  const started = process.hrtime.bigint()
  let reply: WriterReply
  try {
    const result = commitImmediate(walRest, commit, message.request)
    reply = { type: 'done', id: message.id, result, micros: Number(process.hrtime.bigint() - started) / 1000 }
  } catch (err) {
    const error = err as Error & { code?: unknown }
    reply = { type: 'failed', id: message.id, error: { message: error.message ?? String(err), ...(typeof error.code === 'string' ? { code: error.code } : {}) } }
  }
  port.postMessage(reply)
})
