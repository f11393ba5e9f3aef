/**
 * Cairn: durable execution for AI agents and agent workflows.
 *
 * The core API: the codec, hashing, ids, errors and schema migrations; the `CheckpointStore`
 * interface with its dependency-free backends; the model interface, tools and the agent loop;
 * the workflow engine.
 * SQLite lives in `cairn/sqlite`, test helpers in `cairn/testing`.
 */
export * from './core/index.js'
export * from './store/index.js'
export * from './model/index.js'
export * from './tools/index.js'
export * from './agent/index.js'
export * from './workflow/index.js'
export * from './runner/index.js'
export * from './worker/index.js'
export * from './observe/index.js'
