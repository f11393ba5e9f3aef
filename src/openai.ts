/**
 * `cairn-agents/openai`: Cairn models on the official `openai` client (an optional peer dependency:
 * `npm install openai`). The API key is read from `OPENAI_API_KEY` unless given.
 */
export { OpenAIResponsesModel, type OpenAIResponsesModelOptions } from './providers/openai/responses-model.js'
export { OpenAIChatModel } from './providers/openai/chat-model.js'
export type { OpenAIModelOptions } from './providers/openai/client.js'
