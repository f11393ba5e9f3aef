import { importPeer, requirePeer } from '../../../core/peers.js'
import { InvalidArgumentError, StoreError } from '../../../core/errors.js'
import { EngineStore, type EngineStoreOptions } from '../../engine-store.js'
import { PostgresSqlDriver, type PostgresPool, type PostgresPoolClient, type PostgresQueryConfig, type PostgresQueryResult } from './driver.js'
import { PostgresEngine, type PostgresEngineOptions } from './postgres-engine.js'
import { SqlEventLog } from '../../event-log/sql-event-log.js'
import { PostgresListener } from './postgres-listener.js'
import { SqlRunWaits } from '../../waits/sql-run-waits.js'

/** How often a wait for a run's events checks the table where connections cannot listen (an embedded PGlite). */
const EVENT_POLL_MS = 100
/** Checks between notifications: a backstop for one lost while the listening connection reconnected. */
const LISTENING_EVENT_POLL_MS = 2000

/**
 * Where a {@link PostgresStore} connects: a `connectionString`, for which the store creates (and
 * on `close()` ends) a `pg` pool; or a `pool` you own — a `pg.Pool`, or a {@link PGliteClient} —
 * which the store uses and leaves open.
 */
export type PostgresConnection = { connectionString: string; pool?: never } | { pool: PostgresPool; connectionString?: never }

/** Settings of a {@link PostgresStore} besides its connection. */
export interface PostgresStoreSettings extends EngineStoreOptions, Pick<PostgresEngineOptions, 'schema' | 'preparedStatements'> {}

/**
 * What `new PostgresStore(options)` takes: one object with a connection (`connectionString` or
 * `pool`, not both) and the settings.
 */
export type PostgresStoreOptions = PostgresConnection & PostgresStoreSettings

/**
 * The production {@link CheckpointStore}: PostgreSQL through the `pg` driver (an optional peer
 * dependency), for many processes on many machines sharing one database. Tables live in their
 * own schema and are migrated on first use under an advisory lock, so workers starting together
 * migrate once. Writes of one run are serialized by a row lock on the run; storage grows
 * linearly (a growing message list is stored once, as appended rows); `getLatest` and `load`
 * take two queries whatever the run's length.
 *
 * The constructor does not wait for the server: the first call does (or `await store.ready()`).
 *
 * @example
 * ```ts
 * import { PostgresStore } from 'cairn-agents/postgres'
 *
 * const store = new PostgresStore({ connectionString: process.env.DATABASE_URL!, schema: 'cairn' })
 * await store.ready() // optional: fail fast when the server is unreachable
 * await store.save({ runId: 'r1', kind: 'demo', phase: 'start', payload: { n: 1 } })
 * await store.close()
 * ```
 */
export class PostgresStore extends EngineStore {
  readonly #engine: PostgresEngine

  /**
   * @param options The connection (`connectionString` or `pool`) and the settings, in one object.
   * @param settings Deprecated: settings as a second argument; pass them in `options`.
   */
  constructor(options: PostgresStoreOptions, settings?: PostgresStoreSettings) {
    const merged: PostgresStoreOptions = { ...settings, ...options }
    const warn = merged.onWarning ?? ((message: string) => process.emitWarning(message, 'CairnWarning'))
    const { engine, pool } = openEngine(merged, warn)
    super(engine, merged)
    this.#engine = engine
    const db = new PostgresSqlDriver(pool, engine.schema, () => engine.ready(), merged.preparedStatements)
    const channel = `cairn_run_events_${engine.schema}`
    const listen = (onWake: () => void) => PostgresListener.open({ pool, channel, onWake, warn })
    this.useEventLog(new SqlEventLog({ db, pollMs: EVENT_POLL_MS, notify: { channel, listeningPollMs: LISTENING_EVENT_POLL_MS, listen } }))
    this.useRunWaits(new SqlRunWaits(db))
  }

  /** The schema the store's tables live in. */
  get schema(): string {
    return this.#engine.schema
  }

  /** Resolves once connected and migrated; rejects with a `StoreError` saying why not. Calls wait for it anyway. */
  ready(): Promise<void> {
    return this.#engine.ready()
  }
}

function openEngine(options: PostgresStoreOptions, warn: (message: string) => void): { engine: PostgresEngine; pool: PostgresPool } {
  const { pool, connectionString } = options as Partial<PostgresStoreOptions>
  if (pool !== undefined && connectionString !== undefined) throw new InvalidArgumentError('PostgresStore takes a connection string or a pool, not both')
  if (pool !== undefined) return { engine: new PostgresEngine({ ...options, pool, onWarning: warn }), pool }
  if (typeof connectionString !== 'string' || connectionString === '') {
    throw new InvalidArgumentError('PostgresStore needs a connection string ({ connectionString }) or a pool ({ pool }: a pg.Pool or PGliteClient)')
  }
  const owned = new PgPool(connectionString, warn)
  return { engine: new PostgresEngine({ ...options, pool: owned, onClose: () => owned.end(), onWarning: warn }), pool: owned }
}

/** The slice of the `pg` module used to create a pool. */
interface PgModule {
  Pool: new (config: { connectionString: string; application_name?: string }) => PostgresPool & {
    on(event: 'error', listener: (err: Error) => void): unknown
    end(): Promise<void>
  }
}

type OwnedPool = InstanceType<PgModule['Pool']>

/**
 * A `pg.Pool` created on first use: `pg` is imported only when a store is opened by connection
 * string, so `cairn-agents/postgres` over PGlite does not need it installed.
 */
class PgPool implements PostgresPool {
  readonly #pool: Promise<OwnedPool>

  constructor(connectionString: string, warn: (message: string) => void) {
    this.#pool = loadPg().then(({ Pool }) => {
      const pool = new Pool({ connectionString, application_name: 'cairn' })
      // An idle connection that dies (a server restart) is dropped and replaced by the pool;
      // without a listener its error would crash the process.
      pool.on('error', (err) => warn(`an idle Postgres connection failed and was discarded: ${err.message}`))
      return pool
    })
    this.#pool.catch(() => {})
  }

  async query(statement: string | PostgresQueryConfig, values?: unknown[]): Promise<PostgresQueryResult> {
    return (await this.#pool).query(statement, values)
  }

  async connect(): Promise<PostgresPoolClient> {
    return (await this.#pool).connect()
  }

  async end(): Promise<void> {
    const pool = await this.#pool.catch(() => undefined)
    await pool?.end()
  }
}

async function loadPg(): Promise<PgModule> {
  const peer = { name: 'pg', neededBy: 'PostgresStore with a connectionString' } as const
  let pg: Partial<PgModule> & { default?: PgModule }
  // Through `require` (pg is a CommonJS package), as the store opens: without the ESM loader's
  // resolution of a dynamic import, a millisecond or two of a fresh process's first read; through
  // `import()` when `require` cannot load it (a pg published as ES modules only). A pg that is not
  // installed is a MissingDependencyError naming it and `npm install pg`.
  try {
    pg = requirePeer(peer)
  } catch (err) {
    if ((err as { code?: unknown }).code !== 'ERR_REQUIRE_ESM') throw err
    pg = await importPeer(peer)
  }
  const module = pg.Pool ? (pg as PgModule) : pg.default
  if (!module?.Pool) throw new StoreError('The installed pg package has no Pool export: install a pg release of 8 or later (npm install pg).')
  return module
}
