/**
 * Every error Cairn throws on purpose is a {@link CairnError} with a stable string `code`, so
 * callers can branch on `err.code` without parsing messages.
 */
export type CairnErrorCode =
  | 'checkpoint_invalid'
  | 'unserializable'
  | 'checkpoint_corrupt'
  | 'checkpoint_integrity'
  | 'checkpoint_not_found'
  | 'run_not_found'
  | 'run_exists'
  | 'seq_conflict'
  | 'schema_version'
  | 'config_mismatch'
  | 'store_failure'
  | 'store_closed'
  | 'invalid_argument'
  | 'missing_checkpoint'
  | 'checkpointing_disabled'
  | 'schema_mismatch'
  | 'agent_busy'
  | 'structured_output'
  | 'max_supersteps'
  | 'executor_failed'
  | 'workflow_busy'
  | 'unknown_request'
  | 'invalid_response'
  | 'executor_hook_failed'
  | 'checkpoint_save_failed'
  | 'lease_lost'
  | 'run_busy'
  | 'effect_started'
  | 'result_timeout'
  | 'model_error'
  | 'model_stream_invalid'
  | 'run_not_paused'
  | 'max_recovery_attempts'
  | 'request_answered'
  | 'missing_dependency'
  | 'mcp_connection'
  | 'mcp_call'
  | 'mcp_tools'
  | 'encryption_change'
  | 'wrong_key'
  | 'stream_idle'
  | 'interrupt_expired'
  | 'time_unavailable'
  | 'subagent_waiting'

/** Options shared by every Cairn error. */
export interface CairnErrorOptions {
  /** The underlying error, kept for diagnosis. */
  cause?: unknown
}

/**
 * Base class of every error Cairn throws on purpose.
 *
 * @example
 * ```ts
 * try { await store.load(id) } catch (err) {
 *   if (err instanceof CairnError && err.code === 'checkpoint_not_found') { ... }
 * }
 * ```
 */
export class CairnError extends Error {
  /** A stable, machine-readable reason. */
  readonly code: CairnErrorCode

  constructor(code: CairnErrorCode, message: string, options: CairnErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause })
    this.name = new.target.name
    this.code = code
  }
}

/**
 * An argument is not what the function takes: a missing or out-of-range option, a value of the
 * wrong kind. The message names the argument and what it accepts; nothing was changed.
 */
export class InvalidArgumentError extends CairnError {
  /** The run the argument was for, when there is one. */
  readonly runId: string | undefined
  /** The checkpoint the argument was for, when there is one. */
  readonly checkpointId: string | undefined

  constructor(message: string, options: CairnErrorOptions & { runId?: string | undefined; checkpointId?: string | undefined } = {}) {
    super('invalid_argument', message, options)
    this.runId = options.runId
    this.checkpointId = options.checkpointId
  }
}

/**
 * An optional package Cairn needs for what was asked is not installed, or cannot be found from
 * where Cairn is installed: `better-sqlite3` for `cairn-agents/sqlite`, `pg` for Postgres by
 * connection string, a provider's client, `tsx` for a TypeScript agents module, …. The message
 * names the package and the command that installs it (`install`).
 */
export class MissingDependencyError extends CairnError {
  /** The package to install, e.g. `better-sqlite3`. */
  readonly packageName: string
  /** The command that installs it, e.g. `npm install better-sqlite3`. */
  readonly install: string

  constructor(params: { packageName: string; neededBy: string; dev?: boolean; cause?: unknown }) {
    const install = `npm install ${params.dev === true ? '-D ' : ''}${params.packageName}`
    super('missing_dependency', `${params.neededBy} needs the package ${params.packageName}, which is not installed: run \`${install}\``, { cause: params.cause })
    this.packageName = params.packageName
    this.install = install
  }
}

/** Context carried by checkpoint errors. */
export interface CheckpointErrorOptions extends CairnErrorOptions {
  runId?: string | undefined
  checkpointId?: string | undefined
  /** The dotted path inside the value that is wrong, when there is one. */
  path?: string | undefined
}

/** A checkpoint cannot be written or used as asked (bad input, unserializable value, stale seq). */
export class CheckpointError extends CairnError {
  readonly runId: string | undefined
  readonly checkpointId: string | undefined
  readonly path: string | undefined

  constructor(code: CairnErrorCode, message: string, options: CheckpointErrorOptions = {}) {
    super(code, message, options)
    this.runId = options.runId
    this.checkpointId = options.checkpointId
    this.path = options.path
  }
}

/**
 * A stored checkpoint is truncated, garbled, hand-edited or otherwise not what Cairn wrote.
 * Cairn never recovers partially from one and never silently starts fresh.
 */
export class CheckpointCorruptionError extends CheckpointError {
  constructor(message: string, options: CheckpointErrorOptions & { code?: 'checkpoint_corrupt' | 'checkpoint_integrity' } = {}) {
    super(options.code ?? 'checkpoint_corrupt', message, options)
  }
}

/**
 * A record of a store opened with keys does not verify: it was edited, forged, copied from
 * another place or run, replayed over a newer one, signed with a key the store does not hold, or
 * not signed at all. Raised before anything of the record reaches the caller (code
 * `checkpoint_integrity`); a resume never continues from unverified state.
 */
export class CheckpointIntegrityError extends CheckpointCorruptionError {
  /** The key id the record names, when it names one. */
  readonly keyId: string | undefined

  constructor(message: string, options: CheckpointErrorOptions & { keyId?: string | undefined } = {}) {
    super(message, { ...options, code: 'checkpoint_integrity' })
    this.keyId = options.keyId
  }
}

/** No checkpoint (or run) exists with the given id. */
export class CheckpointNotFoundError extends CheckpointError {
  constructor(message: string, options: CheckpointErrorOptions & { code?: 'checkpoint_not_found' | 'run_not_found' } = {}) {
    super(options.code ?? 'checkpoint_not_found', message, options)
  }
}

/** A record's schema version is one this code cannot read (newer than it knows, or no migration path). */
export class SchemaVersionError extends CairnError {
  readonly kind: string
  readonly found: number
  readonly supported: number

  constructor(params: { kind: string; found: number; supported: number; message?: string; cause?: unknown }) {
    super(
      'schema_version',
      params.message ??
        `${params.kind} record has schema version ${params.found}, but this version of Cairn reads up to ${params.supported}; upgrade Cairn to load it`,
      { cause: params.cause },
    )
    this.kind = params.kind
    this.found = params.found
    this.supported = params.supported
  }
}

/** The configuration resuming a run differs from the one that wrote its checkpoint. */
export class ConfigMismatchError extends CairnError {
  readonly expected: string
  readonly actual: string

  constructor(params: { message: string; expected: string; actual: string; cause?: unknown }) {
    super('config_mismatch', params.message, { cause: params.cause })
    this.expected = params.expected
    this.actual = params.actual
  }
}

/** A storage backend failed; the original error is the `cause`. */
export class StoreError extends CairnError {
  readonly runId: string | undefined

  constructor(
    message: string,
    options: CairnErrorOptions & { runId?: string | undefined; code?: CairnErrorCode } = {},
  ) {
    super(options.code ?? 'store_failure', message, options)
    this.runId = options.runId
  }
}

/**
 * A worker no longer holds the run it was writing to: its lease lapsed and another worker claimed
 * the run (a higher epoch), the run was cancelled, or the worker gave it up. The write was
 * rejected and nothing of it was stored; the worker stops executing the run.
 */
export class LeaseLostError extends CairnError {
  readonly runId: string
  readonly owner: string
  readonly epoch: number

  constructor(params: { runId: string; owner: string; epoch: number; message?: string; cause?: unknown }) {
    super(
      'lease_lost',
      params.message ??
        `worker ${params.owner} no longer holds run ${params.runId} (epoch ${params.epoch}): another worker claimed it after the lease lapsed; the write was rejected`,
      { cause: params.cause },
    )
    this.runId = params.runId
    this.owner = params.owner
    this.epoch = params.epoch
  }
}

/**
 * Another execution owns the run: its lease is live. `owner` is the holder's id (a `Runner`'s is
 * `<host>:<pid>:<random>`, a worker's is its id); `host` and `pid` are read from it when it has
 * that form. The lease ends at `leaseExpiresAt` (Unix ms) unless its holder renews it, which it
 * does while it runs. Wait for it (`waitForOwner` on `runner.resume`/`runner.run`), or try later:
 * a holder that died stops renewing, and its lease lapses.
 */
export class RunBusyError extends CairnError {
  readonly runId: string
  readonly owner: string
  readonly host: string | undefined
  readonly pid: number | undefined
  readonly leaseExpiresAt: number | null

  constructor(params: { runId: string; owner: string; leaseExpiresAt: number | null; message?: string }) {
    const { host, pid } = parseOwner(params.owner)
    const until = params.leaseExpiresAt === null ? 'until it releases it' : `until ${new Date(params.leaseExpiresAt).toISOString()} unless renewed`
    const who = pid === undefined ? `owner ${params.owner}` : `process ${pid} on ${host} (owner ${params.owner})`
    super(
      'run_busy',
      params.message ??
        `run ${params.runId} is being executed by ${who}, whose lease holds it ${until}; ` +
          'wait for it (waitForOwner: true) or resume the run once that execution ends or its lease lapses',
    )
    this.runId = params.runId
    this.owner = params.owner
    this.host = host
    this.pid = pid
    this.leaseExpiresAt = params.leaseExpiresAt
  }
}

/** The host and pid of an owner id of the form `<host>:<pid>:<random>`. */
export function parseOwner(owner: string): { host: string | undefined; pid: number | undefined } {
  const match = /^(.+):(\d+):[0-9a-f]+$/.exec(owner)
  return match ? { host: match[1], pid: Number(match[2]) } : { host: undefined, pid: undefined }
}

/**
 * A side effect could not be marked started because it is not `pending`: another execution
 * started it already (its outcome is unknown until it records one), or it finished. Starting it
 * again would run it twice; the runner treats a started call as an unknown outcome instead.
 */
export class EffectStartedError extends CairnError {
  readonly runId: string
  readonly callId: string
  readonly status: 'started' | 'succeeded' | 'failed'

  constructor(params: { runId: string; callId: string; status: 'started' | 'succeeded' | 'failed' }) {
    super(
      'effect_started',
      `effect ${params.callId} of run ${params.runId} is already ${params.status}, so it was not started again; ` +
        (params.status === 'started' ? 'its outcome is unknown until its execution records one' : 'use its recorded outcome'),
    )
    this.runId = params.runId
    this.callId = params.callId
    this.status = params.status
  }
}

/**
 * Answers were given to a run that is not paused waiting for them: `runner.resume` with
 * `responses` for a run with no pending interrupt, or `CairnClient.respond` for a run that is
 * not `paused` (answered already by another caller, finished, or cancelled). Nothing was changed.
 * `status` is the run's status, when known.
 */
export class RunNotPausedError extends CairnError {
  readonly runId: string
  readonly status: string | undefined

  constructor(params: { runId: string; status?: string | undefined; message: string }) {
    super('run_not_paused', params.message)
    this.runId = params.runId
    this.status = params.status
  }
}

/**
 * An answer came after its interrupt's deadline (`expiresAt`): what the interrupt's `onExpiry`
 * says happened instead (a default answer, a failed run, an escalation), and the late answer is
 * refused. Look at the run again (`cairn show RUN`, `client.result`) for what it waits for now.
 * Branch on `err.code === 'interrupt_expired'`.
 */
export class InterruptExpiredError extends CairnError {
  readonly runId: string | undefined
  readonly interruptId: string
  /** Unix milliseconds. */
  readonly expiresAt: number

  constructor(params: { runId?: string | undefined; interruptId: string; expiresAt: number; message?: string }) {
    super(
      'interrupt_expired',
      params.message ??
        `interrupt ${params.interruptId}${params.runId === undefined ? '' : ` of run ${params.runId}`} expired at ${new Date(params.expiresAt).toISOString()}; its answer comes too late and is refused: look at what the run waits for now`,
    )
    this.runId = params.runId
    this.interruptId = params.interruptId
    this.expiresAt = params.expiresAt
  }
}

/**
 * The secret given for a key id is not the one the store was written with. A keyed store keeps
 * a check value per key id (an HMAC of a fixed label under the key); the key ring's secret for
 * `keyId` does not produce it. This is a wrong (mistyped, swapped) secret, not a tampered record:
 * nothing was read with it, and nothing is written with it. Give the secret the store was
 * written with under that id, or write with a new key id.
 */
export class WrongKeyError extends CairnError {
  readonly keyId: string

  constructor(params: { keyId: string; cause?: unknown }) {
    super(
      'wrong_key',
      `the secret given for key ${params.keyId} is not the one this store was written with (its check value differs); ` +
        `nothing is read or written with it: give the secret this store's records were written with under key ${params.keyId}, or write with a new key id`,
      { cause: params.cause },
    )
    this.keyId = params.keyId
  }
}

/**
 * A rekey was refused because it would change whether records are encrypted without being asked
 * to: a store opened without `encrypt` that holds encrypted records (it would write them in
 * plaintext; pass `decrypt: true`, or open the store with `encrypt: true` to keep them encrypted),
 * or a store opened with `encrypt` that holds plaintext records (pass `encrypt: true`). `change`
 * is what the rekey would have done; the runs before `runId` were rekeyed without changing their
 * encryption, and nothing of `runId` was written.
 */
export class EncryptionChangeError extends CairnError {
  readonly runId: string
  readonly change: 'encrypt' | 'decrypt'

  constructor(params: { runId: string; change: 'encrypt' | 'decrypt'; message: string }) {
    super('encryption_change', params.message)
    this.runId = params.runId
    this.change = params.change
  }
}

/**
 * A worker failed a run that was recovered more than `maxRecoveryAttempts` times without
 * finishing (each time its worker died, lost its lease or could not write), instead of retrying
 * it forever. `lastError` describes how the last unfinished execution ended, when it is known.
 */
export class RecoveryLimitError extends CairnError {
  readonly runId: string
  readonly recoveries: number
  readonly maxRecoveryAttempts: number
  readonly lastError: { name: string; message: string } | undefined

  constructor(params: { runId: string; recoveries: number; maxRecoveryAttempts: number; lastError?: { name: string; message: string } | undefined }) {
    const { runId, recoveries, maxRecoveryAttempts, lastError } = params
    super(
      'max_recovery_attempts',
      `run ${runId} was recovered ${recoveries} times without finishing (each time its worker died, lost its lease or could not write); ` +
        `it is failed after maxRecoveryAttempts (${maxRecoveryAttempts}) instead of being retried forever` +
        (lastError ? `; the last execution that ended failed with ${lastError.name}: ${lastError.message}` : ''),
    )
    this.runId = runId
    this.recoveries = recoveries
    this.maxRecoveryAttempts = maxRecoveryAttempts
    this.lastError = lastError
  }
}

/**
 * Whether `err`, or an error it wraps, reports the store being unavailable (`store_failure`,
 * `store_closed`) rather than a lost lease or a bad record: the run did not fail, its persistence
 * did, and it can be resumed from its last checkpoint once the store is back.
 */
export function isStoreOutage(err: unknown): boolean {
  let outage = false
  for (let cause = err, depth = 0; cause instanceof Error && depth < 8; cause = cause.cause, depth++) {
    if (!(cause instanceof CairnError)) continue
    if (cause.code === 'lease_lost') return false
    if (cause.code === 'store_failure' || cause.code === 'store_closed') outage = true
  }
  return outage
}
