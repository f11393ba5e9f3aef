import type { JsonObject } from '../core/codec.js'
import type { Message } from '../model/messages.js'
import { InvalidArgumentError } from '../core/errors.js'

/**
 * Decides which messages the model sees. Its state is part of the agent's snapshot, so a
 * resumed agent manages the conversation exactly as the original would have.
 */
export interface ConversationManager {
  /** Trim `messages` in place before a model call. */
  apply(messages: Message[]): void
  /** State to persist. */
  getState(): JsonObject
  /** Restore persisted state. */
  restoreState(state: JsonObject): void
}

/** Keeps every message. */
export class NullConversationManager implements ConversationManager {
  apply(): void {}
  getState(): JsonObject {
    return {}
  }
  restoreState(): void {}
}

/**
 * Keeps the last `windowSize` messages, never starting the window on a tool result whose tool
 * use was dropped (the model would reject the history).
 */
export class SlidingWindowConversationManager implements ConversationManager {
  readonly windowSize: number
  /** How many messages were dropped so far. */
  removedMessageCount = 0

  constructor(options: { windowSize?: number } = {}) {
    this.windowSize = options.windowSize ?? 40
    if (!Number.isInteger(this.windowSize) || this.windowSize < 1) throw new InvalidArgumentError('windowSize must be a positive integer')
  }

  apply(messages: Message[]): void {
    if (messages.length <= this.windowSize) return
    let start = messages.length - this.windowSize
    while (start < messages.length - 1 && messages[start]?.content.some((block) => 'toolResult' in block)) start++
    messages.splice(0, start)
    this.removedMessageCount += start
  }

  getState(): JsonObject {
    return { type: 'sliding_window', windowSize: this.windowSize, removedMessageCount: this.removedMessageCount }
  }

  restoreState(state: JsonObject): void {
    const removed = state.removedMessageCount
    this.removedMessageCount = typeof removed === 'number' ? removed : 0
  }
}
