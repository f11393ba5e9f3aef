import { appendFile, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { Agent, FileStore, Runner, tool, type JsonObject } from '../../src/index.js'
import { ScriptedModel } from '../../src/testing.js'
import { useTempDirs } from '../support/temp-dirs.js'

/**
 * The FileStore keeps a run's events one JSON line each in `events/<runId>.jsonl`. An event's
 * line has no size limit of its own (an answer of a few hundred KB is one `run_finished`), so a
 * reader must find the end of a line however far past its cursor it is.
 */

const tempDir = useTempDirs('cairn-long-events-')

/** An event whose line in the file (its JSON and the newline) is exactly `bytes` long. */
function eventOfLine(n: number, bytes: number): JsonObject {
  const overhead = JSON.stringify({ n, text: '' }).length + 1
  return { n, text: 'x'.repeat(bytes - overhead) }
}

const KIB = 1024

describe('the file event log with lines longer than 64 KiB', () => {
  it.each([64 * KIB - 1, 64 * KIB, 64 * KIB + 1, 200_000, (1 << 20) - 1, 1 << 20, (1 << 20) + 1, 3 << 20])(
    'a reader in another process waiting after an event sees a next line of %i bytes',
    async (bytes) => {
      const directory = await tempDir()
      const writer = new FileStore({ directory }).events!
      // A second store on the directory is what another process has: it sees appends only by polling.
      const reader = new FileStore({ directory }).events!
      const [first] = await writer.append('r', [{ n: 1 }])
      const event = eventOfLine(2, bytes)
      const waiting = reader.waitForMore('r', first, { timeoutMs: 2000 })
      const [second] = await writer.append('r', [event])
      expect(await waiting).toBe(true)
      expect(Number(second) - Number(first)).toBe(bytes)
      expect(await reader.read('r', { after: first })).toEqual([{ cursor: second, event }])
      await writer.close()
      await reader.close()
    },
  )

  it('several long lines, appended one by one and together, each wake the reader waiting before them', async () => {
    const directory = await tempDir()
    const writer = new FileStore({ directory }).events!
    const reader = new FileStore({ directory }).events!
    const events = [eventOfLine(1, 100_000), eventOfLine(2, 300_000), eventOfLine(3, 70_000), eventOfLine(4, 1_500_000), eventOfLine(5, 90_000)]
    let after: string | undefined
    for (const event of events.slice(0, 2)) {
      const waiting = reader.waitForMore('r', after, { timeoutMs: 2000 })
      ;[after] = await writer.append('r', [event])
      expect(await waiting).toBe(true)
    }
    const waiting = reader.waitForMore('r', after, { timeoutMs: 2000 })
    const together = await writer.append('r', events.slice(2))
    expect(await waiting).toBe(true)
    expect((await reader.read('r')).map((e) => e.event)).toEqual(events)
    expect((await reader.read('r', { after })).map((e) => e.cursor)).toEqual(together)
    // A page of one ends after one long line, and the next page starts at the line after it.
    expect((await reader.read('r', { after, limit: 1 })).map((e) => e.event)).toEqual([events[2]])
    expect((await reader.read('r', { after: together[0], limit: 1 })).map((e) => e.event)).toEqual([events[3]])
    await writer.close()
    await reader.close()
  })

  it('a long line left without its newline is not an event; the next owner cuts it off and its append wakes the reader', async () => {
    const directory = await tempDir()
    const first = new FileStore({ directory }).events!
    const reader = new FileStore({ directory }).events!
    const [cursor] = await first.append('r', [{ n: 1 }])
    await first.close()
    // A crash in the middle of writing a 300 KB line: the line's start is on disk, its newline is not.
    const path = join(directory, 'events', 'r.jsonl')
    await appendFile(path, JSON.stringify(eventOfLine(2, 300_000)).slice(0, 200_000))
    expect(await reader.waitForMore('r', cursor, { timeoutMs: 300 })).toBe(false)
    expect(await reader.read('r', { after: cursor })).toEqual([])
    const waiting = reader.waitForMore('r', cursor, { timeoutMs: 2000 })
    const next = new FileStore({ directory }).events!
    const event = eventOfLine(3, 150_000)
    const [appended] = await next.append('r', [event])
    expect(await waiting).toBe(true)
    expect(await reader.read('r', { after: cursor })).toEqual([{ cursor: appended, event }])
    expect((await readFile(path, 'utf8')).split('\n').filter(Boolean)).toHaveLength(2)
    await next.close()
    await reader.close()
  })

  it('runner.events follows a run live through a tool output of 2 MB to its run_finished', async () => {
    const store = new FileStore({ directory: await tempDir() })
    const runner = new Runner({ store, eventLog: { maxToolPayloadBytes: 4 << 20 } })
    const report = 'All quarters, in detail. '.repeat(80_000)
    const fetchReport = tool({ name: 'fetch_report', description: 'The full report.', inputSchema: { type: 'object' }, callback: () => report })
    const model = new ScriptedModel([[{ toolUse: { toolUseId: 't1', name: 'fetch_report', input: {} } }], [{ text: 'Read it.' }]])
    await store.createRun({ runId: 'long', status: 'queued' })
    const reading = (async () => {
      const out: JsonObject[] = []
      for await (const { event } of runner.events('long')) out.push(event as unknown as JsonObject)
      return out
    })()
    const result = await runner.run(new Agent({ model, tools: [fetchReport], name: 'analyst' }), { input: 'Report', runId: 'long' })
    expect(result.state).toBe('completed')
    const events = await reading
    const finished = events.find((event) => event.type === 'tool_call_finished')
    // The agent may shorten a large output; the event's line is still longer than a 1 MiB read chunk.
    expect(finished?.output).toMatch(/^All quarters, in detail\./)
    expect(JSON.stringify(finished).length).toBeGreaterThan(1 << 20)
    expect(events.at(-1)).toMatchObject({ type: 'run_finished', state: 'completed', text: 'Read it.' })
    await store.close()
  })
})
