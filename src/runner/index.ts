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
export { buildTimeline, formatTimeline, formatCall, runtimeOf, type Timeline, type TimelineEntry, type TimelineToolCall } from './timeline.js'
export { diffCheckpoints, formatDiff, describeMessage, type CheckpointDiff, type DiffSide, type EffectChange, type ValueChange } from './checkpoint-diff.js'
export { summarizeRun, type RunSummary } from './run-summary.js'
export type { StreamOptions } from './runner.js'
