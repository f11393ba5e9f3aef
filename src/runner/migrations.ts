import type { Migration } from '../core/schema.js'
import { DETAIL_USAGE_KEYS } from '../model/messages.js'

/**
 * Runner record format history. Version 2: the runtime snapshot's `usage` always holds the
 * cache-read, cache-write and reasoning token counts (zero when unknown), and `total_cost_usd`
 * is a number. Version 1 snapshots lack the counts; they are added as zero.
 */
export const RUNNER_MIGRATIONS: readonly Migration[] = [{
  kind: 'runner',
  from: 1,
  description: 'runtime usage gains cache-read, cache-write and reasoning token counts',
  up(payload) {
    const runtime = (payload as { runtime?: unknown } | null)?.runtime
    if (typeof runtime !== 'object' || runtime === null) return payload
    const rt = runtime as { usage?: Record<string, unknown>; total_cost_usd?: unknown }
    if (typeof rt.usage === 'object' && rt.usage !== null) {
      for (const key of DETAIL_USAGE_KEYS) if (typeof rt.usage[key] !== 'number') rt.usage[key] = 0
    }
    if (typeof rt.total_cost_usd !== 'number') rt.total_cost_usd = 0
    return payload
  },
}]
