import { availableParallelism } from 'node:os'
import { describe, expect, it } from 'vitest'
import { failureKinds, formatTally, runTorture } from '../torture/harness.js'

/**
 * A bounded sample of the crash torture (the full run is `npm run torture`): real child processes
 * running the scripted planner and its researcher subagent on SQLite, SIGKILLed at 16 named kill
 * points (every kill inside a tool call, then kills right after an outcome was journaled, then
 * others spread over the run, in both durabilities)
 * and 12 times at random instants, each resumed in fresh processes until the run completes. Sized
 * to finish well inside its timeout on a loaded 2-core machine.
 */
describe('crash torture (short)', () => {
  it(
    'runs killed with SIGKILL at a sample of named kill points and at 12 random instants all complete with the transcript of a run never killed, no duplicated effect and every unknown outcome surfaced',
    async () => {
      const tally = await runTorture({
        durabilities: ['sync', 'async'],
        named: 'each-name',
        namedLimit: 16,
        randomKills: 12,
        lanes: availableParallelism() + 1,
        seed: 20_261_121,
      })
      const summary = formatTally(tally)
      // The scenarios exercised what they claim to: named points in the parent and child runs (the
      // light phases a checkpoint's phase log carries are kill points of the write that commits them),
      // random kills, journal replays, and unknown outcomes answered both ways.
      expect(tally.pointsCovered, summary).toEqual(expect.arrayContaining(['after-create-run', 'before-write:step_started', 'before-write:pre_llm', 'after-write:pre_tool_batch', 'before-write:post_llm', 'after-write:post_tool_batch', 'after-start-effect', 'tool:charge_card:after-effect', 'tool:file_ticket:before-effect', 'after-write:run_terminal']))
      expect(tally.namedScenarios, summary).toBe(16)
      expect(tally.namedKills, summary).toBeGreaterThanOrEqual(8)
      expect(tally.randomKills, summary).toBeGreaterThanOrEqual(12)
      expect(tally.replays, summary).toBeGreaterThan(0)
      expect(tally.retried, summary).toBeGreaterThan(0)
      expect(tally.skipped, summary).toBeGreaterThan(0)
      expect(failureKinds(tally), summary).toEqual([])
    },
    300_000,
  )
})
