import { setTimeout as sleep } from 'node:timers/promises'
import { Agent } from '../src/index.js'
import type { ContentBlock, Message } from '../src/index.js'
import type { Runner } from '../src/index.js'
import { ScriptedModel } from '../src/testing/scripted-model.js'
import { tool, type Tool } from '../src/index.js'
import type { KillSwitch, Role } from './kill-switch.js'
import type { EffectLog } from './side-effects.js'

/**
 * The scripted agent every torture child runs: a planner (three tool cycles of concurrent
 * calls, then a summary) whose second cycle runs a researcher subagent as a child run. Both
 * models decide their turn from the conversation alone (how many tool-result messages it
 * holds), never from a call counter, so a fresh process continues the same script.
 */
export const PROMPT = 'Price ACME, BOLT and CORE, charge both accounts and report.'

/** Non-idempotent tools: a second execution is a duplicated effect. */
export const NON_IDEMPOTENT_TOOLS: ReadonlySet<string> = new Set(['charge_card', 'send_email', 'file_ticket'])

/** What the torture agent needs from its process. */
export interface ScriptDeps {
  runner: Runner
  effects: EffectLog
  kill: KillSwitch
}

/** The planner agent, with the researcher as its `research` tool. */
export function buildPlanner(deps: ScriptDeps): Agent {
  const research = deps.runner.asTool(() => buildResearcher(deps), {
    name: 'research',
    description: 'Ask the researcher agent a question; it looks things up and files tickets.',
  })
  return new Agent({
    name: 'planner',
    model: scriptedModel(plannerTurn),
    systemPrompt: 'You are a finance assistant. Use the tools.',
    tools: [
      effectTool(deps, 'parent', { name: 'fetch_quote', idempotent: true, field: 'symbol', result: (v) => `${v} trades at ${priceOf(v)}` }),
      effectTool(deps, 'parent', { name: 'charge_card', idempotent: false, field: 'account', result: (v) => `charged ${v}` }),
      effectTool(deps, 'parent', { name: 'send_email', idempotent: false, field: 'to', result: (v) => `emailed ${v}` }),
      research,
    ],
    hooks: killHooks(deps.kill, 'parent'),
  })
}

/** The researcher agent: one batch of three concurrent calls, then its findings. */
export function buildResearcher(deps: Omit<ScriptDeps, 'runner'>): Agent {
  return new Agent({
    name: 'researcher',
    model: scriptedModel(researcherTurn),
    systemPrompt: 'You research a question with the lookup tool.',
    tools: [
      effectTool(deps, 'child', { name: 'lookup', idempotent: true, field: 'topic', result: (v) => `${v}: ${v.length * 7} sources` }),
      effectTool(deps, 'child', { name: 'file_ticket', idempotent: false, field: 'title', result: (v) => `ticket filed: ${v}` }),
    ],
    hooks: killHooks(deps.kill, 'child'),
  })
}

/** The planner's turn for a conversation: a pure function of it. */
export function plannerTurn(messages: readonly Message[]): ContentBlock[] {
  const cycle = toolResultMessages(messages)
  switch (cycle) {
    case 0:
      return [
        { text: 'First the quotes, and the first charge.' },
        use('c0-quote-acme', 'fetch_quote', { symbol: 'ACME' }),
        use('c0-quote-bolt', 'fetch_quote', { symbol: 'BOLT' }),
        use('c0-charge', 'charge_card', { account: 'acct-1' }),
      ]
    case 1:
      return [
        { text: 'Now research, one more quote, and tell the CFO.' },
        use('c1-research', 'research', { prompt: 'ACME outlook' }),
        use('c1-quote-core', 'fetch_quote', { symbol: 'CORE' }),
        use('c1-email', 'send_email', { to: 'cfo@example.com' }),
      ]
    case 2:
      return [
        { text: 'Last: the second charge and the ops email.' },
        use('c2-charge', 'charge_card', { account: 'acct-2' }),
        use('c2-email', 'send_email', { to: 'ops@example.com' }),
      ]
    default:
      return [{ text: `Summary: ${summarize(messages)}` }]
  }
}

/** The researcher's turn for a conversation: a pure function of it. */
export function researcherTurn(messages: readonly Message[]): ContentBlock[] {
  if (toolResultMessages(messages) === 0) {
    return [
      use('r0-market', 'lookup', { topic: 'market' }),
      use('r0-risks', 'lookup', { topic: 'risks' }),
      use('r0-ticket', 'file_ticket', { title: 'check ACME filings' }),
    ]
  }
  return [{ text: `Findings: ${summarize(messages)}` }]
}

/** Every tool result of a conversation, in order: `id=status:text`. */
function summarize(messages: readonly Message[]): string {
  const results = messages.flatMap((m) => m.content.flatMap((b) => ('toolResult' in b ? [b.toolResult] : [])))
  return results.map((r) => `${r.toolUseId}=${r.status}:${r.content.map((c) => ('text' in c ? c.text : JSON.stringify(c.json))).join('')}`).join(' | ')
}

function toolResultMessages(messages: readonly Message[]): number {
  return messages.filter((m) => m.role === 'user' && m.content.some((b) => 'toolResult' in b)).length
}

function use(toolUseId: string, name: string, input: Record<string, string>): ContentBlock {
  return { toolUse: { toolUseId, name, input } }
}

function priceOf(symbol: string): number {
  return [...symbol].reduce((sum, ch) => sum + ch.charCodeAt(0), 0)
}

/**
 * A model that answers every call with `turn(request.messages)`. ScriptedModel indexes its turns
 * by call count, which a fresh process restarts, so every slot holds the same pure function.
 */
function scriptedModel(turn: (messages: readonly Message[]) => ContentBlock[]): ScriptedModel {
  return new ScriptedModel(Array.from({ length: 16 }, () => (request: { messages: Message[] }) => turn(request.messages)), { modelId: 'torture-script' })
}

/**
 * A tool with a side effect in the effect log, keyed by `ctx.idempotencyKey`. Kill points
 * `tool:<name>:before-effect` and `tool:<name>:after-effect` sit inside the callback, that is
 * between the journal's intent (or started mark) and its outcome.
 */
function effectTool(
  deps: Omit<ScriptDeps, 'runner'>,
  role: Role,
  spec: { name: string; idempotent: boolean; field: string; result: (value: string) => string },
): Tool {
  const { name, idempotent, field } = spec
  return tool({
    name,
    description: `${name} (${idempotent ? 'idempotent' : 'not idempotent'}).`,
    idempotent,
    inputSchema: { type: 'object', properties: { [field]: { type: 'string' } }, required: [field] },
    callback: async (input, ctx) => {
      const value = String((input as Record<string, unknown>)[field])
      deps.kill.hit([`tool:${name}:before-effect`], role)
      await sleep(1)
      deps.effects.perform({ key: ctx.idempotencyKey, tool: name, idempotent })
      deps.kill.hit([`tool:${name}:after-effect`], role)
      await sleep(1)
      return spec.result(value)
    },
  })
}

/** Kill points at the agent's hooks, and a telemetry-like hook that does I/O after each invocation. */
function killHooks(kill: KillSwitch, role: Role) {
  return {
    afterInvocation: () => sleep(1),
    afterModelCall: () => kill.hit(['hook:after-model-call'], role),
    beforeToolCall: () => kill.hit(['hook:before-tool-call'], role),
    afterToolCall: () => kill.hit(['hook:after-tool-call'], role),
  }
}
