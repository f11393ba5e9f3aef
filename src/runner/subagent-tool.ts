import type { Agent } from '../agent/agent.js'
import { CairnError } from '../core/errors.js'
import { tool, type Tool } from '../tools/tool.js'
import type { StoreReader } from '../store/checkpoint-store.js'
import type { ResumeOptions, RunOptions } from './run-options.js'
import type { RunResult } from './run-result.js'

/** What a subagent tool asks of the runner that drives its child runs (a `Runner` is one). */
export interface ChildRunner {
  readonly store: Pick<StoreReader, 'getRun'>
  run(agent: Agent, options: RunOptions): Promise<RunResult>
  resume(agent: Agent, options: ResumeOptions): Promise<RunResult>
}

/**
 * A tool that runs another agent as a child run of the runner. The child's run id is the call's
 * idempotency key (`<parent run>:<tool use id>`), so a resumed parent finds the child again and
 * resumes it — or takes its stored result — instead of starting it over.
 *
 * A child that sleeps (`ctx.sleep` in one of its tools) makes the parent sleep until the child's
 * wake time: when the parent goes on, the call runs again and resumes the child, which goes on
 * past its sleep. A child that waits for an event cannot be waited for this way (the parent
 * would need the event the child waits for): the call fails with `code: 'subagent_waiting'`.
 */
export function subagentTool(runner: ChildRunner, buildAgent: () => Agent, options: { name: string; description: string }): Tool {
  const base = tool({
    name: options.name,
    description: options.description,
    idempotent: true,
    inputSchema: { type: 'object', properties: { prompt: { type: 'string', description: 'What to ask the agent.' } }, required: ['prompt'] },
    callback: async (input, ctx) => {
      const { prompt } = input as { prompt: string }
      const childRunId = ctx.idempotencyKey.replace(/[^A-Za-z0-9_.:@-]/g, '_')
      const parentRunId = childRunId.split(':')[0] ?? childRunId
      const exists = await runner.store.getRun(childRunId)
      // The parent's execution owns the parent run, so only a dead execution of it can still hold
      // the child: wait for that lease to lapse rather than fail the call.
      const owned = { waitForOwner: true, signal: ctx.signal } as const
      let run = exists && exists.lastSeq > 0
        ? await runner.resume(buildAgent(), { runId: childRunId, ...owned })
        : await runner.run(buildAgent(), { input: prompt, runId: childRunId, parentRunId, ...owned })
      for (let i = 0; i < 8 && (run.state === 'paused' || run.state === 'sleeping'); i++) {
        if (run.state === 'sleeping') {
          // The parent sleeps until the child's wake (it stops here the first time; run again after
          // its wake, this returns at once and the child is resumed past its own sleep).
          const wakeAt = Math.max(...run.interrupts.map((pending) => pending.wakeAt ?? 0))
          await ctx.sleepUntil(wakeAt)
          run = await runner.resume(buildAgent(), { runId: childRunId, ...owned })
          continue
        }
        const responses = Object.fromEntries(run.interrupts.map((pending) => [pending.id, ctx.interrupt({ name: pending.name, ...(pending.reason === undefined ? {} : { reason: pending.reason }) })]))
        run = await runner.resume(buildAgent(), { runId: childRunId, responses, ...owned })
      }
      if (run.state === 'waiting') {
        const events = run.interrupts.map((pending) => pending.name).join(', ')
        throw new CairnError(
          'subagent_waiting',
          `subagent run ${childRunId} waits for an event (${events}); a parent cannot wait for its child's event: send the event (client.send) and call the subagent again, or run the waiting agent as a run of its own`,
        )
      }
      if (run.state !== 'completed') {
        throw new Error(`subagent run ${childRunId} ended ${run.state}${run.error ? `: ${run.error.message}` : ''}`)
      }
      return String(run.result ?? '')
    },
  })
  return { ...base, subagent: true }
}
