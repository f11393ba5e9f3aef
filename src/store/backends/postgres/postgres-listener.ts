import { sha256 } from '../../../core/hash.js'
import type { LeaseSubscription } from '../../engine/lease-engine.js'
import type { PostgresPool, PostgresPoolClient } from './driver.js'
import { quoteIdent } from './sql.js'

/** The slice of a `pg` client that delivers notifications (a `PGliteClient` connection has none). */
interface NotifyingClient extends PostgresPoolClient {
  on(event: 'notification', listener: (message: { channel: string }) => void): unknown
  on(event: 'error' | 'end', listener: (err?: Error) => void): unknown
  removeAllListeners(event?: string): unknown
}

const MAX_RETRY_MS = 5000

interface ListenerParams {
  pool: PostgresPool
  channel: string
  onWake: () => void
  warn: (message: string) => void
}

/** The `NOTIFY` channel of a schema: a Postgres identifier, at most 63 bytes. */
export function wakeChannel(schema: string): string {
  const name = `cairn_wake_${schema}`
  return name.length <= 63 ? name : `cairn_wake_${sha256(schema).slice(0, 32)}`
}

/**
 * A `LISTEN` on one channel over a pooled connection of its own. When the connection dies (a
 * server restart), it reconnects with backoff and then calls `onWake` once, for whatever was
 * notified while it was away.
 */
export class PostgresListener implements LeaseSubscription {
  readonly #params: ListenerParams
  #client: NotifyingClient | undefined
  #timer: NodeJS.Timeout | undefined
  #retryMs = 100
  #closed = false

  private constructor(params: ListenerParams) {
    this.#params = params
  }

  /** A listener listening on `pool`; undefined when the pool's connections cannot deliver notifications. */
  static async open(params: ListenerParams): Promise<PostgresListener | undefined> {
    const listener = new PostgresListener(params)
    let client: PostgresPoolClient
    try {
      client = await params.pool.connect()
    } catch (err) {
      params.warn(`cannot listen for new runs yet (${(err as Error).message}); polling until the server answers`)
      listener.#schedule()
      return listener
    }
    if (!isNotifying(client)) {
      client.release()
      return undefined
    }
    await listener.#listen(client).catch((err: unknown) => listener.#lost(client, err as Error))
    return listener
  }

  async close(): Promise<void> {
    this.#closed = true
    clearTimeout(this.#timer)
    const client = this.#client
    this.#client = undefined
    if (!client) return
    client.removeAllListeners('notification')
    try {
      await client.query(`UNLISTEN ${quoteIdent(this.#params.channel)}`)
      client.release()
    } catch {
      client.release(true)
    }
  }

  async #listen(client: NotifyingClient): Promise<void> {
    this.#client = client
    client.on('notification', (message) => {
      if (message.channel === this.#params.channel) this.#params.onWake()
    })
    client.on('error', (err) => this.#lost(client, err))
    client.on('end', () => this.#lost(client, undefined))
    await client.query(`LISTEN ${quoteIdent(this.#params.channel)}`)
  }

  #lost(client: NotifyingClient, err: Error | undefined): void {
    if (this.#client !== client) return
    this.#client = undefined
    client.removeAllListeners('notification')
    client.release(true)
    if (this.#closed) return
    this.#params.warn(`the connection listening for new runs was lost${err ? ` (${err.message})` : ''}; reconnecting, polling meanwhile`)
    this.#schedule()
  }

  #schedule(): void {
    if (this.#closed) return
    clearTimeout(this.#timer)
    this.#timer = setTimeout(() => void this.#reconnect(), this.#retryMs)
    this.#timer.unref()
    this.#retryMs = Math.min(this.#retryMs * 2, MAX_RETRY_MS)
  }

  async #reconnect(): Promise<void> {
    let client: NotifyingClient | undefined
    try {
      client = (await this.#params.pool.connect()) as NotifyingClient
      if (this.#closed) {
        client.release()
        return
      }
      await this.#listen(client)
      this.#retryMs = 100
      this.#params.onWake()
    } catch {
      if (client && this.#client === client) this.#lost(client, undefined)
      else this.#schedule()
    }
  }
}

function isNotifying(client: PostgresPoolClient): client is NotifyingClient {
  const candidate = client as Partial<NotifyingClient>
  return typeof candidate.on === 'function' && typeof candidate.removeAllListeners === 'function'
}
