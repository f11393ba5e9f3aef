export { Runner, type ResumeOptions, type RunOptions, type RunnerOptions } from './runner.js'
export { forkRun, type ForkRunOptions, type ForkRunResult } from './fork-run.js'
export type { WriterOptions } from './checkpoint-writer.js'
export { OUTCOME_UNKNOWN, inputHash } from './effect-journal.js'
export {
  RUNNER_KIND,
  RUNNER_PHASES,
  RUNNER_SCHEMA_VERSION,
  type RunnerCheckpoint,
  type RunnerPhase,
  type RuntimeSnapshot,
  type SubagentExecutionRecord,
  type ToolExecutionRecord,
} from './phases.js'
export type { RunResult, RunState } from './run-result.js'
