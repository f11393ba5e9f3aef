import { createServer, type Server } from 'node:http'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { Agent, ConfigMismatchError, Runner, type ContentBlock, type ToolResultBlock } from '../../src/index.js'
import { connectMcp, MCP_APPROVAL, McpServerError, type McpServerConnection, type McpServerOptions } from '../../src/mcp.js'
import { MemoryStore, ScriptedModel } from '../../src/testing.js'
import { callingAgent, calls, notesServer } from './fixtures/notes.js'
import { registerNoteTools } from './fixtures/notes-tools.js'

// Real MCP servers written with the SDK's McpServer: a child process over stdio, and a local
// Streamable HTTP endpoint. No part of the protocol is faked.

let dir = ''
let log = ''
let notes: McpServerConnection
const cleanups: (() => Promise<unknown>)[] = []

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cairn-mcp-'))
  log = join(dir, 'calls.log')
  notes = await connectMcp(notesServer(log, { tools: { send_message: { idempotent: true }, read_note: { approval: true } }, approval: 'destructive' }))
})
afterAll(async () => {
  await notes?.close()
  await rm(dir, { recursive: true, force: true })
})
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

async function connect(options: McpServerOptions): Promise<McpServerConnection> {
  const server = await connectMcp(options)
  cleanups.push(() => server.close())
  return server
}

/** An agent calling each of `uses` in its own turn, then answering `done`. */
function agentCalling(server: McpServerConnection, uses: { name: string; input: Record<string, string> }[]): Agent {
  const turns: ContentBlock[][] = uses.map((use, i) => [{ toolUse: { toolUseId: `call-${i + 1}`, name: use.name, input: use.input } }])
  return new Agent({ model: new ScriptedModel([...turns, [{ text: 'done' }]], { select: 'conversation' }), tools: server.tools })
}

function toolResults(agent: Agent): ToolResultBlock['toolResult'][] {
  return agent.messages.flatMap((m) => m.content.flatMap((b) => ('toolResult' in b ? [b.toolResult] : [])))
}

describe('an MCP server over stdio', { timeout: 60_000 }, () => {
  it("offers the server's tools under its prefix, input schemas as given, annotations mapped to idempotency and approval", () => {
    const byName = new Map(notes.tools.map((t) => [t.mcpName, t]))
    expect(notes.tools.map((t) => t.name).sort()).toEqual(
      ['append_note', 'broken', 'delete_note', 'read_note', 'self_destruct', 'send_message', 'slow'].map((n) => `notes__${n}`),
    )
    expect(byName.get('read_note')!.spec).toEqual({
      name: 'notes__read_note',
      description: 'Read a note by id.',
      inputSchema: { type: 'object', properties: { id: { type: 'string' } }, required: ['id'] },
    })
    const mapped = Object.fromEntries(notes.tools.map((t) => [t.mcpName, [t.idempotent, t.destructive, t.requiresApproval]]))
    expect(mapped).toEqual({
      read_note: [true, false, true], // read-only: idempotent; approval forced by the per-tool override
      append_note: [true, false, false], // idempotentHint
      send_message: [true, false, false], // no hint, but the per-tool override says idempotent
      delete_note: [false, true, true], // destructiveHint: approval under the 'destructive' policy
      broken: [true, false, false],
      slow: [true, false, false],
      self_destruct: [false, true, true], // no hints: MCP reads it as destructive
    })
  })

  it('a call goes through the journal: structured output reaches the model as JSON, the server sees the idempotency key in _meta', async () => {
    const server = await connect(notesServer(log, { name: 'plain', include: ['read_note', 'broken'] }))
    expect(server.tools.map((t) => t.name)).toEqual(['plain__read_note', 'plain__broken'])
    const store = new MemoryStore()
    const agent = agentCalling(server, [{ name: 'plain__read_note', input: { id: 'welcome' } }, { name: 'plain__broken', input: {} }])
    const result = await new Runner({ store }).run(agent, { input: 'read it', runId: 'read' })
    expect(result.state).toBe('completed')
    const [read, broken] = toolResults(agent)
    expect(read).toEqual({ toolUseId: 'call-1', status: 'success', content: [{ json: { id: 'welcome', text: 'Hello from the notes server' } }] })
    // isError: an error result the model sees, recorded as failed.
    expect(broken).toEqual({ toolUseId: 'call-2', status: 'error', content: [{ text: 'the notes index is corrupt' }] })
    expect((await store.listEffects('read')).map((e) => [e.name, e.status, e.idempotencyKey])).toEqual([
      ['plain__read_note', 'succeeded', 'read:call-1'],
      ['plain__broken', 'failed', 'read:call-2'],
    ])
    expect(calls(log, 'read_note').at(-1)!.key).toBe('read:call-1')
  })

  it('a call that times out and a server killed mid-call become error results; the next call reopens the connection', async () => {
    const server = await connect(notesServer(log, { name: 'fragile', callTimeoutMs: 1_500 }))
    const store = new MemoryStore()
    const agent = agentCalling(server, [
      { name: 'fragile__slow', input: {} },
      { name: 'fragile__self_destruct', input: {} },
      { name: 'fragile__read_note', input: { id: 'welcome' } },
    ])
    const result = await new Runner({ store }).run(agent, { input: 'go', runId: 'fragile' })
    expect(result.state).toBe('completed')
    const [slow, killed, read] = toolResults(agent)
    expect(slow!.status).toBe('error')
    expect(JSON.stringify(slow!.content)).toMatch(/did not answer within 1500 ms \(callTimeoutMs\).*outcome is unknown/)
    expect(killed!.status).toBe('error')
    expect(JSON.stringify(killed!.content)).toMatch(/connection to MCP server fragile was lost during the call of tool self_destruct.*outcome of the call is unknown/)
    expect(read!.status).toBe('success')
    const [killedCall] = calls(log, 'self_destruct')
    expect(calls(log, 'read_note').at(-1)!.pid).not.toBe(killedCall!.pid)
    expect((await store.listEffects('fragile')).map((e) => e.status)).toEqual(['failed', 'failed', 'succeeded'])
  })

  it('a connection reopened after the server died is refused when the server now offers other tools', async () => {
    const variantFile = join(dir, 'variant')
    const base = notesServer(log, { name: 'restarted' })
    const server = await connect({ ...base, env: { ...base.env, NOTES_VARIANT_FILE: variantFile } })
    await writeFile(variantFile, 'changed')
    const agent = agentCalling(server, [
      { name: 'restarted__self_destruct', input: {} },
      { name: 'restarted__read_note', input: { id: 'welcome' } },
    ])
    expect((await new Runner({ store: new MemoryStore() }).run(agent, { input: 'go', runId: 'restarted' })).state).toBe('completed')
    const [, read] = toolResults(agent)
    expect(read!.status).toBe('error')
    expect(JSON.stringify(read!.content)).toMatch(/MCP server restarted offers other tools than when the agent was built \(append_note changed\)/)
  })

  it('a resume against a server whose tools changed is refused with ConfigMismatchError unless the caller allows the change', async () => {
    const store = new MemoryStore()
    const runner = new Runner({ store })
    const paused = await runner.run(callingAgent(notes.tools, 'notes__read_note', { id: 'welcome' }), { input: 'go', runId: 'drift' })
    expect(paused.interrupts.map((i) => i.name)).toEqual([MCP_APPROVAL])
    const changed = await connect(notesServer(log, { variant: 'changed', tools: { read_note: { approval: true } } }))
    const responses = { [paused.interrupts[0]!.id]: 'approve' }
    const refused = await runner.resume(callingAgent(changed.tools, 'notes__read_note', { id: 'welcome' }), { runId: 'drift', responses }).catch((err: unknown) => err)
    expect(refused).toBeInstanceOf(ConfigMismatchError)
    expect((refused as Error).message).toMatch(/tool notes__append_note changed/)
    const allowed = await runner.resume(callingAgent(changed.tools, 'notes__read_note', { id: 'welcome' }), { runId: 'drift', responses, allowConfigChange: true })
    expect(allowed.state).toBe('completed')

    // Annotations alone are part of a tool's signature: a server that now says a tool is idempotent changed it.
    const hinted = await connect(notesServer(log, { variant: 'hints' }))
    const signatures = (server: McpServerConnection) => Object.fromEntries(server.tools.map((t) => [t.mcpName, t.signature]))
    expect(signatures(hinted).send_message).not.toBe(signatures(notes).send_message)
    expect(signatures(hinted).delete_note).toBe(signatures(notes).delete_note)
  })

  it('a server that does not start or does not speak MCP is a typed error within the connect timeout', async () => {
    const missing = await connectMcp({ name: 'nowhere', command: join(dir, 'no-such-command') }).catch((err: unknown) => err)
    expect(missing).toBeInstanceOf(McpServerError)
    expect(missing).toMatchObject({ code: 'mcp_connection', server: 'nowhere' })
    const silent = await connectMcp({ name: 'silent', command: process.execPath, args: ['-e', 'setTimeout(() => {}, 60000)'], connectTimeoutMs: 1_000 }).catch((err: unknown) => err)
    expect(silent).toMatchObject({ code: 'mcp_connection', server: 'silent' })
    expect((silent as Error).message).toMatch(/within 1000 ms \(connectTimeoutMs\)/)
  })
})

describe('an MCP server over Streamable HTTP', { timeout: 60_000 }, () => {
  let http: Server
  let url = ''
  beforeAll(async () => {
    http = createServer((req, res) => {
      // Stateless: a server and a transport per request, as the SDK serves it.
      const server = new McpServer({ name: 'notes', version: '1.0.0' })
      registerNoteTools(server, { log })
      const transport = new StreamableHTTPServerTransport({})
      res.on('close', () => void Promise.all([transport.close(), server.close()]))
      void server.connect(transport).then(() => transport.handleRequest(req, res))
    })
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
    url = `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`
  })
  afterAll(async () => {
    http.closeAllConnections()
    await new Promise((resolve) => http.close(resolve))
  })

  it('lists, maps and calls tools with the headers given; a server that went away is an error result, not a hang', async () => {
    const server = await connect({ name: 'remote', url, headers: { authorization: 'Bearer secret-token' }, callTimeoutMs: 10_000 })
    expect(server.tools.find((t) => t.mcpName === 'append_note')).toMatchObject({ name: 'remote__append_note', idempotent: true, destructive: false })
    const store = new MemoryStore()
    const agent = agentCalling(server, [{ name: 'remote__read_note', input: { id: 'welcome' } }])
    expect((await new Runner({ store }).run(agent, { input: 'go', runId: 'http' })).state).toBe('completed')
    expect(toolResults(agent)[0]!.content).toEqual([{ json: { id: 'welcome', text: 'Hello from the notes server' } }])
    expect(calls(log, 'read_note').at(-1)).toMatchObject({ key: 'http:call-1', authorization: 'Bearer secret-token', pid: process.pid })

    http.closeAllConnections()
    await new Promise((resolve) => http.close(resolve))
    const gone = agentCalling(server, [{ name: 'remote__append_note', input: { id: 'x', text: 'y' } }])
    expect((await new Runner({ store }).run(gone, { input: 'go', runId: 'http-gone' })).state).toBe('completed')
    const [result] = toolResults(gone)
    expect(result!.status).toBe('error')
    expect(JSON.stringify(result!.content)).toMatch(/connection to MCP server remote was lost/)
    expect((await store.listEffects('http-gone')).map((e) => e.status)).toEqual(['failed'])
  })
})
