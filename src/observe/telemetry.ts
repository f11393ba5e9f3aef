import type { Attributes, Span, Tracer } from '@opentelemetry/api'
import { importPeer } from '../core/peers.js'
import type { RunEvent, RunEventListener } from './run-events.js'

type OtelApi = typeof import('@opentelemetry/api')

let loading: Promise<OtelApi | undefined> | undefined

/**
 * Where `@opentelemetry/api` 1.x keeps what an application registered with it (a tracer
 * provider, a context manager): absent until something was registered.
 */
const OTEL_GLOBAL = Symbol.for('opentelemetry.js.api.1')

/**
 * `@opentelemetry/api` when the application installed it (an optional peer) and registered
 * something with it, else undefined. Loaded once, on first use: while nothing is registered,
 * spans would go nowhere, so the package is not loaded (it costs a resumed process milliseconds
 * of start-up) and no span is made. Registered, but not installed where Cairn can load it: a
 * process warning carrying the `MissingDependencyError`, once, and runs go on untraced.
 */
export function loadOpenTelemetry(): Promise<OtelApi | undefined> {
  if (loading === undefined && !(OTEL_GLOBAL in globalThis)) return Promise.resolve(undefined)
  loading ??= importPeer<OtelApi>({ name: '@opentelemetry/api', neededBy: 'tracing Cairn runs into the OpenTelemetry provider this application registered' }).then(
    (api) => api,
    (err: unknown) => {
      if (err instanceof Error) process.emitWarning(err)
      return undefined
    },
  )
  return loading
}

const TRACER_NAME = 'cairn'

/**
 * Turns {@link RunEvent}s into spans following the OpenTelemetry GenAI semantic conventions:
 * `invoke_agent {agent}` per run execution (one per process that drives the run; every span
 * carries `cairn.run_id`, which links the executions of one run across resumes), `chat {model}`
 * per model call and `execute_tool {name}` per tool call, with `cairn.effect.replayed` on calls
 * the journal satisfied. Spans go to the tracer provider the application registered.
 */
export function runTracing(api: OtelApi): RunEventListener {
  const tracer = api.trace.getTracer(TRACER_NAME)
  const runs = new Map<string, Span>()
  const open = new Map<string, Span>()
  const child = (runId: string, name: string, attributes: Attributes): Span => {
    const parent = runs.get(runId)
    const ctx = parent ? api.trace.setSpan(api.context.active(), parent) : api.context.active()
    return tracer.startSpan(name, { kind: api.SpanKind.INTERNAL, attributes: { 'cairn.run_id': runId, ...attributes } }, ctx)
  }
  return (event: RunEvent) => {
    switch (event.type) {
      case 'run_started':
        runs.set(event.runId, startRun(tracer, api, event))
        return
      case 'phase_committed':
        runs.get(event.runId)?.addEvent('cairn.checkpoint', { 'cairn.phase': event.phase, 'cairn.checkpoint_id': event.checkpointId, 'cairn.step': event.step })
        return
      case 'model_call_started':
        open.set(`${event.runId}:model`, child(event.runId, `chat ${event.model}`, { 'gen_ai.operation.name': 'chat', 'gen_ai.request.model': event.model, 'cairn.phase': 'pre_llm', 'cairn.step': event.step }))
        return
      case 'model_call_finished':
        return endModelCall(open, event)
      case 'tool_call_started':
        open.set(`${event.runId}:${event.toolUseId}`, child(event.runId, `execute_tool ${event.name}`, toolAttributes(event, false)))
        return
      case 'tool_call_finished':
        return endSpan(api, open, `${event.runId}:${event.toolUseId}`, event.status === 'error' ? 'tool returned an error' : undefined)
      case 'tool_call_replayed': {
        const span = child(event.runId, `execute_tool ${event.name}`, toolAttributes(event, true))
        if (event.status === 'error') span.setStatus({ code: api.SpanStatusCode.ERROR, message: 'tool returned an error (replayed)' })
        span.end()
        return
      }
      case 'tool_call_answered':
        runs.get(event.runId)?.addEvent('cairn.operator_answer', { 'cairn.tool_call_id': event.toolUseId, 'gen_ai.tool.name': event.name, 'cairn.answer': event.answer })
        return
      case 'interrupt':
        runs.get(event.runId)?.addEvent('cairn.interrupt', { 'cairn.interrupt_ids': event.interrupts.map((i) => i.id) })
        return
      case 'run_finished': {
        const span = runs.get(event.runId)
        runs.delete(event.runId)
        span?.setAttribute('cairn.run_state', event.state)
        if (span && (event.state === 'failed' || event.state === 'error')) span.setStatus({ code: api.SpanStatusCode.ERROR, ...(event.error ? { message: event.error } : {}) })
        span?.end()
      }
    }
  }
}

/**
 * A span per workflow super step (`superstep {workflow}`), from the workflow's own events:
 * started at `superstep_started`, ended at `superstep_completed` or when the run stops.
 */
export function superstepTracing(api: OtelApi, params: { workflowName: string; runId: string }): (event: { type: string; iteration?: number; checkpointId?: string }) => void {
  const tracer = api.trace.getTracer(TRACER_NAME)
  let span: Span | undefined
  return (event) => {
    if (event.type === 'superstep_started') {
      span?.end()
      span = tracer.startSpan(`superstep ${params.workflowName}`, {
        attributes: { 'cairn.run_id': params.runId, 'cairn.workflow.name': params.workflowName, 'cairn.superstep': event.iteration ?? 0, 'cairn.phase': 'superstep' },
      })
    } else if (event.type === 'superstep_completed' || event.type === 'workflow_failed' || event.type === 'done') {
      if (event.checkpointId) span?.setAttribute('cairn.checkpoint_id', event.checkpointId)
      if (event.type === 'workflow_failed') span?.setStatus({ code: api.SpanStatusCode.ERROR })
      span?.end()
      span = undefined
    }
  }
}

function startRun(tracer: Tracer, api: OtelApi, event: Extract<RunEvent, { type: 'run_started' }>): Span {
  return tracer.startSpan(`invoke_agent ${event.agentName}`, {
    kind: api.SpanKind.INTERNAL,
    attributes: {
      'gen_ai.operation.name': 'invoke_agent',
      'gen_ai.agent.name': event.agentName,
      'gen_ai.request.model': event.model,
      'gen_ai.conversation.id': event.runId,
      'cairn.run_id': event.runId,
      'cairn.resumed': event.resumed,
      'cairn.phase': 'run_started',
      'cairn.step': event.step,
    },
  })
}

function endModelCall(open: Map<string, Span>, event: Extract<RunEvent, { type: 'model_call_finished' }>): void {
  const key = `${event.runId}:model`
  const span = open.get(key)
  open.delete(key)
  span?.setAttributes({
    'gen_ai.usage.input_tokens': event.usage.inputTokens,
    'gen_ai.usage.output_tokens': event.usage.outputTokens,
    'gen_ai.response.finish_reasons': [event.stopReason],
    'cairn.phase': 'post_llm',
  })
  span?.end()
}

function toolAttributes(event: { runId: string; step: number; toolUseId: string; name: string }, replayed: boolean): Attributes {
  return {
    'gen_ai.operation.name': 'execute_tool',
    'gen_ai.tool.name': event.name,
    'gen_ai.tool.call.id': event.toolUseId,
    'cairn.phase': 'tool_batch',
    'cairn.step': event.step,
    'cairn.effect.replayed': replayed,
  }
}

function endSpan(api: OtelApi, open: Map<string, Span>, key: string, error: string | undefined): void {
  const span = open.get(key)
  open.delete(key)
  if (error) span?.setStatus({ code: api.SpanStatusCode.ERROR, message: error })
  span?.end()
}
