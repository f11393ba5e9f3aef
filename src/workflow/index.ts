export { WorkflowBuilder, DEFAULT_MAX_SUPERSTEPS, type EdgeOptions, type FanOutOptions, type SwitchCase, type WorkflowBuilderOptions } from './builder.js'
export { Workflow } from './workflow.js'
export { Executor, FunctionExecutor, executor, type ExecutorFunction, type ExecutorState, type FunctionExecutorOptions } from './executor.js'
export { AgentExecutor, type AgentExecutorInput, type AgentExecutorOptions, type AgentExecutorResponse, type AgentInterruptRequest } from './agent-executor.js'
export type { RequestInfoOptions, SendMessageOptions, WorkflowContext } from './context.js'
export type { WorkflowState } from './shared-state.js'
export type { EdgeCondition, FanOutSelection } from './edges.js'
export type { GraphSignature } from './graph.js'
export type {
  ExecutorCompletedEvent,
  ExecutorInvokedEvent,
  RequestInfoEvent,
  SuperstepCompletedEvent,
  SuperstepStartedEvent,
  WorkflowCompletedEvent,
  WorkflowEvent,
  WorkflowFailedEvent,
  WorkflowOutputEvent,
  WorkflowRunStatus,
  WorkflowStartedEvent,
} from './events.js'
export { WorkflowRunResult } from './result.js'
export type { WorkflowRunOptions } from './run-options.js'
export {
  INPUT_SOURCE,
  RESPONSE_SOURCE,
  WORKFLOW_CHECKPOINT_KIND,
  WORKFLOW_CHECKPOINT_VERSION,
  readWorkflowCheckpoint,
  type WorkflowCheckpoint,
  type WorkflowCheckpointMetadata,
  type WorkflowCheckpointPhase,
  type WorkflowCheckpointSummary,
  type WorkflowMessage,
} from './checkpoint.js'
export { FileCheckpointStorage, InMemoryCheckpointStorage, type CheckpointStorage, type FileCheckpointStorageOptions, type WorkflowStore } from './checkpoint-storage.js'
export {
  getLatestWorkflowCheckpoint,
  inspectWorkflowCheckpoint,
  listWorkflowCheckpointIds,
  listWorkflowCheckpoints,
  loadWorkflowCheckpoint,
  pruneWorkflowCheckpoints,
  type ListWorkflowCheckpointsOptions,
  type PruneWorkflowCheckpointsOptions,
} from './management.js'
export { WorkflowCheckpointError, WorkflowError, type WorkflowErrorOptions } from './errors.js'
