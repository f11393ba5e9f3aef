import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it } from 'vitest'
import { Runner } from '../../src/index.js'
import { connectMcp, MCP_APPROVAL, type McpServerConnection } from '../../src/mcp.js'
import { SqliteStore } from '../../src/sqlite.js'
import { ROOT } from '../support/child.js'
import { waitFor } from '../support/wait.js'
import { callingAgent, calls, notesServer } from './fixtures/notes.js'
import type { ChildConfig } from './fixtures/run-child.js'

// A Cairn process calls a tool of a real MCP server (the SDK's McpServer over stdio) and is
// SIGKILLed inside the call; this process resumes the run against a fresh server.

const CHILD = fileURLToPath(new URL('./fixtures/run-child.ts', import.meta.url))
const cleanups: (() => Promise<unknown>)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

async function setup() {
  const dir = await mkdtemp(join(tmpdir(), 'cairn-mcp-crash-'))
  cleanups.push(() => rm(dir, { recursive: true, force: true }))
  const store = new SqliteStore({ path: join(dir, 'cairn.db') })
  cleanups.push(() => store.close())
  return { dir, store, db: join(dir, 'cairn.db'), log: join(dir, 'calls.log') }
}

function startChild(config: ChildConfig): { child: ChildProcess; output: Promise<string> } {
  const child = spawn(process.execPath, ['--import', 'tsx', CHILD, JSON.stringify(config)], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] })
  let stdout = ''
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk))
  const output = new Promise<string>((resolve, reject) => {
    child.on('error', reject)
    child.on('close', () => resolve(stdout))
  })
  return { child, output }
}

async function connect(log: string, options: Parameters<typeof notesServer>[1] = {}): Promise<McpServerConnection> {
  const server = await connectMcp(notesServer(log, options))
  cleanups.push(() => server.close())
  return server
}

describe('MCP calls through the effect journal across a SIGKILL', { timeout: 90_000 }, () => {
  it('an idempotent MCP call cut short by a SIGKILL is re-run on resume with the same idempotency key, which the server sees', async () => {
    const { store, db, log } = await setup()
    const input = { id: 'journal', text: 'first line' }
    const { child, output } = startChild({ db, log, runId: 'append', tool: 'notes__append_note', input, hang: 'append_note' })
    await waitFor(() => calls(log, 'append_note').length === 1, 'the server to receive the call')
    child.kill('SIGKILL')
    await output

    const server = await connect(log)
    const result = await new Runner({ store }).resume(callingAgent(server.tools, 'notes__append_note', input), { runId: 'append' })
    expect(result.state).toBe('completed')
    const appends = calls(log, 'append_note')
    expect(appends).toHaveLength(2)
    expect(appends[0]!.key).toBe('append:call-1')
    expect(appends[1]!.key).toBe(appends[0]!.key)
    expect(appends[1]!.pid).not.toBe(appends[0]!.pid)
    const effects = await store.listEffects('append')
    expect(effects.map((e) => [e.name, e.status])).toEqual([['notes__append_note', 'succeeded']])

    // The command line shows the call under the server's prefixed name: the journal and the timeline.
    const cli = spawnSync(process.execPath, ['dist/cli/main.js', '--store', `sqlite:${db}`, 'effects', 'append'], { cwd: ROOT, encoding: 'utf8' })
    expect(cli.status, cli.stderr).toBe(0)
    expect(cli.stdout).toMatch(/call-1\s+notes__append_note\s+succeeded/)
    const show = spawnSync(process.execPath, ['dist/cli/main.js', '--store', `sqlite:${db}`, 'show', 'append'], { cwd: ROOT, encoding: 'utf8' })
    expect(show.status, show.stderr).toBe(0)
    expect(show.stdout).toMatch(/model asked for notes__append_note\(id="journal", text="first line"\)/)
    expect(show.stdout).toMatch(/1 tool result: notes__append_note ran/)
  })

  it('a non-idempotent MCP call cut short by a SIGKILL is never re-run on its own: the run pauses for a human', async () => {
    const { store, db, log } = await setup()
    const input = { to: 'ops', text: 'deploy done' }
    const { child, output } = startChild({ db, log, runId: 'send', tool: 'notes__send_message', input, hang: 'send_message' })
    await waitFor(() => calls(log, 'send_message').length === 1, 'the server to receive the call')
    child.kill('SIGKILL')
    await output

    const server = await connect(log)
    const runner = new Runner({ store })
    const paused = await runner.resume(callingAgent(server.tools, 'notes__send_message', input), { runId: 'send' })
    expect(paused.state).toBe('paused')
    expect(paused.interrupts.map((i) => i.name)).toEqual(['effect_outcome_unknown'])
    expect(calls(log, 'send_message')).toHaveLength(1)

    // A human decides it was sent: the model gets an error result, the server is not called again.
    const done = await runner.resume(callingAgent(server.tools, 'notes__send_message', input), { runId: 'send', responses: { [paused.interrupts[0]!.id]: 'skip' } })
    expect(done.state).toBe('completed')
    expect(calls(log, 'send_message')).toHaveLength(1)
  })

  it('a destructive MCP tool waits for approval; another process answers it and the call runs once', async () => {
    const { store, db, log } = await setup()
    const input = { id: 'welcome' }
    const { output } = startChild({ db, log, runId: 'delete', tool: 'notes__delete_note', input, approval: 'destructive' })
    const printed = JSON.parse((await output).trim()) as { state: string; interrupts: { id: string; name: string; reason: { server: string; tool: string; destructive: boolean } }[] }
    expect(printed.state).toBe('paused')
    expect(printed.interrupts.map((i) => [i.name, i.reason.server, i.reason.tool, i.reason.destructive])).toEqual([[MCP_APPROVAL, 'notes', 'delete_note', true]])
    expect(calls(log, 'delete_note')).toHaveLength(0)

    const server = await connect(log, { approval: 'destructive' })
    const result = await new Runner({ store }).resume(callingAgent(server.tools, 'notes__delete_note', input), { runId: 'delete', responses: { [printed.interrupts[0]!.id]: 'approve' } })
    expect(result.state).toBe('completed')
    expect(calls(log, 'delete_note').map((c) => c.key)).toEqual(['delete:call-1'])
    expect((await store.listEffects('delete')).map((e) => [e.name, e.status])).toEqual([['notes__delete_note', 'succeeded']])
  })
})
