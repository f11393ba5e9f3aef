import { RUN_LOG_LIST } from '../../src/store/engine/list-retention.js'
import type { SqliteEngine } from '../../src/sqlite.js'

/**
 * A SQLite engine that counts the checkpoint list items it hands out (messages, tool executions;
 * not the run's log of transitions, which effect reads check whole).
 */
export function countingEngine(engine: SqliteEngine): { engine: SqliteEngine; items: () => number; reset: () => void } {
  let items = 0
  const counted = new Proxy(engine, {
    get(target, property) {
      const value = Reflect.get(target, property, target) as unknown
      if (typeof value !== 'function') return value
      if (property !== 'readLists' && property !== 'readListRanges') return (value as (...args: unknown[]) => unknown).bind(target)
      return async (...args: unknown[]) => {
        const lists = await (value as (...a: unknown[]) => Promise<string[][]>).apply(target, args)
        const ids = (args[1] as { id: string }[]).map((ref) => ref.id)
        items += lists.reduce((sum, list, k) => sum + (ids[k] === RUN_LOG_LIST ? 0 : list.length), 0)
        return lists
      }
    },
  })
  return { engine: counted, items: () => items, reset: () => (items = 0) }
}
