/**
 * `cairn-agents/anthropic`: a Cairn model on `@anthropic-ai/sdk` (an optional peer dependency:
 * `npm install @anthropic-ai/sdk`). The API key is read from `ANTHROPIC_API_KEY` unless given.
 */
export { AnthropicModel, type AnthropicModelOptions } from './providers/anthropic/anthropic-model.js'
