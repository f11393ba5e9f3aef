/** A conversation of `count` messages of about 1 KB each, the same for the same count and tag. */
export function conversation(count: number, tag = 'm'): { role: string; content: { text: string }[] }[] {
  return Array.from({ length: count }, (_, i) => ({
    role: i % 2 === 0 ? 'assistant' : 'user',
    content: [{ text: `${tag}${i}:`.padEnd(1000, String.fromCharCode(97 + (i % 26))) }],
  }))
}
