/**
 * One decoding surface under fuzzing: a valid seed text, and what happens to a mutated copy.
 * `attempt` resolves `'accepted'` or `'changed'` (a store read returned altered data without
 * error), or throws what the surface threw.
 */
export interface Surface {
  name: string
  seed: string
  attempt(text: string): Promise<'accepted' | 'changed'>
  close?(): Promise<void>
}

/** JSON.parse, or the text itself when it is not JSON (a caller may hand over anything). */
export function parsedOrText(text: string): unknown {
  try {
    return JSON.parse(text) as unknown
  } catch {
    return text
  }
}
