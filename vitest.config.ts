import { availableParallelism } from 'node:os'
import { fileURLToPath } from 'node:url'
import { defineConfig } from 'vitest/config'

/**
 * Two projects. `unit`: in-process tests with no child processes and no Postgres, for feedback in
 * seconds (`npx vitest run --project unit`). `integration`: real child processes killed with
 * SIGKILL, Postgres (a server or PGlite), worker threads, the examples and the short torture run.
 * `npm test` runs both. A test file that spawns a process or opens Postgres belongs in the list.
 */
const integration = [
  'test/cli/**/*.test.ts',
  'test/time/cli-time.test.ts',
  'test/time/processes.test.ts',
  'test/conformance/built-sqlite.conformance.test.ts',
  'test/conformance/file.conformance.test.ts',
  'test/conformance/keyed.conformance.test.ts',
  'test/conformance/sqlite.conformance.test.ts',
  'test/conformance/postgres.*.test.ts',
  'test/demo.test.ts',
  'test/docs.test.ts',
  'test/examples.test.ts',
  'test/file-engine.test.ts',
  'test/hostile/cairn-import.test.ts',
  'test/hostile/file-readers.test.ts',
  'test/hostile/fuzz.test.ts',
  'test/hostile/injection.test.ts',
  'test/langgraph/graph.test.ts',
  'test/langgraph/threads.test.ts',
  'test/langgraph/validation.postgres.test.ts',
  'test/langgraph/validation.sqlite-file.test.ts',
  'test/mcp/crash.test.ts',
  'test/mcp/package.test.ts',
  'test/mcp/tools.test.ts',
  'test/migrations.test.ts',
  'test/observe/telemetry.test.ts',
  'test/package/**/*.test.ts',
  'test/pglite-client.test.ts',
  'test/postgres-engine.test.ts',
  'test/providers/demo-real-model.test.ts',
  'test/providers/end-to-end.test.ts',
  'test/runner/race.test.ts',
  'test/runner/runs.test.ts',
  'test/sqlite-engine.test.ts',
  'test/store/**/*.test.ts',
  'test/streams/browser.test.ts',
  'test/streams/crash.test.ts',
  'test/streams/event-replace.test.ts',
  'test/torture.test.ts',
  'test/trust/**/*.test.ts',
  'test/worker/dead-local-worker.test.ts',
  'test/worker/migrations.test.ts',
  'test/worker/postgres-worker.test.ts',
  'test/worker/processes.test.ts',
  'test/worker/respond.test.ts',
  'test/worker/restart.test.ts',
  'test/worker/sqlite-processes.test.ts',
  'test/worker/store-failures.test.ts',
  'test/workflow/race.test.ts',
  'test/workflow/examples.test.ts',
]

const src = (entry: string) => fileURLToPath(new URL(`./src/${entry}.ts`, import.meta.url))

export default defineConfig({
  resolve: {
    // The package's own entry points resolve to the sources, as in tsconfig.json `paths`.
    alias: [
      { find: /^cairn-agents$/, replacement: src('index') },
      { find: /^cairn-agents\/(ai-sdk|anthropic|engine|http|langgraph|mcp|openai|postgres|sqlite|testing)$/, replacement: src('$1') },
    ],
  },
  test: {
    // At least two test files at a time: most files wait on child processes, fsyncs and Postgres, so
    // a 2-core machine (where the default would be one) finishes the suite in about two thirds of the time.
    maxWorkers: Math.max(2, availableParallelism() - 1),
    projects: [
      { extends: true, test: { name: 'unit', include: ['test/**/*.test.ts'], exclude: ['**/node_modules/**', ...integration] } },
      // Child processes, fsyncs and Postgres: generous limits, so a loaded machine is slow, not red.
      { extends: true, test: { name: 'integration', include: integration, testTimeout: 30_000, hookTimeout: 60_000 } },
    ],
  },
})
