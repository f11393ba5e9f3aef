import { fork } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'

interface SpanData {
  name: string
  attributes: Record<string, unknown>
  spanId: string
  parentSpanId: string | null
  pid: number
}

const CHILD = fileURLToPath(new URL('./traced-run.ts', import.meta.url))
const dirs: string[] = []
afterAll(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true })
})

function runChild(role: 'first' | 'resumed', path: string): Promise<{ spans: SpanData[]; signal: NodeJS.Signals | null; state?: string }> {
  const child = fork(CHILD, [role, path], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  let message: { spans: SpanData[]; state?: string } = { spans: [] }
  child.on('message', (m) => (message = m as typeof message))
  return new Promise((resolve, reject) => {
    child.on('error', reject)
    child.on('close', (_code, signal) => resolve({ ...message, signal }))
  })
}

describe('OpenTelemetry spans (GenAI semantic conventions)', () => {
  it('a run killed with SIGKILL and resumed in a fresh process yields chat and execute_tool spans in both, linked by run id, replayed calls marked', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'cairn-otel-'))
    dirs.push(dir)
    const path = join(dir, 'cairn.db')
    const first = await runChild('first', path)
    expect(first.signal).toBe('SIGKILL')
    const second = await runChild('resumed', path)
    expect(second.state).toBe('completed')

    // Process 1: two model calls and three tools ran; its invoke_agent span never ended (the process died).
    expect(first.spans.map((s) => s.name).sort()).toEqual(['chat scripted', 'chat scripted', 'execute_tool lookup', 'execute_tool lookup', 'execute_tool save_note'])
    const chat = first.spans.find((s) => s.name === 'chat scripted')!
    expect(chat.attributes).toMatchObject({ 'gen_ai.operation.name': 'chat', 'gen_ai.request.model': 'scripted', 'gen_ai.response.finish_reasons': ['tool_use'], 'cairn.run_id': 'traced', 'cairn.phase': 'post_llm' })
    expect(chat.attributes['gen_ai.usage.input_tokens']).toEqual(expect.any(Number))
    expect(chat.attributes['gen_ai.usage.output_tokens']).toEqual(expect.any(Number))
    const note = first.spans.find((s) => s.name === 'execute_tool save_note')!
    expect(note.attributes).toMatchObject({ 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'save_note', 'gen_ai.tool.call.id': 'note-1', 'cairn.effect.replayed': false, 'cairn.run_id': 'traced' })

    // Process 2: its own invoke_agent span (resumed), the note replayed from the journal, one more model call.
    const agent = second.spans.find((s) => s.name === 'invoke_agent researcher')!
    expect(agent.attributes).toMatchObject({ 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'researcher', 'cairn.run_id': 'traced', 'cairn.resumed': true, 'cairn.run_state': 'completed' })
    const replayed = second.spans.filter((s) => s.name.startsWith('execute_tool'))
    expect(replayed.map((s) => [s.attributes['gen_ai.tool.call.id'], s.attributes['cairn.effect.replayed']])).toEqual([['note-1', true]])
    expect(second.spans.filter((s) => s.name === 'chat scripted')).toHaveLength(1)
    for (const span of second.spans.filter((s) => s !== agent)) expect(span.parentSpanId).toBe(agent.spanId)
    for (const span of [...first.spans, ...second.spans]) expect(span.attributes['cairn.run_id']).toBe('traced')
  }, 120_000)
})
