import { constants } from 'node:fs'
import { open } from 'node:fs/promises'
import { hostname, userInfo } from 'node:os'
import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { EncryptionChangeError, forkRun, importRun, Runner, type Agent, type CheckpointStore, type JsonValue, type RekeyOptions, type RekeyResult, type RunRecord, type RunResult } from '../index.js'
import { importPeer } from '../engine.js'
import { CliError } from './cli-error.js'
import type { Context } from './context.js'
import { positiveInt } from './read-commands.js'
import { printEvent } from './events-printer.js'
import { osUser, questionsOf, recordAnswers } from './run-answers.js'

/** The kinds of checkpoint an agent run and a workflow run write. */
const RUNNER_KIND = 'runner'
const WORKFLOW_KIND = 'workflow'

/** Agent factories by name: what an `--agents` module exports (the shape a `Worker` takes). */
export type AgentFactories = Record<string, () => Agent | Promise<Agent>>

/** `cairn fork CHECKPOINT [--run-id ID]` (an id, or `RUN#N` as `cairn show` numbers them). */
export async function forkCommand(ctx: Context, ref: string, options: { runId?: string }): Promise<void> {
  const store = await ctx.store()
  const checkpointId = (await ctx.checkpoint(ref)).id
  if (options.runId !== undefined && (await store.getRun(options.runId))) throw new CliError(`run ${options.runId} already exists; pick another --run-id`)
  const fork = await forkRun(store, { checkpointId, ...(options.runId === undefined ? {} : { runId: options.runId }) })
  const result = { runId: fork.runId, checkpointId: fork.checkpoint.id, phase: fork.checkpoint.phase, snapshotFrom: fork.snapshotFrom ?? null, effectsCopied: fork.effectsCopied }
  ctx.out.result(result, () => {
    ctx.out.line(`forked run ${fork.runId} at ${fork.checkpoint.phase} (checkpoint ${fork.checkpoint.id})`)
    if (fork.snapshotFrom !== undefined && fork.snapshotFrom !== checkpointId) ctx.out.line(`it resumes from the newest runtime snapshot at or before that checkpoint: ${fork.snapshotFrom}`)
    if (fork.effectsCopied > 0) ctx.out.line(`${fork.effectsCopied} completed calls copied into its journal: resuming replays them instead of running them again`)
    ctx.out.line(continueHint(fork.runId, fork.checkpoint))
  })
}

/** What a fork goes on with: an agent run with its agent; a workflow's or another layer's checkpoint in the code that wrote it. */
function continueHint(runId: string, checkpoint: { id: string; kind: string }): string {
  if (checkpoint.kind === RUNNER_KIND) return `resume it with: cairn resume ${runId} --agents ./agents.js   (or runner.resume(agent, { runId: '${runId}' }))`
  if (checkpoint.kind === WORKFLOW_KIND) return `continue it with the workflow that wrote it: workflow.run({ checkpointId: '${checkpoint.id}' })`
  return `continue it from checkpoint ${checkpoint.id} with the code that wrote its ${checkpoint.kind} checkpoints (cairn resume continues agent runs only)`
}

/** `cairn resume RUN --agents ./agents.js [--response ID=JSON …]`. */
export async function resumeCommand(ctx: Context, runId: string, options: { agents?: string; response?: string[] }): Promise<void> {
  const factories = await loadAgents(options.agents)
  const store = await ctx.store()
  const run = await ctx.run(runId)
  const runner = new Runner({ store, ...(ctx.out.json ? {} : { onEvent: printEvent(ctx.out) }) })
  const responses = parseResponses(options.response ?? [])
  const [latest] = await store.listCheckpoints({ runId: run.runId, limit: 1, verify: false })
  if (latest && latest.kind !== RUNNER_KIND) throw new CliError(notAnAgentRun(run, latest))
  const agent = await agentFor(run, factories)
  await recordValidAnswers(store, run, responses)
  const answeredBy = Object.keys(responses).length > 0 ? { answeredBy: `${operatorName()} (cairn resume)` } : {}
  const result = await runner.resume(agent, { runId, responses, ...answeredBy })
  report(ctx, [result])
  if (result.state === 'failed') process.exitCode = 1
}

/** `cairn recover --agents ./agents.js`: resume every run a dead process left running. */
export async function recoverCommand(ctx: Context, options: { agents?: string }): Promise<void> {
  const factories = await loadAgents(options.agents)
  const store = await ctx.store()
  const runner = new Runner({ store, ...(ctx.out.json ? {} : { onEvent: printEvent(ctx.out) }) })
  // recoverAll resumes agent runs only: a workflow run or a LangGraph thread never reaches the factory.
  const results = await runner.recoverAll((run) => agentFor(run, factories))
  report(ctx, results)
}

/** `cairn prune [--run RUN] [--keep-last N] [--older-than DAYS]`. */
export async function pruneCommand(ctx: Context, options: { run?: string; keepLast?: string; olderThan?: string }): Promise<void> {
  const store = await ctx.store()
  if (options.run !== undefined) await ctx.run(options.run)
  const olderThan = options.olderThan === undefined ? undefined : Date.now() - positiveNumber(options.olderThan, '--older-than') * 86_400_000
  const progress = ctx.out.progress('prune')
  progress.update(0, 1)
  const result = await store.prune({
    ...(options.run === undefined ? {} : { runId: options.run }),
    ...(options.keepLast === undefined ? {} : { keepLast: positiveInt(options.keepLast, '--keep-last') }),
    ...(olderThan === undefined ? {} : { olderThan }),
  })
  progress.update(1, 1)
  progress.stop()
  ctx.out.result(result, () => ctx.out.line(`pruned ${result.checkpointsDeleted} checkpoints and ${result.effectsDeleted} effects`))
}

/** `cairn migrate`: bring the store's schema up to date and report its versions. */
export async function migrateCommand(ctx: Context): Promise<void> {
  const progress = ctx.out.progress('migrate')
  progress.update(0, 1)
  const opened = await ctx.opened({ create: true })
  const after = await opened.migrations.after()
  progress.update(1, 1)
  progress.stop()
  const applied = after.filter((version) => !opened.migrations.before.includes(version))
  const result = { store: opened.location.url, kind: opened.location.kind, before: opened.migrations.before, after, applied }
  ctx.out.result(result, () => {
    ctx.out.line(`${opened.location.url}: schema version ${after.at(-1) ?? 0}`)
    ctx.out.line(applied.length > 0 ? `applied migrations ${applied.join(', ')}` : 'already up to date')
  })
}

/**
 * `cairn rekey [--sign-unsigned] [--encrypt | --decrypt]`: re-seal every record under the first
 * key of `CAIRN_KEYS`. Whether records are encrypted changes only with `--encrypt` or `--decrypt`.
 */
export async function rekeyCommand(ctx: Context, options: { signUnsigned?: boolean; encrypt?: boolean; decrypt?: boolean }): Promise<void> {
  if (options.encrypt === true && options.decrypt === true) throw new CliError('rekey takes --encrypt or --decrypt, not both')
  const store = (await ctx.store()) as CheckpointStore & { rekey?: (options: RekeyOptions) => Promise<RekeyResult> }
  if (typeof store.rekey !== 'function') throw new CliError(`${ctx.storeUrl} cannot be rekeyed: its store has no rekey()`)
  if (!ctx.keys) throw new CliError('rekey needs keys: set CAIRN_KEYS=newId:base64,oldId:base64 (the first key writes; every key listed is accepted to read)')
  if (options.decrypt === true && ctx.encrypt) throw new CliError('rekey --decrypt writes records in plaintext, but CAIRN_ENCRYPT asks to encrypt them: unset CAIRN_ENCRYPT')
  const progress = ctx.out.progress('rekey')
  let result: RekeyResult
  try {
    result = await store.rekey({
      ...(options.signUnsigned === true ? { signUnsigned: true } : {}),
      ...(options.encrypt === true ? { encrypt: true } : {}),
      ...(options.decrypt === true ? { decrypt: true } : {}),
      onProgress: (p) => progress.update(p.runsDone, p.runsTotal),
    })
  } catch (err) {
    if (err instanceof EncryptionChangeError) throw refusedChange(err)
    throw err
  } finally {
    progress.stop()
  }
  const { before, after } = result.encrypted
  ctx.out.result({ keyId: ctx.keys.writeKeyId, ...result }, () =>
    ctx.out.line(
      `rekeyed ${result.runs} runs under key ${ctx.keys!.writeKeyId}: ${result.checkpoints} checkpoints, ${result.items} list items and ${result.effects} effects rewritten ` +
        `(encrypted before: ${before}, after: ${after})`,
    ),
  )
}

/** The refusal of a rekey that would change encryption, in the command's own flags. */
function refusedChange(err: EncryptionChangeError): CliError {
  const message =
    err.change === 'decrypt'
      ? `run ${err.runId} holds encrypted records, and a rekey without --encrypt would write them in plaintext; nothing of it was changed. ` +
        'Pass --encrypt to keep the store encrypted (cairn rekey --encrypt), or --decrypt to decrypt it (cairn rekey --decrypt)'
      : `run ${err.runId} holds records in plaintext, and CAIRN_ENCRYPT asks to encrypt what is written; nothing of it was changed. ` +
        'Pass --encrypt to encrypt them (cairn rekey --encrypt), or unset CAIRN_ENCRYPT to keep them in plaintext'
  return new CliError(message, { cause: err })
}

/** The largest run document `cairn import` reads unless `--max-bytes` (`CAIRN_IMPORT_MAX_BYTES`) says otherwise. */
export const DEFAULT_IMPORT_MAX_BYTES = 256 * 1024 * 1024

/** `cairn import < run.json` (or `--file run.json`). */
export async function importCommand(ctx: Context, options: { file?: string; maxBytes?: string }): Promise<void> {
  const maxBytes = options.maxBytes === undefined ? DEFAULT_IMPORT_MAX_BYTES : positiveInt(options.maxBytes, '--max-bytes')
  const text = options.file === undefined ? await readStdin(maxBytes) : await readRegularFile(options.file, maxBytes)
  let document: unknown
  try {
    document = JSON.parse(text)
  } catch (err) {
    throw new CliError(`the input is not JSON (${(err as Error).message}); give a document made by \`cairn export RUN\``, { cause: err })
  }
  const store = await ctx.store({ create: true })
  const progress = ctx.out.progress('import')
  const run = await importRun(store, document, (done, total) => progress.update(done, total))
  progress.stop()
  ctx.out.result({ runId: run.runId, status: run.status }, () => ctx.out.line(`imported run ${run.runId} (${run.status}) into ${ctx.storeUrl}`))
}

/** The agent factories of an `--agents` module. */
export async function loadAgents(path: string | undefined): Promise<AgentFactories> {
  if (path === undefined) throw new CliError('give the agents with --agents ./agents.js: a module exporting agent factories by name, e.g. export const agents = { researcher: () => buildAgent() }')
  const file = resolve(path)
  if (TYPESCRIPT.test(file)) await registerTypeScript(path)
  let module: Record<string, unknown>
  try {
    module = (await import(pathToFileURL(file).href)) as Record<string, unknown>
  } catch (err) {
    throw new CliError(`cannot load the agents module ${path}: ${(err as Error).message}`, { cause: err })
  }
  const record = (module.agents ?? module.default)
  const factories = typeof record === 'object' && record !== null ? (record as Record<string, unknown>) : module
  const found = Object.fromEntries(Object.entries(factories).filter(([, value]) => typeof value === 'function')) as AgentFactories
  if (Object.keys(found).length === 0) throw new CliError(`${path} exports no agent factories; export const agents = { name: () => buildAgent() }`)
  return found
}

/** File names Node cannot import without a TypeScript loader. */
const TYPESCRIPT = /\.(ts|mts|cts|tsx)$/

/** Let `import()` load TypeScript: tsx's ES module loader (tsx is the application's development dependency). */
async function registerTypeScript(path: string): Promise<void> {
  const tsx = await importPeer<{ register: () => unknown }>({ name: 'tsx', subpath: 'esm/api', dev: true, neededBy: `loading the TypeScript agents module ${path}` })
  tsx.register()
}

async function agentFor(run: RunRecord, factories: AgentFactories): Promise<Agent> {
  const factory = run.name === null ? undefined : factories[run.name]
  if (!factory) throw new CliError(`run ${run.runId} is an agent named ${JSON.stringify(run.name)}, which the agents module does not export (it has ${Object.keys(factories).join(', ')})`)
  return factory()
}

/** Why a run that no agent wrote is not resumed with one, and what continues it instead. */
function notAnAgentRun(run: RunRecord, latest: { kind: string; workflowName: string | null }): string {
  const only = 'cairn resume and cairn recover continue agent runs only'
  if (latest.kind === WORKFLOW_KIND) {
    return `run ${run.runId} is a run of workflow ${JSON.stringify(latest.workflowName)}, not an agent run: continue it with the workflow that wrote it, workflow.run({ checkpointId }) from its latest checkpoint (\`cairn show ${run.runId}\`); ${only}`
  }
  if (run.threadId !== null) return `run ${run.runId} is LangGraph thread ${JSON.stringify(run.threadId)}, not an agent run: it goes on when your graph is invoked with that thread_id; ${only}`
  return `run ${run.runId} holds ${latest.kind} checkpoints, not an agent run's: continue it with the code that wrote them; ${only}`
}

/** Keep answers the run asks for with the run (who and when), as the inspector does; the runner refuses any other. */
async function recordValidAnswers(store: CheckpointStore, run: RunRecord, responses: Record<string, JsonValue>): Promise<void> {
  const ids = Object.keys(responses)
  if (ids.length === 0) return
  const asked = new Set((await questionsOf(store, run)).map((question) => question.interruptId))
  if (ids.every((id) => asked.has(id))) await recordAnswers(store, run.runId, { responses, by: osUser(), via: 'cli' })
}

function parseResponses(pairs: readonly string[]): Record<string, JsonValue> {
  const responses: Record<string, JsonValue> = {}
  for (const pair of pairs) {
    const at = pair.indexOf('=')
    if (at <= 0) throw new CliError(`--response takes INTERRUPT_ID=JSON, got ${JSON.stringify(pair)}`)
    const text = pair.slice(at + 1)
    try {
      responses[pair.slice(0, at)] = JSON.parse(text) as JsonValue
    } catch {
      responses[pair.slice(0, at)] = text
    }
  }
  return responses
}

function report(ctx: Context, results: readonly RunResult[]): void {
  const rows = results.map((r) => ({ runId: r.runId, state: r.state, llmCalls: r.llmCalls, toolCalls: r.toolCalls, replayed: r.replayedEffectCount, skipped: r.skippedEffectCount, error: r.error?.message ?? null, interrupts: r.interrupts.map((i) => i.id) }))
  ctx.out.result(rows, () => {
    for (const r of rows) {
      ctx.out.line(`run ${r.runId}: ${r.state}; ${r.llmCalls} model calls, ${r.toolCalls} tool calls, ${r.replayed} replayed from the journal${r.skipped ? `, ${r.skipped} not run on a skip answer` : ''}${r.error ? `; error: ${r.error}` : ''}${r.interrupts.length ? `; waiting on ${r.interrupts.join(', ')}` : ''}`)
    }
    if (rows.length === 0) ctx.out.line('no run was left running by a dead process')
  })
}

/** `user@host` of whoever runs this command, as far as the system tells. */
function operatorName(): string {
  let user: string | undefined
  try {
    user = userInfo().username
  } catch {
    user = process.env.USER ?? process.env.USERNAME
  }
  return `${user ?? 'unknown user'}@${hostname()}`
}

function positiveNumber(value: string, flag: string): number {
  const n = Number(value)
  if (!Number.isFinite(n) || n < 0) throw new CliError(`${flag} takes a number of days, got ${JSON.stringify(value)}`)
  return n
}

/** Standard input, read up to `maxBytes`: more is refused as soon as it arrives (`< /dev/zero` ends at the bound). */
async function readStdin(maxBytes: number): Promise<string> {
  if (process.stdin.isTTY) throw new CliError('pipe a run document into `cairn import` (cairn import < run.json) or give --file run.json')
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of process.stdin) {
    size += (chunk as Buffer).length
    if (size > maxBytes) {
      process.stdin.destroy()
      throw tooLarge('the input', maxBytes)
    }
    chunks.push(chunk as Buffer)
  }
  return Buffer.concat(chunks).toString('utf8')
}

/**
 * A regular file's text, up to `maxBytes`. It is opened without blocking and refused unless it is
 * a regular file: a FIFO would wait for a writer without end, and a device may never end.
 */
async function readRegularFile(path: string, maxBytes: number): Promise<string> {
  let handle
  try {
    handle = await open(path, constants.O_RDONLY | (constants.O_NONBLOCK ?? 0))
  } catch (err) {
    throw new CliError(`cannot read ${path} (${(err as Error).message}); give --file the path of a run document made by \`cairn export RUN\``, { cause: err })
  }
  try {
    const stat = await handle.stat()
    if (!stat.isFile()) {
      throw new CliError(`${path} is not a regular file (a FIFO, device or directory); give --file a file, or pipe the document in: cairn import < ${path}`)
    }
    if (stat.size > maxBytes) throw tooLarge(path, maxBytes)
    // Read one byte past the size seen: a file that grew past the bound since is refused too.
    const buffer = Buffer.alloc(Math.min(maxBytes + 1, stat.size + 1))
    let at = 0
    for (;;) {
      const { bytesRead } = await handle.read(buffer, at, buffer.length - at, at)
      if (bytesRead === 0) break
      at += bytesRead
      if (at === buffer.length) break
    }
    if (at > maxBytes) throw tooLarge(path, maxBytes)
    if (at > stat.size) throw new CliError(`${path} grew while it was read; import it once nothing writes it any more`)
    return buffer.toString('utf8', 0, at)
  } finally {
    await handle.close()
  }
}

function tooLarge(what: string, maxBytes: number): CliError {
  return new CliError(`${what} is larger than ${maxBytes} bytes, the most \`cairn import\` reads; if it is a run document, raise the bound with --max-bytes N (or CAIRN_IMPORT_MAX_BYTES)`)
}
