import { describe, expect, it } from 'vitest'
import { buildTimeline, formatTimeline, MemoryStore } from '../../src/index.js'
import { squaresWorkflow } from './helpers.js'

describe('the timeline of a workflow run', () => {
  it('numbers each checkpoint with its super step, in the step column as in what happened', async () => {
    const store = new MemoryStore()
    const { workflow } = squaresWorkflow(store)
    await workflow.run({ message: 3 })
    const [run] = await store.listRuns({ limit: 10 })
    const timeline = await buildTimeline(store, run!.runId)
    expect(timeline.entries.map((entry) => entry.step)).toEqual([0, 1, 2, 3, 4])
    expect(timeline.entries.map((entry) => entry.summary)).toEqual([0, 1, 2, 3, 4].map((step) => expect.stringMatching(new RegExp(`^super step ${step}: `)) as unknown))
    const rows = formatTimeline(timeline).slice(1)
    expect(rows[2]).toMatch(/^\s+3\s+\d+\s+1\s+2\s+superstep\s+super step 2: /)
  })
})
