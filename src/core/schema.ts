import { CheckpointCorruptionError, InvalidArgumentError, SchemaVersionError } from './errors.js'

/**
 * One step of a record format's history: upgrades the payload of a `kind` record from schema
 * version `from` to `from + 1`. Migrations are pure functions of plain data.
 */
export interface Migration {
  /** The record kind this migration applies to (`agent`, `runner`, `workflow`, …). */
  kind: string
  /** The version it upgrades from; it produces `from + 1`. */
  from: number
  /** What changed, for `cairn migrate` and error messages. */
  description: string
  /** Returns the payload in the next version's shape. May mutate and return its argument. */
  up(payload: unknown): unknown
}

/** The identity of the record being upgraded, for error messages. */
export interface UpgradeInput {
  kind: string
  schemaVersion: number
  payload: unknown
  runId?: string | undefined
  checkpointId?: string | undefined
}

/**
 * Knows the current schema version of each record kind and the migrations that lead to it.
 * Stores call {@link SchemaRegistry.upgrade} on every record they load, so an older record is
 * upgraded step by step and a newer one is refused with a {@link SchemaVersionError}.
 *
 * @example
 * ```ts
 * const schemas = new SchemaRegistry()
 *   .define('note', 2)
 *   .register({ kind: 'note', from: 1, description: 'text became a list of lines',
 *               up: (p) => ({ lines: String((p as { text: string }).text).split('\n') }) })
 * ```
 */
export class SchemaRegistry {
  readonly #current = new Map<string, number>()
  readonly #steps = new Map<string, Map<number, Migration>>()

  /** Declare the version this code writes for `kind`. */
  define(kind: string, version: number): this {
    if (!Number.isInteger(version) || version < 1) {
      throw new InvalidArgumentError(`schema version of ${kind} must be a positive integer, got ${String(version)}`)
    }
    this.#current.set(kind, version)
    return this
  }

  /** Add one upgrade step. */
  register(migration: Migration): this {
    let steps = this.#steps.get(migration.kind)
    if (!steps) this.#steps.set(migration.kind, (steps = new Map<number, Migration>()))
    if (steps.has(migration.from)) {
      throw new InvalidArgumentError(`a migration of ${migration.kind} from version ${migration.from} is already registered`)
    }
    steps.set(migration.from, migration)
    return this
  }

  /** The version this code writes for `kind`, or `undefined` when the kind is not defined. */
  currentVersion(kind: string): number | undefined {
    return this.#current.get(kind)
  }

  /** The registered migrations of `kind`, oldest first. */
  migrations(kind: string): Migration[] {
    return [...(this.#steps.get(kind)?.values() ?? [])].sort((a, b) => a.from - b.from)
  }

  /**
   * Bring a record's payload to the current version of its kind. A kind that was never defined
   * passes through unchanged.
   */
  upgrade(input: UpgradeInput): { schemaVersion: number; payload: unknown } {
    const current = this.#current.get(input.kind)
    let { schemaVersion: version, payload } = input
    if (current === undefined || version === current) return { schemaVersion: version, payload }
    if (!Number.isInteger(version) || version < 1) {
      throw new CheckpointCorruptionError(`checkpoint ${input.checkpointId ?? ''} of run ${input.runId ?? ''} has an invalid schema version ${String(version)}`, {
        runId: input.runId,
        checkpointId: input.checkpointId,
      })
    }
    if (version > current) throw new SchemaVersionError({ kind: input.kind, found: version, supported: current })
    while (version < current) {
      const step = this.#steps.get(input.kind)?.get(version)
      if (!step) {
        throw new SchemaVersionError({
          kind: input.kind,
          found: input.schemaVersion,
          supported: current,
          message: `${input.kind} record has schema version ${input.schemaVersion}; this version of Cairn writes ${current} and has no migration from ${version} to ${version + 1}`,
        })
      }
      try {
        payload = step.up(payload)
      } catch (err) {
        throw new SchemaVersionError({
          kind: input.kind,
          found: input.schemaVersion,
          supported: current,
          message: `migrating ${input.kind} checkpoint ${input.checkpointId ?? ''} from version ${version} to ${version + 1} (${step.description}) failed: ${(err as Error).message}`,
          cause: err,
        })
      }
      version++
    }
    return { schemaVersion: version, payload }
  }
}

/**
 * The registry stores use unless given their own. Each layer defines its record kinds here when
 * it is imported.
 */
export const defaultSchemas = new SchemaRegistry()
