export { tool, errorResult, type AgentState, type InterruptRequest, type Tool, type ToolContext, type ToolDefinition } from './tool.js'
export { concurrentToolExecutor, sequentialToolExecutor, type RunToolCall, type ToolCallOutcome, type ToolExecutor } from './tool-executor.js'
export { isStandardSchema, jsonSchemaOf, validateInput, type InferInput, type InputSchema, type StandardSchemaV1 } from './input-schema.js'
export { validateJsonSchema } from './json-schema.js'
