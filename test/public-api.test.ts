import { readFile } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'
import { describe, expect, it } from 'vitest'

/**
 * The public API of every entry point of `cairn-agents`, pinned: its runtime exports (values)
 * and its type-only exports. A change here is a change of the published API: make it on
 * purpose, and say it in CHANGELOG.md.
 */
const API: Record<string, { values: string[]; types: string[] }> = {
  index: {
    values: [
      'Agent', 'AgentExecutor', 'AgentResult', 'CairnClient', 'CairnError', 'Checkpoint', 'CheckpointCorruptionError', 'CheckpointError',
      'CheckpointIntegrityError', 'CheckpointNotFoundError', 'ConfigMismatchError', 'DEFAULT_LIMITS', 'DEFAULT_MAX_SUPERSTEPS', 'EffectStartedError',
      'EncryptionChangeError', 'Executor', 'FileStore', 'FunctionExecutor', 'InterruptExpiredError', 'InvalidArgumentError', 'KeyRing', 'LeaseLostError', 'MemoryStore',
      'MissingDependencyError', 'ModelError', 'ModelLimitError', 'ModelStreamError', 'NullConversationManager', 'RecoveryLimitError',
      'ResponseAssembler', 'RunBusyError', 'RunNotPausedError', 'Runner', 'SchemaVersionError', 'SlidingWindowConversationManager', 'StoreError',
      'Worker', 'Workflow', 'WorkflowBuilder', 'WorkflowCheckpointError', 'WorkflowError', 'WorkflowRunResult', 'WrongKeyError', 'addUsage',
      'buildThreadTimelines', 'buildTimeline', 'concurrentToolExecutor', 'configureLimits', 'costOf', 'deserialize', 'diffCheckpoints', 'emptyUsage',
      'errorResult', 'executor', 'exportRun', 'forkRun', 'formatDiff', 'formatThreadTimeline', 'formatTimeline', 'getLatestWorkflowCheckpoint',
      'hashValue', 'importRun', 'inspectWorkflowCheckpoint', 'isStoreOutage', 'jsonSchemaOf', 'limits', 'listWorkflowCheckpointIds',
      'listWorkflowCheckpoints', 'loadWorkflowCheckpoint', 'parseJson', 'pruneWorkflowCheckpoints', 'readWorkflowCheckpoint',
      'sequentialToolExecutor', 'serialize', 'summarizeRun', 'summarizeThread', 'textOf', 'tool', 'toolUsesOf', 'validateInput', 'verifyRun',
    ],
    types: [
      'AcquireRunInput', 'AcquiredLease', 'AgentExecutorInput', 'AgentExecutorOptions', 'AgentExecutorResponse', 'AgentHooks', 'AgentInput',
      'AgentInterruptRequest', 'AgentMetrics', 'AgentOptions', 'AgentResultJSON', 'AgentSnapshot', 'AgentState', 'AgentStopReason',
      'AgentStreamEvent', 'BlockExtras', 'CairnErrorCode', 'CairnErrorOptions', 'CairnLimits', 'CancelOutcome', 'CheckpointDiff',
      'CheckpointErrorOptions', 'CheckpointInfo', 'CheckpointInput', 'CheckpointJSON', 'CheckpointPosition', 'CheckpointRecord',
      'CheckpointResumeBlock', 'CheckpointStorage', 'CheckpointStore', 'CheckpointTail', 'ClaimRequest', 'ClaimedLease', 'ConfigSignature', 'ContentBlock',
      'ConversationManager', 'CreateRunInput', 'DiffSide', 'DocumentBlock', 'EdgeCondition', 'EdgeOptions', 'EffectChange', 'EffectCompletion',
      'EffectCompletionResult', 'EffectIntent', 'EffectRecord', 'EffectStatus', 'EncryptionState', 'EngineStoreOptions', 'EnqueueOptions',
      'EnqueueRunInput', 'EventLogOptions', 'ExecutorCompletedEvent', 'ExecutorFunction', 'ExecutorInvokedEvent', 'ExecutorState', 'FanOutOptions',
      'FanOutSelection', 'Fence', 'FenceHooks', 'FencedStore', 'FileStoreOptions', 'ForkOptions', 'ForkRunOptions', 'ForkRunResult',
      'FunctionExecutorOptions', 'GraphSignature', 'ImageBlock', 'InferInput', 'InputSchema', 'Interrupt', 'InterruptExpiry', 'InterruptRequest',
      'InterruptResponseBlock', 'InterruptState', 'InvokeOptions', 'JobSpec', 'JsonObject', 'JsonValue', 'KeyInput', 'LatestQuery', 'LeaseRow',
      'ListCheckpointsQuery', 'ListRunsQuery', 'ListTail', 'ListWorkflowCheckpointsOptions', 'LoadRunQuery', 'LoadTailsQuery', 'MediaSource', 'Message', 'Model',
      'ModelCallOptions', 'ModelErrorDetails', 'ModelLimit', 'ModelNotice', 'ModelPrices', 'ModelRequest', 'ModelResponse', 'ModelStopReason',
      'ModelStreamEvent', 'PartialAgentSnapshot', 'PendingWrite', 'PendingWriteRecord', 'PromptBlock', 'ProviderMetadata', 'ProviderTokens',
      'PruneOptions', 'PruneResult', 'PruneWorkflowCheckpointsOptions', 'PutPendingWritesInput', 'ReadEventsOptions', 'ReasoningBlock',
      'RekeyOptions', 'RekeyProgress', 'RekeyResult', 'ReleaseOptions', 'RequestInfoEvent', 'RequestInfoOptions', 'RequeueOutcome', 'ResultOptions',
      'ResumeOptions', 'Role', 'RunDocument', 'RunEvent', 'RunEventListener', 'RunEventLog', 'RunEventUsage', 'RunEventsOptions', 'RunFailure',
      'RunLeases', 'RunOptions', 'RunOutcome', 'RunRecord', 'RunResult', 'RunState', 'RunStatus', 'RunStore', 'RunSummary', 'RunToolCall', 'RunWaits',
      'RunnerCheckpoint', 'RunnerOptions', 'RunnerPhase', 'RuntimeSnapshot', 'ScheduleInfo', 'ScheduleOptions', 'SendMessageOptions', 'SendOptions', 'SnapshotField', 'StandardSchemaV1',
      'StopOptions', 'StoreAdmin', 'StoreReader', 'StoreWriter', 'StoredRunEvent', 'StreamOptions', 'StreamedRunEvent', 'SubagentExecutionRecord',
      'SuperstepCompletedEvent', 'SuperstepStartedEvent', 'SwitchCase', 'TextBlock', 'ThreadEntry', 'ThreadState', 'ThreadSummary', 'ThreadTimeline',
      'Timeline', 'TimelineAnswer', 'TimelineEntry', 'TimelineToolCall', 'Tool', 'ToolCallOutcome', 'ToolContext', 'ToolDefinition',
      'ToolExecutionRecord', 'ToolExecutor', 'ToolResultBlock', 'ToolResultContent', 'ToolSpec', 'ToolUseBlock', 'UpdateRunInput', 'Usage',
      'ValueChange', 'VerifyReport', 'WaitForEventOptions', 'WaitForEventsOptions', 'WorkerEvent', 'WorkerOptions', 'WorkerStore', 'WorkflowBuilderOptions',
      'WorkflowCheckpoint', 'WorkflowCheckpointMetadata', 'WorkflowCheckpointPhase', 'WorkflowCheckpointSummary', 'WorkflowCompletedEvent',
      'WorkflowContext', 'WorkflowErrorOptions', 'WorkflowEvent', 'WorkflowFailedEvent', 'WorkflowMessage', 'WorkflowOutputEvent',
      'WorkflowRunOptions', 'WorkflowRunStatus', 'WorkflowStartedEvent', 'WorkflowState', 'WorkflowStore', 'WriteBatch', 'WriterOptions',
    ],
  },
  sqlite: {
    values: [
      'SQLITE_MIGRATIONS', 'SqliteEngine', 'SqliteStore', 'migrateSqlite',
    ],
    types: [
      'SqliteConnectionOptions', 'SqliteDatabase', 'SqliteEngineOptions', 'SqliteMigration', 'SqliteStatement', 'SqliteStoreOptions',
      'SqliteTransaction',
    ],
  },
  postgres: {
    values: [
      'DEFAULT_SCHEMA', 'PGliteClient', 'POSTGRES_MIGRATIONS', 'PostgresEngine', 'PostgresStore', 'assertSchemaName', 'migratePostgres',
    ],
    types: [
      'PGliteDatabase', 'PostgresConnection', 'PostgresEngineOptions', 'PostgresMigration', 'PostgresPool', 'PostgresPoolClient',
      'PostgresQueryConfig', 'PostgresQueryResult', 'PostgresQueryable', 'PostgresStoreOptions', 'PostgresStoreSettings',
    ],
  },
  engine: {
    values: [
      'CLAIMABLE_STATUSES', 'DEFAULT_QUEUE', 'DelegatingRunStore', 'DelegatingStore', 'EngineStore', 'FINISHED_STATUSES', 'FencedStore',
      'FileEngine', 'LeaseTable', 'MAX_DEPTH_CEILING', 'MemoryEngine', 'MemoryEventLog', 'MemoryRunWaits', 'RUN_CHANGED', 'RUN_DIGEST_FIELDS', 'RUN_DOCUMENT_FORMAT',
      'RunLeases', 'SchemaRegistry', 'TableLeases', 'WAITING_STATUSES', 'applyRunPatch', 'canonicalJson', 'checkCommit', 'compareCheckpointsNewestFirst', 'compareRunsNewestFirst',
      'decodeValue', 'defaultSchemas', 'describeCheckpoints', 'effectWrites', 'encodeValue', 'expandPhases', 'idTimestamp', 'importPeer',
      'listRows', 'loadPhase', 'newId', 'page', 'requirePeer', 'retainedListLengths', 'runDigest', 'runProgressDigest', 'runtimeOf', 'sha256', 'statusMatches',
      'storedIdOf', 'swapFails', 'unleased',
    ],
    types: [
      'AcquireOutcome', 'AcquireRequest', 'CancelOutcome', 'CheckpointHeaderRow', 'CheckpointListing', 'CheckpointRow', 'ClaimRequest', 'ClaimedRun', 'CommitRefusal', 'CommitRequest',
      'CommitResult', 'CommitView', 'DecodeContext', 'EffectCompletionRow', 'EffectRow', 'EffectStatus', 'EngineStoreOptions', 'EnqueueJob', 'ExternalEventRow', 'Fence', 'FenceHooks',
      'HeartbeatRequest', 'HeartbeatRow', 'LeaseEngine', 'LeaseEntry', 'LeaseRow', 'LeaseSubscription', 'ListAppend', 'ListCheckpointsQuery',
      'ListRange', 'ListRef', 'ListRunsQuery', 'Migration', 'OptionalPeer', 'PeerRequest', 'PendingWriteRow', 'PhaseLog', 'PhaseLogEntry', 'ReleaseRequest',
      'RequeueOutcome', 'RequeueRequest', 'RewriteRequest', 'RunChanged', 'RunDigestField', 'RunLoad', 'RunPatch', 'RunRow', 'RunStatus', 'RunSwap', 'RunWaits',
      'ScheduleRow', 'StorageEngine', 'TableLeasesHost', 'TakeEventRequest', 'TimelineContext', 'TimerRow', 'UpgradeInput', 'WaitRow',
    ],
  },
  testing: {
    values: [
      'MemoryStore', 'ScriptedModel', 'conversation', 'runEngineConformance', 'runStoreConformance',
    ],
    types: [
      'CorruptionKind', 'EngineFactory', 'ScriptedModelOptions', 'ScriptedResponse', 'ScriptedSelection', 'ScriptedTurn', 'StoreFactory',
    ],
  },
  openai: {
    values: [
      'OpenAIChatModel', 'OpenAIResponsesModel',
    ],
    types: [
      'OpenAIModelOptions', 'OpenAIResponsesModelOptions',
    ],
  },
  anthropic: {
    values: [
      'AnthropicModel',
    ],
    types: [
      'AnthropicModelOptions',
    ],
  },
  'ai-sdk': {
    values: [
      'AISDKModel',
    ],
    types: [
      'AISDKModelOptions', 'AnyLanguageModel', 'LanguageModelV4Slice',
    ],
  },
  langgraph: {
    values: [
      'CairnSaver',
    ],
    types: [
      'CairnSaverOptions',
    ],
  },
  mcp: {
    values: [
      'IDEMPOTENCY_META_KEY', 'MCP_APPROVAL', 'McpServerError', 'connectMcp',
    ],
    types: [
      'McpApprovalPolicy', 'McpApprovalRequest', 'McpApprovalResponse', 'McpHttpServerOptions', 'McpServerConnection', 'McpServerOptions',
      'McpServerOptionsBase', 'McpStdioServerOptions', 'McpTool', 'McpToolAnnotations', 'McpToolOverride',
    ],
  },
  http: {
    values: [
      'resumeCursor', 'runEventsResponse', 'runUIMessageStreamResponse', 'uiMessageStreamResponse',
    ],
    types: [
      'RunStreamResponseOptions', 'StreamSource',
    ],
  },
}

/**
 * The root entry point's ceiling of runtime exports: internals belong behind `cairn-agents/engine` or
 * nowhere. Every error class a caller may meet is public (81: `InterruptExpiredError` joined).
 */
const ROOT_VALUES_AT_MOST = 81

const ENTRIES = Object.keys(API)
const sourceOf = (entry: string) => fileURLToPath(new URL(`../src/${entry}.ts`, import.meta.url))

let compiled: Map<string, string[]> | undefined

/** Every entry point's export names, values and types, as the compiler resolves them (one program, built once). */
function exportNames(): Map<string, string[]> {
  if (compiled) return compiled
  const program = ts.createProgram(ENTRIES.map(sourceOf), { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, target: ts.ScriptTarget.ES2022, noEmit: true, skipLibCheck: true })
  const checker = program.getTypeChecker()
  compiled = new Map(ENTRIES.map((entry) => [entry, checker.getExportsOfModule(checker.getSymbolAtLocation(program.getSourceFile(sourceOf(entry))!)!).map((symbol) => symbol.getName()).sort()]))
  return compiled
}

// Building the program takes seconds on a loaded machine: a generous limit, not an assertion.
describe('the public API of cairn-agents', { timeout: 120_000 }, () => {
  it.each(ENTRIES)('%s exports exactly its pinned runtime names', async (entry) => {
    const module = (await import(sourceOf(entry))) as Record<string, unknown>
    expect(Object.keys(module).sort()).toEqual(API[entry]!.values)
  })

  it('every entry point exports exactly its pinned names, values and types, each listed by name', async () => {
    for (const entry of ENTRIES) {
      const source = await readFile(sourceOf(entry), 'utf8')
      expect(source, entry).not.toMatch(/export \*|export type \*/)
      expect(exportNames().get(entry), entry).toEqual([...API[entry]!.values, ...API[entry]!.types].sort())
    }
  })

  it(`the root exports at most ${ROOT_VALUES_AT_MOST} runtime names, and no store under a second name`, () => {
    const root = API.index!
    expect(root.values.length).toBeLessThanOrEqual(ROOT_VALUES_AT_MOST)
    for (const alias of ['InMemoryCheckpointStorage', 'FileCheckpointStorage']) expect([...root.values, ...root.types]).not.toContain(alias)
  })

  it('keeps internals out of the root', () => {
    const exported = new Set(exportNames().get('index'))
    const internals = ['TAG', 'streamManaged', 'LoopObserver', 'LoopStart', 'ManagedInvocation', 'CLAIMABLE_STATUSES', 'JOB_KEY', 'RUNNER_PHASES', 'RUNNER_KIND', 'CheckpointRow', 'RunRow', 'StorageEngine', 'CommitRequest', 'chainHash', 'EngineStore', 'MemoryEngine', 'DelegatingStore', 'freezeDeep', 'signConfig', 'importPeer']
    expect(internals.filter((name) => exported.has(name))).toEqual([])
    for (const name of ['Agent', 'Runner', 'Worker', 'CairnClient', 'WorkflowBuilder', 'MemoryStore', 'FileStore', 'CheckpointStore', 'RunStore', 'StoreReader', 'StoreWriter', 'StoreAdmin', 'RecoveryLimitError', 'RunNotPausedError', 'MissingDependencyError', 'InvalidArgumentError']) {
      expect(exported.has(name), name).toBe(true)
    }
  })
})
