import { trace } from '@opentelemetry/api'
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base'
import { describe, expect, it } from 'vitest'
import { MemoryStore } from '../../src/index.js'
import { squaresWorkflow } from '../workflow/helpers.js'

describe('OpenTelemetry spans of workflows', () => {
  it('a workflow run yields one span per super step, with its number, run id and checkpoint', async () => {
    const exporter = new InMemorySpanExporter()
    trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }))
    const storage = new MemoryStore()
    const { workflow } = squaresWorkflow(storage)
    const result = await workflow.run({ message: 2 })
    const steps = result.events.filter((e) => e.type === 'superstep_completed')
    const spans = exporter.getFinishedSpans().filter((span) => span.name === 'superstep squares')
    expect(spans.map((span) => span.attributes['cairn.superstep'])).toEqual(steps.map((e) => e.iteration))
    expect(spans.map((span) => span.attributes['cairn.checkpoint_id'])).toEqual(steps.map((e) => e.checkpointId))
    for (const span of spans) expect(span.attributes).toMatchObject({ 'cairn.run_id': result.runId, 'cairn.workflow.name': 'squares', 'cairn.phase': 'superstep' })
  })
})
