#!/usr/bin/env node
// Builds dist/, the published package: `tsc` writes the type declarations (and typechecks the
// sources), esbuild writes the JavaScript, so a program that imports `cairn-agents` and `cairn-agents/sqlite`
// loads a handful of files, not a hundred (each file costs a fresh process time to resolve,
// read, compile and link).
//
//   npm run build
//
// Three bundles:
// - the library: one file per entry point of package.json, the code entry points share in
//   chunks beside them, so `cairn-agents` and `cairn-agents/sqlite` see one copy of every class (`instanceof`
//   holds across entry points);
// - the command line (dist/cli/): only the code of src/cli; it takes the library from the entry
//   points above (src/cli imports `../index.js`, never a module behind it), so a user's agents
//   module and the command share one copy too, and the command adds no chunks to the library;
// - the files Cairn starts by path, each self-contained: the conformance suite's crash child. They
//   sit at the root of dist/ beside every library chunk, so `new URL('./crash-child.js',
//   import.meta.url)` finds its file from any of them, as it does beside the sources. The build
//   checks both rules.
import { spawnSync } from 'node:child_process'
import { readFileSync, rmSync } from 'node:fs'
import { dirname, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { build } from 'esbuild'

const root = fileURLToPath(new URL('..', import.meta.url))

/** Output name (under dist/, no extension) → source, for each of the three bundles. */
const LIBRARY = {
  index: 'src/index.ts',
  sqlite: 'src/sqlite.ts',
  postgres: 'src/postgres.ts',
  engine: 'src/engine.ts',
  testing: 'src/testing.ts',
  openai: 'src/openai.ts',
  anthropic: 'src/anthropic.ts',
  'ai-sdk': 'src/ai-sdk.ts',
  langgraph: 'src/langgraph.ts',
  mcp: 'src/mcp.ts',
  http: 'src/http.ts',
}
const COMMAND = {
  'cli/main': 'src/cli/main.ts',
  // Not published: the CLI tests open stores by URL the way the command does.
  'cli/open-store': 'src/cli/open-store.ts',
}
/** Started by path, each named as the module that starts it expects (child-process.ts). */
const STARTED_BY_PATH = {
  'crash-child': 'src/testing/conformance/crash-child.ts',
}

const COMMON = {
  absWorkingDir: root,
  outdir: 'dist',
  bundle: true,
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
}

rmSync(`${root}dist`, { recursive: true, force: true })
const tsc = spawnSync(process.execPath, [`${root}node_modules/typescript/bin/tsc`, '-p', 'tsconfig.build.json'], { cwd: root, stdio: 'inherit' })
if (tsc.status !== 0) process.exit(tsc.status ?? 1)

const entries = (map) => Object.entries(map).map(([out, source]) => ({ in: source, out }))
const library = await build({ ...COMMON, entryPoints: entries(LIBRARY), splitting: true, chunkNames: 'chunk-[hash]' })
const command = await build({ ...COMMON, entryPoints: entries(COMMAND), splitting: true, chunkNames: 'cli/chunk-[hash]', plugins: [libraryFromEntries()] })
const started = await build({ ...COMMON, entryPoints: entries(STARTED_BY_PATH) })
checkLocatedFiles([library, command, started])
checkCommandBundlesOnlyItself(command)

/** The command's imports of a library entry point stay imports of the built entry (dist/cli/ → dist/). */
function libraryFromEntries() {
  const sources = new Map(Object.entries(LIBRARY).map(([out, source]) => [resolve(root, source), `../${out}.js`]))
  return {
    name: 'library-from-entries',
    setup(esbuild) {
      esbuild.onResolve({ filter: /^\.\.?\// }, (args) => {
        const target = sources.get(resolve(args.resolveDir, args.path).replace(/\.js$/, '.ts'))
        return target === undefined ? undefined : { path: target, external: true }
      })
    },
  }
}

/** Fail the build if a module that starts a file by path landed outside the root of dist/. */
function checkLocatedFiles(results) {
  for (const result of results) {
    for (const output of Object.keys(result.metafile.outputs)) {
      if (!output.endsWith('.js') || dirname(output) === 'dist') continue
      if (/new URL\(\s*["']\.\//.test(readFileSync(`${root}${output}`, 'utf8'))) {
        throw new Error(`${relative(root, output)} locates a file beside itself, but only files at the root of dist/ have their neighbours there`)
      }
    }
  }
}

/** Fail the build if the command bundled a module of the library instead of importing its entry point. */
function checkCommandBundlesOnlyItself(result) {
  for (const [output, { inputs }] of Object.entries(result.metafile.outputs)) {
    const foreign = Object.keys(inputs).filter((input) => !input.startsWith('src/cli/'))
    if (foreign.length > 0) throw new Error(`${output} bundles ${foreign.join(', ')}: src/cli must import the library from ../index.js (or another entry point)`)
  }
}
