/**
 * The documentation's code is real code: every ```ts block of README.md and docs/*.md is
 * type-checked (all of them in one `tsc` call) and run (each with tsx in a child process, in a
 * directory of its own, with a time limit). A block marked ```ts no-run is only type-checked.
 * A line ending in `// prints: TEXT` must print TEXT. A block whose first line is `// file: NAME.ts` is
 * written as NAME.ts beside the other blocks of its page (a server they start) instead of being run. Blocks that use `cairn-agents/openai` talk to
 * a local server that answers as the OpenAI API does (OPENAI_BASE_URL), so nothing leaves the
 * machine and no key is needed.
 *
 * The blocks are written into a directory inside the repository, so `cairn-agents` and its
 * subpaths resolve to the sources through tsconfig.json `paths`, as in every other test.
 */
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { dirname, join, relative, resolve } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ROOT } from './support/child.js'
import { chatStream, responsesStream } from './providers/openai-wire.js'
import type { Replay } from './providers/replay-server.js'

const README_MAX_LINES = 300
const BLOCK_TIMEOUT_MS = 45_000
const PARALLEL = 3

interface Block {
  /** `README.md:42`: where the block's fence opens. */
  where: string
  /** A file-system-safe name: `readme-42`. */
  name: string
  code: string
  run: boolean
  /** The name the page's other blocks know this one by (`// file: NAME.ts` on its first line). */
  fileName?: string
}

/** The Markdown files whose code is checked: the README and every page under docs/. */
function markdownFiles(): string[] {
  const docs = readdirSync(join(ROOT, 'docs')).filter((file) => file.endsWith('.md')).sort()
  return ['README.md', ...docs.map((file) => `docs/${file}`)]
}

/** The ```ts blocks of one Markdown file. Any other TypeScript fence is refused: it would escape the check. */
function blocksOf(file: string, text: string): Block[] {
  const blocks: Block[] = []
  const lines = text.split('\n')
  for (let i = 0; i < lines.length; i++) {
    const fence = /^(\s*)```\s*(ts|typescript|tsx|js|javascript)\b(.*)$/.exec(lines[i]!)
    if (!fence) continue
    const [, indent, lang, rest] = fence
    const info = rest!.trim()
    if (indent !== '' || lang !== 'ts' || (info !== '' && info !== 'no-run')) {
      throw new Error(`${file}:${i + 1}: write code blocks as a top-level \`\`\`ts (or \`\`\`ts no-run), not ${JSON.stringify(lines[i])}`)
    }
    const start = i
    const body: string[] = []
    for (i++; i < lines.length && !/^```\s*$/.test(lines[i]!); i++) body.push(lines[i]!)
    if (i === lines.length) throw new Error(`${file}:${start + 1}: the code block is never closed`)
    const slug = file.replace(/\.md$/, '').replace(/[^A-Za-z0-9]+/g, '-').toLowerCase()
    // A block that opens with `// file: NAME.ts` is a file the page's other blocks use (a server
    // they start, say): it is type-checked, written beside each of them, and not run on its own.
    const file_ = /^\/\/ file: ([\w.-]+\.ts)$/.exec(body[0] ?? '')?.[1]
    blocks.push({ where: `${file}:${start + 1}`, name: `${slug}-${start + 1}`, code: `${body.join('\n')}\n`, run: info !== 'no-run' && file_ === undefined, ...(file_ === undefined ? {} : { fileName: file_ }) })
  }
  return blocks
}

/** The anchors of a Markdown file's headings, as GitHub makes them. */
function headingSlugs(text: string): string[] {
  const outside = text.replace(/^```[\s\S]*?^```/gm, '')
  return [...outside.matchAll(/^#{1,6} (.+)$/gm)].map((match) => match[1]!.trim().toLowerCase().replace(/[^\p{L}\p{N} _-]/gu, '').replace(/ /g, '-'))
}

/** The texts a block promises to print: what follows `// prints:` at the end of a line. */
function promisedOutput(code: string): string[] {
  return [...code.matchAll(/\/\/ prints: (.+)$/gm)].map((match) => match[1]!.trim())
}

const files = markdownFiles()
const texts = new Map(files.map((file) => [file, readFileSync(join(ROOT, file), 'utf8')]))
const blocks = files.flatMap((file) => blocksOf(file, texts.get(file)!))
let work = ''
let openai: FakeOpenAI
let typeErrors: Map<string, string>

describe('README.md', () => {
  it(`is at most ${README_MAX_LINES} lines`, () => {
    expect(texts.get('README.md')!.split('\n').length).toBeLessThanOrEqual(README_MAX_LINES)
  })

  it('and the docs pages link only to files and headings that exist', () => {
    for (const file of files) {
      for (const [, target, anchor] of texts.get(file)!.matchAll(/\]\(([^)#\s]*)(?:#([^)\s]*))?\)/g)) {
        if (/^[a-z]+:/.test(target!)) continue
        const path = target === '' ? join(ROOT, file) : resolve(ROOT, dirname(file), target!)
        expect(existsSync(path), `${file} links to ${target}`).toBe(true)
        if (anchor !== undefined && path.endsWith('.md')) expect(headingSlugs(readFileSync(path, 'utf8')), `${file} links to ${target}#${anchor}`).toContain(anchor)
      }
    }
  })

  it('holds the program a user copies: a durable agent with a real model adapter on SQLite', () => {
    const runnable = blocks.filter((block) => block.where.startsWith('README.md:') && block.run)
    expect(runnable.some((block) => block.code.includes("from 'cairn-agents/openai'") && block.code.includes("from 'cairn-agents/sqlite'") && block.code.includes('new Runner('))).toBe(true)
  })
})

describe('every ```ts block of the documentation', () => {
  beforeAll(async () => {
    work = mkdtempSync(join(ROOT, '.docs-check-'))
    for (const block of blocks) {
      mkdirSync(join(work, block.name))
      writeFileSync(join(work, block.name, 'block.ts'), block.code)
    }
    for (const shared of blocks.filter((block) => block.fileName !== undefined)) {
      const page = shared.where.split(':')[0]
      for (const block of blocks.filter((b) => b.where.split(':')[0] === page && b !== shared)) writeFileSync(join(work, block.name, shared.fileName!), shared.code)
    }
    // The repository's compiler options, `paths` included, over the blocks alone.
    writeFileSync(join(work, 'tsconfig.json'), JSON.stringify({ extends: '../tsconfig.json', compilerOptions: { noEmit: true, rootDir: '..' }, include: ['*/block.ts'] }))
    openai = await FakeOpenAI.start()
    typeErrors = await typeCheck(work)
  }, 180_000)

  afterAll(async () => {
    await openai?.close()
    if (work !== '') rmSync(work, { recursive: true, force: true })
  })

  it('finds blocks in the README and the pages, most of them runnable', () => {
    expect(blocks.filter((block) => block.where.startsWith('README.md:')).length).toBeGreaterThan(0)
    expect(blocks.filter((block) => block.run).length).toBeGreaterThan(blocks.length / 2)
  })

  it('type-checks', () => {
    const report = [...typeErrors].map(([name, errors]) => `${blocks.find((block) => block.name === name)?.where ?? name}:\n${errors}`)
    expect(report.join('\n\n')).toBe('')
  })

  it('runs: each runnable block exits 0 and prints what it says it prints', async () => {
    const failures: string[] = []
    const queue = blocks.filter((block) => block.run)
    const ranBefore = openai.requests
    await Promise.all(
      Array.from({ length: PARALLEL }, async () => {
        for (let block = queue.shift(); block; block = queue.shift()) {
          const out = await runBlock(join(work, block.name), openai.url)
          const missing = promisedOutput(block.code).filter((text) => !out.stdout.includes(text))
          if (out.code !== 0 || missing.length > 0) {
            failures.push(`${block.where}: exit ${out.code}${out.timedOut ? ' (killed after the time limit)' : ''}${missing.length ? `; did not print ${missing.map((t) => JSON.stringify(t)).join(', ')}` : ''}\n${out.stderr.slice(-2_000)}${out.stdout.slice(-1_000)}`)
          }
        }
      }),
    )
    expect(failures.join('\n\n')).toBe('')
    // The OpenAI blocks really went through the adapter to the (local) API.
    expect(openai.requests).toBeGreaterThan(ranBefore)
  }, 240_000)
})

/** Type-check every block in one compiler run; the errors by block name. */
async function typeCheck(dir: string): Promise<Map<string, string>> {
  const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc')
  const out = await runChild([tsc, '-p', join(dir, 'tsconfig.json'), '--pretty', 'false'], ROOT, process.env, 100_000)
  const errors = new Map<string, string>()
  for (const line of out.stdout.split('\n').filter((l) => l.trim() !== '')) {
    const name = relative(dir, resolve(ROOT, line.split('(')[0]!)).split('/')[0]!
    const key = line.startsWith(' ') || name.startsWith('..') ? '(tsc)' : name
    errors.set(key, `${errors.get(key) ?? ''}${line}\n`)
  }
  if (out.code !== 0 && errors.size === 0) errors.set('(tsc)', `tsc exited ${out.code}: ${out.stderr}`)
  return errors
}

/** Run one block with tsx, in its own directory, against the fake OpenAI API. */
function runBlock(dir: string, openaiUrl: string): Promise<ChildResult> {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    OPENAI_BASE_URL: `${openaiUrl}/v1`,
    OPENAI_API_KEY: 'sk-docs-test',
    ANTHROPIC_BASE_URL: openaiUrl,
    ANTHROPIC_API_KEY: 'sk-ant-docs-test',
    // A key ring for the blocks that read one the way the CLI does.
    CAIRN_KEYS: `docs-key:${randomBytes(32).toString('base64')}`,
  }
  return runChild(['--import', 'tsx', 'block.ts'], dir, env, BLOCK_TIMEOUT_MS)
}

interface ChildResult {
  code: number | null
  stdout: string
  stderr: string
  timedOut: boolean
}

/** A Node child process, SIGKILLed if it outlives `timeoutMs`. */
function runChild(args: string[], cwd: string, env: NodeJS.ProcessEnv, timeoutMs: number): Promise<ChildResult> {
  const child = spawn(process.execPath, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  let timedOut = false
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk))
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk))
  const timer = setTimeout(() => {
    timedOut = true
    child.kill('SIGKILL')
  }, timeoutMs)
  return new Promise((resolvePromise, reject) => {
    child.on('error', reject)
    child.on('close', (code) => {
      clearTimeout(timer)
      resolvePromise({ code, stdout, stderr, timedOut })
    })
  })
}

/**
 * A local stand-in for the OpenAI API (Responses and Chat Completions, streamed). It answers from
 * the request alone: while the conversation has no tool result yet, it calls the first tool
 * offered, with an input built from the tool's JSON Schema; after a tool result (or with no
 * tools), it answers with text quoting the last tool result.
 */
class FakeOpenAI {
  requests = 0
  readonly #server = createServer((req, res) => void this.#handle(req, res))

  static async start(): Promise<FakeOpenAI> {
    const fake = new FakeOpenAI()
    await new Promise<void>((done) => fake.#server.listen(0, '127.0.0.1', done))
    return fake
  }

  get url(): string {
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections()
    await new Promise<void>((done) => this.#server.close(() => done()))
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as Record<string, unknown>
    this.requests++
    const replay = req.url?.endsWith('/chat/completions') ? chatAnswer(body) : responsesAnswer(body, this.requests)
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', ...replay.headers })
    res.end(replay.sse!.map((e) => `${e.event === undefined ? '' : `event: ${e.event}\n`}data: ${typeof e.data === 'string' ? e.data : JSON.stringify(e.data)}\n\n`).join(''))
  }
}

interface FunctionTool {
  name: string
  parameters?: { properties?: Record<string, { type?: string }> }
}

/** An input that fits a tool's JSON Schema: a city for every string, 1 for every number. */
function inputFor(tool: FunctionTool): string {
  const input: Record<string, unknown> = {}
  for (const [key, schema] of Object.entries(tool.parameters?.properties ?? {})) {
    input[key] = schema.type === 'number' || schema.type === 'integer' ? 1 : schema.type === 'boolean' ? true : 'Turin'
  }
  return JSON.stringify(input)
}

function responsesAnswer(body: Record<string, unknown>, n: number): Replay {
  const input = (Array.isArray(body.input) ? body.input : []) as { type?: string; output?: unknown }[]
  const tools = (body.tools ?? []) as FunctionTool[]
  const lastResult = [...input].reverse().find((item) => item.type === 'function_call_output')
  if (lastResult || tools.length === 0) return responsesStream({ id: `resp_${n}`, text: `Done: ${textOf(lastResult?.output)}` })
  return responsesStream({ id: `resp_${n}`, calls: [{ id: `fc_${n}`, callId: `call_${n}`, name: tools[0]!.name, args: inputFor(tools[0]!) }] })
}

function chatAnswer(body: Record<string, unknown>): Replay {
  const messages = (body.messages ?? []) as { role?: string; content?: unknown }[]
  const tools = ((body.tools ?? []) as { function: FunctionTool }[]).map((t) => t.function)
  const lastResult = [...messages].reverse().find((m) => m.role === 'tool')
  if (lastResult || tools.length === 0) return chatStream({ text: `Done: ${textOf(lastResult?.content)}` })
  return chatStream({ calls: [{ id: 'call_1', name: tools[0]!.name, args: inputFor(tools[0]!) }] })
}

/** A tool result as the model would quote it. */
function textOf(value: unknown): string {
  return value === undefined ? 'hello' : typeof value === 'string' ? value : JSON.stringify(value)
}
