/**
 * Cairn: durable execution for AI agents and agent workflows.
 *
 * The core API, listed by name: the codec, hashing, ids and errors; the store interfaces with
 * their dependency-free backends; the model interface, tools and the agent loop; the workflow
 * engine; the Runner; workers and their client; run events. SQLite lives in `cairn-agents/sqlite`,
 * Postgres in `cairn-agents/postgres`, the storage-engine SPI in `cairn-agents/engine`, test helpers in
 * `cairn-agents/testing`.
 */

// core
export { deserialize, parseJson, serialize, type JsonObject, type JsonValue } from './core/codec.js'
export { CairnError, CheckpointCorruptionError, CheckpointError, CheckpointIntegrityError, CheckpointNotFoundError, ConfigMismatchError, EffectStartedError, EncryptionChangeError, InterruptExpiredError, InvalidArgumentError, isStoreOutage, LeaseLostError, MissingDependencyError, RecoveryLimitError, RunBusyError, RunNotPausedError, SchemaVersionError, StoreError, WrongKeyError, type CairnErrorCode, type CairnErrorOptions, type CheckpointErrorOptions } from './core/errors.js'
export { hashValue } from './core/hash.js'
export { configureLimits, DEFAULT_LIMITS, limits, type CairnLimits } from './core/limits.js'

// store
export { FileStore, type FileStoreOptions } from './store/backends/file/file-store.js'
export { MemoryStore } from './store/backends/memory/memory-store.js'
export type { CheckpointInfo, CheckpointInput, CheckpointRecord, CheckpointStore, CheckpointTail, CreateRunInput, EffectCompletion, EffectCompletionResult, EffectIntent, EffectRecord, EffectStatus, ForkOptions, LatestQuery, ListCheckpointsQuery, ListRunsQuery, ListTail, LoadRunQuery, LoadTailsQuery, PendingWrite, PendingWriteRecord, PruneOptions, PruneResult, PutPendingWritesInput, RunRecord, RunStatus, RunStore, StoreAdmin, StoreReader, StoreWriter, UpdateRunInput, WriteBatch } from './store/checkpoint-store.js'
export type { EngineStoreOptions } from './store/engine-store.js'
export type { CancelOutcome, ClaimRequest, Fence, LeaseRow, RequeueOutcome } from './store/engine/lease-engine.js'
export type { FencedStore, FenceHooks } from './store/leases/fenced-store.js'
export type { AcquiredLease, AcquireRunInput, ClaimedLease, EnqueueRunInput, ReleaseOptions, RunLeases } from './store/leases/run-leases.js'
export { exportRun, importRun, type RunDocument } from './store/portable-run.js'
export { KeyRing, type KeyInput } from './store/trust/key-ring.js'
export type { EncryptionState, RekeyOptions, RekeyProgress, RekeyResult } from './store/trust/rekey.js'
export { verifyRun, type VerifyReport } from './store/verify-run.js'

// model
export { addUsage, costOf, emptyUsage, textOf, toolUsesOf, type BlockExtras, type CheckpointResumeBlock, type ContentBlock, type DocumentBlock, type ImageBlock, type InterruptResponseBlock, type MediaSource, type Message, type ModelPrices, type ModelStopReason, type PromptBlock, type ProviderMetadata, type ReasoningBlock, type Role, type TextBlock, type ToolResultBlock, type ToolResultContent, type ToolUseBlock, type Usage } from './model/messages.js'
export { ModelError, ModelLimitError, ModelStreamError, ResponseAssembler, type Model, type ModelCallOptions, type ModelErrorDetails, type ModelLimit, type ModelNotice, type ModelRequest, type ModelResponse, type ModelStreamEvent, type ProviderTokens, type ToolSpec } from './model/model.js'

// tools
export { jsonSchemaOf, validateInput, type InferInput, type InputSchema, type StandardSchemaV1 } from './tools/input-schema.js'
export { concurrentToolExecutor, sequentialToolExecutor, type RunToolCall, type ToolCallOutcome, type ToolExecutor } from './tools/tool-executor.js'
export { errorResult, tool, type AgentState, type InterruptExpiry, type InterruptRequest, type Tool, type ToolContext, type ToolDefinition, type WaitForEventOptions } from './tools/tool.js'

// agent
export { Agent, type AgentOptions, type InvokeOptions } from './agent/agent.js'
export { Checkpoint, type CheckpointJSON, type CheckpointPosition } from './agent/checkpoint.js'
export type { ConfigSignature } from './agent/config-signature.js'
export { NullConversationManager, SlidingWindowConversationManager, type ConversationManager } from './agent/conversation-manager.js'
export type { AgentStreamEvent } from './agent/events.js'
export type { AgentHooks } from './agent/hooks.js'
export type { Interrupt, InterruptState } from './agent/interrupts.js'
export type { AgentInput } from './agent/prompt.js'
export { AgentResult, type AgentMetrics, type AgentResultJSON, type AgentStopReason } from './agent/result.js'
export type { AgentSnapshot, PartialAgentSnapshot, SnapshotField } from './agent/snapshot.js'

// workflow
export { AgentExecutor, type AgentExecutorInput, type AgentExecutorOptions, type AgentExecutorResponse, type AgentInterruptRequest } from './workflow/agent-executor.js'
export { DEFAULT_MAX_SUPERSTEPS, WorkflowBuilder, type EdgeOptions, type FanOutOptions, type SwitchCase, type WorkflowBuilderOptions } from './workflow/builder.js'
export type { CheckpointStorage, WorkflowStore } from './workflow/checkpoint-storage.js'
export { readWorkflowCheckpoint, type WorkflowCheckpoint, type WorkflowCheckpointMetadata, type WorkflowCheckpointPhase, type WorkflowCheckpointSummary, type WorkflowMessage } from './workflow/checkpoint.js'
export type { RequestInfoOptions, SendMessageOptions, WorkflowContext } from './workflow/context.js'
export type { EdgeCondition, FanOutSelection } from './workflow/edges.js'
export { WorkflowCheckpointError, WorkflowError, type WorkflowErrorOptions } from './workflow/errors.js'
export type { ExecutorCompletedEvent, ExecutorInvokedEvent, RequestInfoEvent, SuperstepCompletedEvent, SuperstepStartedEvent, WorkflowCompletedEvent, WorkflowEvent, WorkflowFailedEvent, WorkflowOutputEvent, WorkflowRunStatus, WorkflowStartedEvent } from './workflow/events.js'
export { executor, Executor, FunctionExecutor, type ExecutorFunction, type ExecutorState, type FunctionExecutorOptions } from './workflow/executor.js'
export type { GraphSignature } from './workflow/graph.js'
export { getLatestWorkflowCheckpoint, inspectWorkflowCheckpoint, listWorkflowCheckpointIds, listWorkflowCheckpoints, loadWorkflowCheckpoint, pruneWorkflowCheckpoints, type ListWorkflowCheckpointsOptions, type PruneWorkflowCheckpointsOptions } from './workflow/management.js'
export { WorkflowRunResult } from './workflow/result.js'
export type { WorkflowRunOptions } from './workflow/run-options.js'
export type { WorkflowState } from './workflow/shared-state.js'
export { Workflow } from './workflow/workflow.js'

// runner
export { diffCheckpoints, formatDiff, type CheckpointDiff, type DiffSide, type EffectChange, type ValueChange } from './runner/checkpoint-diff.js'
export type { WriterOptions } from './runner/checkpoint-writer.js'
export { forkRun, type ForkRunOptions, type ForkRunResult } from './runner/fork-run.js'
export type { RunnerCheckpoint, RunnerPhase, RuntimeSnapshot, SubagentExecutionRecord, ToolExecutionRecord } from './runner/phases.js'
export type { RunResult, RunState } from './runner/run-result.js'
export { summarizeRun, type RunSummary } from './runner/run-summary.js'
export { Runner, type ResumeOptions, type RunnerOptions, type RunOptions, type StreamOptions } from './runner/runner.js'
export type { EventLogOptions } from './runner/event-recorder.js'
export type { RunEventsOptions, StreamedRunEvent } from './runner/run-stream.js'
export type { ReadEventsOptions, RunEventLog, StoredRunEvent, WaitForEventsOptions } from './store/event-log/run-event-log.js'
export { buildTimeline, formatTimeline, type Timeline, type TimelineAnswer, type TimelineEntry, type TimelineToolCall } from './runner/timeline.js'
export { buildThreadTimelines, formatThreadTimeline, summarizeThread, type ThreadEntry, type ThreadState, type ThreadSummary, type ThreadTimeline } from './integrations/langgraph/thread-view.js'

// worker
export { CairnClient, type EnqueueOptions, type ResultOptions, type SendOptions } from './worker/cairn-client.js'
export type { ScheduleInfo, ScheduleOptions } from './worker/schedules.js'
export type { RunWaits } from './store/waits/run-waits.js'
export type { JobSpec, RunFailure, RunOutcome } from './worker/job.js'
export type { WorkerEvent } from './worker/worker-events.js'
export type { WorkerStore } from './worker/worker-store.js'
export { Worker, type StopOptions, type WorkerOptions } from './worker/worker.js'

// observe
export type { RunEvent, RunEventListener, RunEventUsage } from './observe/run-events.js'
