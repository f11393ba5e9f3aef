/**
 * Minimal reproductions of the runner bugs the crash torture found. Each one "crashes" a run by
 * freezing it at one instant (a promise that never settles: nothing after it is written, as
 * after a SIGKILL), then resumes it with a fresh Runner on the same store, as a fresh process
 * would. Run: `npx tsx torture/repro/runner-bugs.ts`. Each line says BUG or ok.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import { Agent } from '../../src/index.js'
import type { ContentBlock, Message } from '../../src/index.js'
import { Runner } from '../../src/index.js'
import { MemoryStore, type WriteBatch } from '../../src/index.js'
import { ScriptedModel } from '../../src/testing/scripted-model.js'
import { tool, type Tool } from '../../src/index.js'

const never = () => new Promise<never>(() => {})

/** Every model call answers `turn(messages)`; `freeze` makes a call never return. */
function model(turn: (messages: Message[]) => ContentBlock[], freeze: () => boolean = () => false) {
  const play = async (request: { messages: Message[] }) => (freeze() ? never() : turn(request.messages))
  return new ScriptedModel(Array.from({ length: 8 }, () => play))
}
const results = (messages: Message[]) => messages.filter((m) => m.content.some((b) => 'toolResult' in b)).length
const oneTool = (name: string, input: Record<string, string> = {}) => (messages: Message[]): ContentBlock[] =>
  results(messages) === 0 ? [{ toolUse: { toolUseId: 'call-1', name, input } }] : [{ text: 'done' }]
const sideEffect = (name: string, idempotent: boolean, freeze: () => boolean = () => false): Tool =>
  tool({ name, description: name, idempotent, inputSchema: { type: 'object', properties: {} }, callback: async () => (freeze() ? never() : `${name} ok`) })

/** A MemoryStore whose writes matching `freeze` never return (the process "dies" there). */
class FreezingStore extends MemoryStore {
  freeze: ((batch: WriteBatch) => boolean) | undefined
  freezeStatus: string | undefined
  override write(batch: WriteBatch): Promise<string[]> {
    return this.freeze?.(batch) ? never() : super.write(batch)
  }
  override updateRun(runId: string, patch: Parameters<MemoryStore['updateRun']>[1]) {
    return patch.status !== undefined && patch.status === this.freezeStatus ? never() : super.updateRun(runId, patch)
  }
}

async function crash(start: () => Promise<unknown>): Promise<void> {
  void start().catch(() => {})
  await sleep(50)
}

async function lostRunBeforeFirstSnapshot(): Promise<string> {
  const store = new MemoryStore()
  let frozen = true
  const build = () => new Agent({ model: model(oneTool('lookup'), () => frozen), tools: [sideEffect('lookup', true)] })
  // sync: nothing is written before the first tool batch, so a crash during the first model call...
  await crash(() => new Runner({ store, durability: 'sync' }).run(build(), { input: 'go', runId: 'r1' }))
  frozen = false
  const runner = new Runner({ store, durability: 'sync' })
  const resumed = await runner.resume(build(), { runId: 'r1' }).then((r) => r.state, (e: Error) => `${e.name}: ${e.message}`)
  const rerun = await runner.run(build(), { input: 'go', runId: 'r1' }).then((r) => r.state, (e: Error) => `${e.name}: ${e.message}`)
  const lost = resumed !== 'completed' && rerun !== 'completed'
  return `${lost ? 'BUG' : 'ok '} 1 crash before the first durable snapshot: resume -> ${resumed}; run -> ${rerun}`
}

async function childRunLostBeforeFirstSnapshot(): Promise<string> {
  const store = new MemoryStore()
  let frozen = true
  const child = () => new Agent({ name: 'child', model: model(oneTool('lookup'), () => frozen), tools: [sideEffect('lookup', true)] })
  const parent = (runner: Runner) => new Agent({ model: model(oneTool('research', { prompt: 'look it up' })), tools: [runner.asTool(child, { name: 'research', description: 'r' })] })
  const first = new Runner({ store, durability: 'sync' })
  await crash(() => first.run(parent(first), { input: 'go', runId: 'p1' }))
  frozen = false
  const runner = new Runner({ store, durability: 'sync' })
  const done = await runner.resume(parent(runner), { runId: 'p1' })
  const result = toolResultOf(done.result?.message, await runner.history('p1'))
  const childStatus = (await store.getRun('p1:call-1'))?.status
  const bug = result?.status !== 'success' || childStatus !== 'completed'
  return `${bug ? 'BUG' : 'ok '} 2 child run crashed before its first durable snapshot: parent ${done.state}, research result ${result?.status}: ${JSON.stringify(result?.content)}; child run ${childStatus}`
}

async function childUnknownOutcomeNotSurfaced(): Promise<string> {
  const store = new MemoryStore()
  let frozen = true
  const child = () => new Agent({ name: 'child', model: model(oneTool('file_ticket')), tools: [sideEffect('file_ticket', false, () => frozen)] })
  const parent = (runner: Runner) => new Agent({ model: model(oneTool('research', { prompt: 'look it up' })), tools: [runner.asTool(child, { name: 'research', description: 'r' })] })
  const first = new Runner({ store, durability: 'sync' })
  await crash(() => first.run(parent(first), { input: 'go', runId: 'p1' }))
  frozen = false
  const runner = new Runner({ store, durability: 'sync' })
  const done = await runner.resume(parent(runner), { runId: 'p1' })
  const result = toolResultOf(done.result?.message, await runner.history('p1'))
  const childStatus = (await store.getRun('p1:call-1'))?.status
  const bug = done.state !== 'paused'
  return `${bug ? 'BUG' : 'ok '} 3 unknown outcome inside a subagent: parent ${done.state} with interrupts [${done.interrupts.map((i) => i.id).join(', ')}], research result ${result?.status}: ${JSON.stringify(result?.content)}; child run ${childStatus}`
}

async function finalAnswerRequestedAgain(): Promise<string> {
  const store = new FreezingStore()
  store.freeze = (batch) => batch.checkpoints?.some((c) => c.phase === 'run_terminal') === true
  const model1 = model(oneTool('lookup'))
  // A hook that does I/O after the invocation (a telemetry flush) lets the background writer
  // write the final post_llm before run_terminal is staged.
  const hooks = { afterInvocation: () => sleep(5) }
  const build = (m: ScriptedModel) => new Agent({ model: m, tools: [sideEffect('lookup', true)], hooks })
  await crash(() => new Runner({ store, durability: 'async' }).run(build(model1), { input: 'go', runId: 'r1' }))
  const latest = await store.getLatest<{ runtime?: { next: string; messages: Message[] } }>({ runId: 'r1' })
  store.freeze = undefined
  const model2 = model(oneTool('lookup'))
  const done = await new Runner({ store, durability: 'async' }).resume(build(model2), { runId: 'r1' })
  const history = await new Runner({ store }).history('r1')
  const last = history.reverse().find((c) => (c.payload as { runtime?: unknown }).runtime)
  const roles = (last?.payload as { runtime: { messages: Message[] } }).runtime.messages.map((m) => m.role[0]).join('')
  const bug = model2.calls.length > 0
  return `${bug ? 'BUG' : 'ok '} 4 crash after the final answer's post_llm (${latest?.phase}, next=${latest?.payload.runtime?.next}) but before run_terminal: resume ${done.state} after ${model2.calls.length} more model call(s); transcript roles ${roles}`
}

async function terminalStatusStaysRunning(): Promise<string> {
  const store = new FreezingStore()
  store.freezeStatus = 'completed'
  const build = () => new Agent({ model: model(oneTool('lookup')), tools: [sideEffect('lookup', true)] })
  await crash(() => new Runner({ store, durability: 'sync' }).run(build(), { input: 'go', runId: 'r1' }))
  store.freezeStatus = undefined
  const runner = new Runner({ store, durability: 'sync' })
  const again = await runner.resume(build(), { runId: 'r1' })
  const status = (await store.getRun('r1'))?.status
  const running = (await runner.listRuns({ status: 'running' })).map((r) => r.runId)
  return `${status !== 'completed' ? 'BUG' : 'ok '} 5 crash after run_terminal, before the run record's status: resume ${again.state} (fromTerminalCheckpoint ${again.fromTerminalCheckpoint}); run status ${status}; listRuns({ status: 'running' }) -> [${running.join(', ')}]`
}

function toolResultOf(_final: Message | undefined, history: Awaited<ReturnType<Runner['history']>>) {
  const last = [...history].reverse().find((c) => (c.payload as { runtime?: unknown }).runtime)
  const messages = (last?.payload as { runtime: { messages: Message[] } } | undefined)?.runtime.messages ?? []
  return messages.flatMap((m) => m.content.flatMap((b) => ('toolResult' in b ? [b.toolResult] : []))).find((r) => r.toolUseId === 'call-1')
}

for (const repro of [lostRunBeforeFirstSnapshot, childRunLostBeforeFirstSnapshot, childUnknownOutcomeNotSurfaced, finalAnswerRequestedAgain, terminalStatusStaysRunning]) {
  console.log(await repro())
}
