#!/usr/bin/env node
// Builds dist/, the published package: `tsc` writes the type declarations (and typechecks the
// sources), esbuild writes the JavaScript, one bundle per entry point with the code they share in
// chunks, so a program that imports `cairn` and `cairn/sqlite` loads a few files, not a hundred,
// and both see one copy of every class (`instanceof` holds across entry points).
//
//   npm run build
//
// Layout: every library entry, every shared chunk and every file that Cairn starts by path (the
// SQLite writer thread, the conformance suite's crash child) sit side by side at the root of
// dist/, so `new URL('./writer-thread.js', import.meta.url)` in any of them finds its file, as
// it does beside the sources. The command line entry is dist/cli/main.js (the `cairn` bin); code
// that starts a file by path must not end up there, and the build checks that it does not.
import { spawnSync } from 'node:child_process'
import { readFileSync, rmSync } from 'node:fs'
import { dirname, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { build } from 'esbuild'

const root = fileURLToPath(new URL('..', import.meta.url))
const dist = `${root}dist`

/** Output name (under dist/, no extension) → source. */
const ENTRIES = {
  index: 'src/index.ts',
  sqlite: 'src/sqlite.ts',
  postgres: 'src/postgres.ts',
  engine: 'src/engine.ts',
  testing: 'src/testing.ts',
  openai: 'src/openai.ts',
  anthropic: 'src/anthropic.ts',
  'ai-sdk': 'src/ai-sdk.ts',
  langgraph: 'src/langgraph.ts',
  // Started by path: the SQLite writer thread (sqlite-writer.ts) and the conformance suite's
  // crash child (child-process.ts), each named as the module that starts it expects.
  'writer-thread': 'src/store/backends/sqlite/writer-thread.ts',
  'crash-child': 'src/testing/conformance/crash-child.ts',
  'cli/main': 'src/cli/main.ts',
  // Not published: the CLI tests open stores by URL the way the command does.
  'cli/open-store': 'src/cli/open-store.ts',
}

rmSync(dist, { recursive: true, force: true })
const tsc = spawnSync(process.execPath, [`${root}node_modules/typescript/bin/tsc`, '-p', 'tsconfig.build.json'], { cwd: root, stdio: 'inherit' })
if (tsc.status !== 0) process.exit(tsc.status ?? 1)

const result = await build({
  absWorkingDir: root,
  entryPoints: Object.entries(ENTRIES).map(([out, source]) => ({ in: source, out })),
  outdir: 'dist',
  chunkNames: 'chunk-[hash]',
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  // Dependencies and peer dependencies are the user's to install: never bundled.
  packages: 'external',
  // Errors name themselves after their class (`new.target.name`): bundling must not rename one.
  keepNames: true,
  sourcemap: 'linked',
  metafile: true,
  logLevel: 'warning',
})
checkLocatedFiles(result.metafile)

/** Fail the build if a module that starts a file by path landed outside the root of dist/. */
function checkLocatedFiles(metafile) {
  for (const output of Object.keys(metafile.outputs)) {
    if (!output.endsWith('.js') || dirname(output) === 'dist') continue
    const text = readFileSync(`${root}${output}`, 'utf8')
    if (/new URL\(\s*["']\.\//.test(text)) {
      throw new Error(`${relative(root, output)} locates a file beside itself, but only files at the root of dist/ have their neighbours there`)
    }
  }
}
