/**
 * `cairn-agents/langgraph`: a LangGraph.js checkpointer over any Cairn store (an optional peer
 * dependency: `npm install @langchain/langgraph-checkpoint`).
 */
export { CairnSaver, type CairnSaverOptions } from './integrations/langgraph/index.js'
