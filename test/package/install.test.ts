import { existsSync } from 'node:fs'
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { installApp, ok, pack, ROOT, run } from './packed-app.js'

// The tarball `npm pack` makes from the built package (`npm test` builds first), installed with
// npm into fresh applications, offline: one with better-sqlite3 and tsx, one with no optional
// peer at all.
let dir = ''
let app = ''
let bare = ''

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cairn-packed-'))
  const tarball = await pack(dir)
  app = join(dir, 'app')
  bare = join(dir, 'bare')
  await Promise.all([mkdir(app), mkdir(bare)])
  await installApp(app, tarball, ['better-sqlite3', 'tsx'])
  await installApp(bare, tarball, [])
  await writeFile(join(app, 'agents.ts'), AGENTS_TS)
})

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true })
})

describe('the packed cairn-agents in a fresh application', () => {
  it('an ES module program runs a Runner on SQLite', async () => {
    await writeFile(join(app, 'run.mjs'), RUN_MJS)
    const exit = ok(await run(app, process.execPath, ['run.mjs']), 'node run.mjs')
    const printed = JSON.parse(exit.stdout) as { state: string; text: string; checkpoints: number }
    expect(printed).toMatchObject({ state: 'completed', text: 'hello from the package' })
    expect(printed.checkpoints).toBeGreaterThan(0)
    expect(existsSync(join(app, 'run.db'))).toBe(true)
  })

  // tsc reads every declaration file, @types/node's too: seconds, but many on a loaded machine.
  it('a TypeScript program type-checks against its declarations under strict, with skipLibCheck off', { timeout: 180_000 }, async () => {
    await writeFile(join(app, 'app.ts'), APP_TS)
    const tsconfig = {
      compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, exactOptionalPropertyTypes: true, noUncheckedIndexedAccess: true, skipLibCheck: false, noEmit: true, types: ['node'], typeRoots: [join(ROOT, 'node_modules/@types')] },
      files: ['app.ts'],
    }
    await writeFile(join(app, 'tsconfig.json'), JSON.stringify(tsconfig))
    const exit = await run(app, process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json'])
    expect(exit.stdout + exit.stderr).toBe('')
    expect(exit.code).toBe(0)
  })

  it('npx cairn --version prints the package version', async () => {
    const { version } = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as { version: string }
    const exit = ok(await run(app, 'npx', ['--offline', 'cairn', '--version']), 'npx cairn --version')
    expect(exit.stdout.trim()).toBe(version)
  })

  it('cairn resume --agents ./agents.ts loads the TypeScript module through tsx and finishes a run whose process was killed', async () => {
    await writeFile(join(app, 'start.mjs'), START_MJS)
    const killed = await run(app, process.execPath, ['--import', 'tsx', 'start.mjs'], { CAIRN_TEST_DIE: '1' })
    expect(killed.signal, killed.stderr).toBe('SIGKILL')
    const resumed = ok(await run(app, 'npx', ['--offline', 'cairn', '--store', 'sqlite:agents.db', 'resume', 'ts-run', '--agents', './agents.ts']), 'cairn resume')
    expect(resumed.stdout).toMatch(/run ts-run: completed;/)
    expect(await readFile(join(app, 'steps.log'), 'utf8')).toBe('step\nstep\n')
  })

  it("cairn resume --help says how an agents module exports its agents and that an agent's name defaults to \"agent\"", async () => {
    const exit = ok(await run(app, 'npx', ['--offline', 'cairn', 'resume', '--help']), 'cairn resume --help')
    expect(exit.stdout).toContain('exports agent factories by agent name')
    expect(exit.stdout).toContain('an Agent\'s name defaults to "agent"')
    expect(exit.stdout).toContain('npm install -D tsx')
  })
})

describe('a missing optional peer', () => {
  const peers = [
    ['cairn-agents/sqlite', 'better-sqlite3'],
    ['cairn-agents/openai', 'openai'],
    ['cairn-agents/anthropic', '@anthropic-ai/sdk'],
    ['cairn-agents/ai-sdk', '@ai-sdk/provider'],
    ['cairn-agents/langgraph', '@langchain/langgraph-checkpoint'],
  ] as const

  it.each(peers)('importing %s without %s is a MissingDependencyError naming the install command', async (entry, peer) => {
    const exit = ok(await run(bare, process.execPath, ['--input-type=module', '-e', importAndReport(entry)]), `import ${entry}`)
    expect(JSON.parse(exit.stdout)).toEqual({
      name: 'MissingDependencyError',
      code: 'missing_dependency',
      isCairnError: true,
      packageName: peer,
      message: `${entry} needs the package ${peer}, which is not installed: run \`npm install ${peer}\``,
    })
  })

  it('a PostgresStore opened on a connection string without pg is a MissingDependencyError naming the install command', async () => {
    const program = `
      const { CairnError } = await import('cairn-agents')
      const { PostgresStore } = await import('cairn-agents/postgres')
      const store = new PostgresStore({ connectionString: 'postgres://127.0.0.1:1/none' })
      try { await store.getRun('r'); console.log('null') }
      catch (e) { console.log(JSON.stringify({ name: e.name, isCairnError: e instanceof CairnError, packageName: e.packageName, message: e.message })) }
      finally { await store.close().catch(() => {}) }`
    const exit = ok(await run(bare, process.execPath, ['--input-type=module', '-e', program]), 'PostgresStore without pg')
    expect(JSON.parse(exit.stdout)).toEqual({
      name: 'MissingDependencyError',
      isCairnError: true,
      packageName: 'pg',
      message: 'PostgresStore with a connectionString needs the package pg, which is not installed: run `npm install pg`',
    })
  })

  it('the CLI prints one line naming the driver to install, not a stack', async () => {
    const sqlite = await run(bare, 'npx', ['--offline', 'cairn', '--store', 'sqlite:x.db', 'runs'])
    expect(sqlite.code).toBe(1)
    expect(sqlite.stderr.trim()).toBe(`cairn: the SQLite store sqlite:x.db needs the package better-sqlite3, which is not installed: run \`npm install better-sqlite3\``)
    const postgres = await run(bare, 'npx', ['--offline', 'cairn', '--store', 'postgres://127.0.0.1:1/none', 'runs'])
    expect(postgres.code).toBe(1)
    expect(postgres.stderr.trim()).toBe('cairn: the Postgres store postgres://127.0.0.1:1/none needs the package pg, which is not installed: run `npm install pg`')
  })

  it('the CLI asks for tsx to load a TypeScript agents module', async () => {
    await writeFile(join(bare, 'agents.ts'), AGENTS_TS)
    const exit = await run(bare, 'npx', ['--offline', 'cairn', 'resume', 'some-run', '--agents', './agents.ts'])
    expect(exit.code).toBe(1)
    expect(exit.stderr.trim()).toBe('cairn: loading the TypeScript agents module ./agents.ts needs the package tsx, which is not installed: run `npm install -D tsx`')
  })

  it('a run traced into a registered OpenTelemetry provider warns once that @opentelemetry/api is missing, and finishes', async () => {
    await writeFile(join(bare, 'traced.mjs'), TRACED_MJS)
    const exit = ok(await run(bare, process.execPath, ['traced.mjs']), 'node traced.mjs')
    expect(exit.stdout.trim()).toBe('completed completed')
    const warnings = exit.stderr.split('\n').filter((line) => line.includes('MissingDependencyError'))
    expect(warnings).toHaveLength(1)
    expect(warnings[0]).toContain('needs the package @opentelemetry/api, which is not installed: run `npm install @opentelemetry/api`')
  })
})

/** A one-line program importing `entry` and printing what it threw. */
function importAndReport(entry: string): string {
  return `
    const { CairnError } = await import('cairn-agents')
    try { await import('${entry}'); console.log('null') }
    catch (e) { console.log(JSON.stringify({ name: e.name, code: e.code, isCairnError: e instanceof CairnError, packageName: e.packageName, message: e.message })) }`
}

const RUN_MJS = `
import { Agent, Runner } from 'cairn-agents'
import { SqliteStore } from 'cairn-agents/sqlite'
import { ScriptedModel } from 'cairn-agents/testing'

const store = new SqliteStore({ path: 'run.db' })
const agent = new Agent({ model: new ScriptedModel([[{ text: 'hello from the package' }]]) })
const run = await new Runner({ store }).run(agent, { input: 'hi', runId: 'packed' })
const checkpoints = (await store.listCheckpoints({ runId: 'packed' })).length
console.log(JSON.stringify({ state: run.state, text: run.result.message.content[0].text, checkpoints }))
await store.close()
`

const APP_TS = `
import { Agent, CairnError, MissingDependencyError, Runner, tool, type RunResult } from 'cairn-agents'
import { EngineStore } from 'cairn-agents/engine'
import { PostgresStore } from 'cairn-agents/postgres'
import { SqliteStore } from 'cairn-agents/sqlite'
import { ScriptedModel } from 'cairn-agents/testing'

const echo = tool({ name: 'echo', description: 'Echo the text.', inputSchema: { type: 'object', properties: { text: { type: 'string' } } }, callback: (input) => JSON.stringify(input) })
const store = new SqliteStore({ path: 'typed.db' })
const agent = new Agent({ name: 'typed', model: new ScriptedModel([[{ text: 'typed' }]]), tools: [echo] })
const run: RunResult = await new Runner({ store }).run(agent, { input: 'hi', runId: 'typed' })
const missing: CairnError = new MissingDependencyError({ packageName: 'pg', neededBy: 'an example' })
console.log(run.state, missing.code, typeof EngineStore, typeof PostgresStore)
await store.close()
`

/** Agents in TypeScript, for cairn resume: one agent, named by default, whose tool can kill its process. */
const AGENTS_TS = `
import { appendFileSync } from 'node:fs'
import { Agent, tool, type Tool } from 'cairn-agents'
import { ScriptedModel } from 'cairn-agents/testing'

const step: Tool = tool({
  name: 'step',
  description: 'One step; dies the first time when asked to.',
  idempotent: true,
  inputSchema: { type: 'object', properties: {} },
  callback: (): string => {
    appendFileSync('steps.log', 'step\\n')
    if (process.env.CAIRN_TEST_DIE === '1') process.kill(process.pid, 'SIGKILL')
    return 'stepped'
  },
})

export const agents: Record<string, () => Agent> = {
  agent: (): Agent => new Agent({ model: new ScriptedModel([[{ toolUse: { toolUseId: 'step-1', name: 'step', input: {} } }], [{ text: 'done' }]], { select: 'conversation' }), tools: [step] }),
}
`

const START_MJS = `
import { Runner } from 'cairn-agents'
import { SqliteStore } from 'cairn-agents/sqlite'
import { agents } from './agents.ts'

const store = new SqliteStore({ path: 'agents.db' })
await new Runner({ store, durability: 'sync' }).run(agents.agent(), { input: 'take a step', runId: 'ts-run' })
`

const TRACED_MJS = `
import { Agent, MemoryStore, Runner } from 'cairn-agents'
import { ScriptedModel } from 'cairn-agents/testing'

// What an application's OpenTelemetry setup leaves behind once it registered a provider.
globalThis[Symbol.for('opentelemetry.js.api.1')] = { version: '1.9.0' }
const runner = new Runner({ store: new MemoryStore() })
const agent = () => new Agent({ model: new ScriptedModel([[{ text: 'one' }], [{ text: 'two' }]]) })
const first = await runner.run(agent(), { input: 'a', runId: 'traced-1' })
const second = await runner.run(agent(), { input: 'b', runId: 'traced-2' })
console.log(first.state, second.state)
`
