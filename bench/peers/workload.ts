/**
 * The one workload every system runs: an agent loop of `n` cycles, each a model step that
 * appends a ~1 KB assistant message asking for one tool call and a tool step that appends a
 * ~1 KB result, then a closing model call that ends the turn (2n + 1 steps). No real model:
 * every system's model step returns the same deterministic text.
 */
/** Run lengths, in cycles. */
export const SIZES = [200, 500, 1000] as const

/** The prompt that starts every run. */
export const PROMPT = 'Research the question step by step, calling lookup once per step.'
export const TOOL_NAME = 'lookup'
export const TOOL_DESCRIPTION = 'Look up one fact; returns about 1 KB of text.'
export const FINAL_TEXT = 'Done: every step looked up.'

/** Steps of a run of `n` cycles: a model and a tool step per cycle, and the closing model call. */
export function stepsOf(n: number): number {
  return 2 * n + 1
}

/** The ~1 KB text of the assistant message of cycle `cycle` (0-based). */
export function assistantText(cycle: number): string {
  return textOf(2 * cycle)
}

/** The ~1 KB text the tool returns in cycle `cycle`. */
export function toolResultText(cycle: number): string {
  return textOf(2 * cycle + 1)
}

/** The tool input of cycle `cycle`. */
export function toolInput(cycle: number): { query: string } {
  return { query: `fact ${cycle}` }
}

/** The cycle a request is in, from how many messages the conversation holds (prompt + 2 a cycle). */
export function cycleOf(messageCount: number): number {
  return (messageCount - 1) / 2
}

/** The tool's cycle, from its input. */
export function cycleOfInput(input: { query: string }): number {
  return Number(input.query.slice('fact '.length))
}

const MESSAGE_CHARS = 1000
const WORDS = ['tool', 'result', 'search', 'the', 'query', 'returned', 'rows', 'for', 'agent', 'plan', 'next', 'step', 'file', 'read', 'wrote', 'ok']

/**
 * 1,000 characters of deterministic pseudo-random words, distinct per index (a mulberry32
 * stream seeded by it, as in `bench/messages.ts`; not imported from there, so a peer's process
 * loads no Cairn code).
 */
function textOf(index: number): string {
  let seed = (index + 1) * 0x9e3779b9
  const next = () => {
    seed = (seed + 0x6d2b79f5) | 0
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  let text = `step ${index}:`
  while (text.length < MESSAGE_CHARS) text += ` ${WORDS[Math.floor(next() * WORDS.length)] ?? ''}`
  return text.slice(0, MESSAGE_CHARS)
}

/**
 * Records when each tool step runs, so the time of every cycle is known: an added cost that
 * grows along a run shows as later cycles taking longer than early ones.
 */
export class CycleClock {
  readonly #marks: bigint[] = []

  mark(): void {
    this.#marks.push(process.hrtime.bigint())
  }

  /** Milliseconds between consecutive tool steps (one full cycle each). */
  cycleMs(): number[] {
    const out: number[] = []
    for (let i = 1; i < this.#marks.length; i++) out.push(Number(this.#marks[i]! - this.#marks[i - 1]!) / 1e6)
    return out
  }
}
