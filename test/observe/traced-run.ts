/**
 * A child process for the OpenTelemetry test: registers the SDK's in-memory exporter, then starts
 * (`first`) or resumes (`resumed`) a run on SQLite. The first process sends its finished spans to
 * the parent and kills itself with SIGKILL once the note tool's outcome is journaled; the second
 * sends its spans when the run is done.
 *   node --import tsx test/observe/traced-run.ts first|resumed DB_PATH
 */
import { trace } from '@opentelemetry/api'
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base'
import { Agent, Runner, tool, type Message, type EffectCompletion, type EffectCompletionResult, type WriteBatch } from '../../src/index.js'
import { DelegatingStore } from '../../src/engine.js'
import { SqliteStore } from '../../src/sqlite.js'
import { ScriptedModel } from '../../src/testing.js'

const exporter = new InMemorySpanExporter()
trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }))

/** What the parent gets: the finished spans, as plain data. */
function spans() {
  return exporter.getFinishedSpans().map((span) => ({ name: span.name, attributes: span.attributes, spanId: span.spanContext().spanId, parentSpanId: span.parentSpanContext?.spanId ?? null, pid: process.pid }))
}

/** Two lookups, then a note (not idempotent), then the answer; decided from the conversation. */
function researcher(): Agent {
  const turn = (request: { messages: Message[] }) => {
    const results = request.messages.flatMap((m) => m.content.filter((b) => 'toolResult' in b)).length
    if (results === 0) return [{ toolUse: { toolUseId: 'lookup-a', name: 'lookup', input: { key: 'a' } } }, { toolUse: { toolUseId: 'lookup-b', name: 'lookup', input: { key: 'b' } } }]
    if (results === 2) return [{ toolUse: { toolUseId: 'note-1', name: 'save_note', input: { text: 'a and b' } } }]
    return [{ text: `Done after ${results} tool results.` }]
  }
  const schema = { type: 'object', properties: { key: { type: 'string' }, text: { type: 'string' } } } as const
  return new Agent({
    name: 'researcher',
    model: new ScriptedModel(Array.from({ length: 6 }, () => turn)),
    systemPrompt: 'Research.',
    tools: [
      tool({ name: 'lookup', description: 'Look a key up.', idempotent: true, inputSchema: schema, callback: () => 'value' }),
      tool({ name: 'save_note', description: 'Save a note.', inputSchema: schema, callback: () => 'saved' }),
    ],
  })
}

const [role, path] = [process.argv[2], process.argv[3]!]
const store = new SqliteStore({ path })
if (role === 'first') {
  /** Dies by SIGKILL right after the note's outcome is journaled, before the batch's checkpoint. */
  class DyingStore extends DelegatingStore {
    override async completeEffect(completion: EffectCompletion): Promise<EffectCompletionResult> {
      const result = await super.completeEffect(completion)
      if (completion.callId === 'note-1') await new Promise<never>(() => process.send?.({ spans: spans() }, () => process.kill(process.pid, 'SIGKILL')))
      return result
    }
    // An owned run journals its outcomes in fenced batches.
    override async write(batch: WriteBatch): Promise<string[]> {
      const ids = await super.write(batch)
      if (batch.completions?.some((c) => c.callId === 'note-1')) await new Promise<never>(() => process.send?.({ spans: spans() }, () => process.kill(process.pid, 'SIGKILL')))
      return ids
    }
  }
  await new Runner({ store: new DyingStore(store), durability: 'sync' }).run(researcher(), { input: 'research', runId: 'traced' })
} else {
  const runner = new Runner({ store, durability: 'sync' })
  const run = await runner.resume(researcher(), { runId: 'traced' })
  await store.close()
  process.send?.({ spans: spans(), state: run.state }, () => process.disconnect())
}
