import { appendFileSync, existsSync, readFileSync } from 'node:fs'

/** One real execution of a tool's side effect, as the effect log records it. */
export interface EffectLine {
  /** `ctx.idempotencyKey` of the call. */
  key: string
  tool: string
  idempotent: boolean
  /**
   * Whether the outside world applied it. A non-idempotent effect always applies; an idempotent
   * one emulates an API that ignores a second request with the same key (`applied: false`).
   */
  applied: boolean
  pid: number
}

/**
 * The outside world of the torture agent: an append-only file, one JSON line per real execution
 * of a side effect. Each line is one `write(2)` with `O_APPEND`, so a SIGKILL leaves whole lines.
 */
export class EffectLog {
  readonly path: string

  constructor(path: string) {
    this.path = path
  }

  /** Perform an effect: append its line (an idempotent key seen before is not applied again). */
  perform(effect: { key: string; tool: string; idempotent: boolean }): void {
    const applied = !effect.idempotent || !this.read().some((line) => line.key === effect.key && line.applied)
    const line: EffectLine = { ...effect, applied, pid: process.pid }
    appendFileSync(this.path, `${JSON.stringify(line)}\n`)
  }

  /** Every line so far, in order. */
  read(): EffectLine[] {
    if (!existsSync(this.path)) return []
    return readFileSync(this.path, 'utf8')
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line) as EffectLine)
  }
}
