/** The conversation the storage benchmark checkpoints: one ~1 KB message per step. */
import { freezeDeep } from '../src/core/freeze.js'

/** A model message as an agent loop keeps it. */
export interface BenchMessage {
  role: 'assistant' | 'user'
  content: { text: string }[]
}

/** Characters of text in each message. */
export const MESSAGE_CHARS = 1000

const WORDS = ['tool', 'result', 'search', 'the', 'query', 'returned', 'rows', 'for', 'agent', 'plan', 'next', 'step', 'file', 'read', 'wrote', 'ok']

/**
 * Message `step` (0-based): roles alternate assistant/user; the text is distinct per step. It is
 * deeply frozen, as Cairn's agent loop freezes every message it adds to a conversation.
 */
export function benchMessage(step: number): BenchMessage {
  return freezeDeep({ role: step % 2 === 0 ? 'assistant' : 'user', content: [{ text: messageText(step) }] })
}

/** Bytes of the message list as JSON, the size a full snapshot of it would take. */
export function messagesBytes(messages: readonly BenchMessage[]): number {
  return Buffer.byteLength(JSON.stringify(messages))
}

/** Deterministic pseudo-random words (a mulberry32 stream seeded by the step). */
function messageText(step: number): string {
  let seed = (step + 1) * 0x9e3779b9
  const next = () => {
    seed = (seed + 0x6d2b79f5) | 0
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  let text = `step ${step}:`
  while (text.length < MESSAGE_CHARS) text += ` ${WORDS[Math.floor(next() * WORDS.length)] ?? ''}`
  return text.slice(0, MESSAGE_CHARS)
}
