/**
 * `cairn-agents/ai-sdk`: any Vercel AI SDK provider model as a Cairn model. Install the provider you
 * use (`npm install @ai-sdk/anthropic`); Cairn imports only types from `@ai-sdk/provider`.
 */
export { AISDKModel, type AISDKModelOptions } from './providers/ai-sdk/ai-sdk-model.js'
export type { AnyLanguageModel, LanguageModelV4Slice } from './providers/ai-sdk/ai-sdk-types.js'
