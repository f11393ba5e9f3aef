import { encodeValue, type JsonObject, type JsonValue } from '../core/codec.js'
import type { AgentState } from '../tools/tool.js'
import { cloneData } from '../core/clone.js'

/** The agent's key-value state: JSON values only, copied in and out, persisted in snapshots. */
export class KeyValueState implements AgentState {
  #values: Map<string, JsonValue>

  constructor(initial: JsonObject = {}) {
    this.#values = new Map(Object.entries(structuredClone(initial)))
  }

  get<T = JsonValue>(key: string): T | undefined {
    const value = this.#values.get(key)
    return value === undefined ? undefined : (structuredClone(value) as T)
  }

  set(key: string, value: JsonValue): void {
    encodeValue(value, `agent state ${key}`)
    this.#values.set(key, structuredClone(value))
  }

  delete(key: string): void {
    this.#values.delete(key)
  }

  toJSON(): JsonObject {
    return cloneData(Object.fromEntries(this.#values))
  }
}
