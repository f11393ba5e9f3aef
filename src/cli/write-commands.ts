import { constants } from 'node:fs'
import { open } from 'node:fs/promises'
import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { forkRun, importRun, Runner, type Agent, type CheckpointStore, type JsonValue, type RekeyOptions, type RekeyResult, type RunRecord, type RunResult } from '../index.js'
import { CliError } from './cli-error.js'
import type { Context } from './context.js'
import { positiveInt } from './read-commands.js'
import { printEvent } from './events-printer.js'

/** Agent factories by name: what an `--agents` module exports (the shape a `Worker` takes). */
export type AgentFactories = Record<string, () => Agent | Promise<Agent>>

/** `cairn fork CHECKPOINT [--run-id ID]`. */
export async function forkCommand(ctx: Context, checkpointId: string, options: { runId?: string }): Promise<void> {
  const store = await ctx.store()
  await ctx.checkpoint(checkpointId)
  if (options.runId !== undefined && (await store.getRun(options.runId))) throw new CliError(`run ${options.runId} already exists; pick another --run-id`)
  const fork = await forkRun(store, { checkpointId, ...(options.runId === undefined ? {} : { runId: options.runId }) })
  const result = { runId: fork.runId, checkpointId: fork.checkpoint.id, phase: fork.checkpoint.phase, snapshotFrom: fork.snapshotFrom ?? null, effectsCopied: fork.effectsCopied }
  ctx.out.result(result, () => {
    ctx.out.line(`forked run ${fork.runId} at ${fork.checkpoint.phase} (checkpoint ${fork.checkpoint.id})`)
    if (fork.snapshotFrom !== undefined && fork.snapshotFrom !== checkpointId) ctx.out.line(`it resumes from the newest runtime snapshot at or before that checkpoint: ${fork.snapshotFrom}`)
    if (fork.effectsCopied > 0) ctx.out.line(`${fork.effectsCopied} completed calls copied into its journal: resuming replays them instead of running them again`)
    ctx.out.line(`resume it with: cairn resume ${fork.runId} --agents ./agents.js   (or runner.resume(agent, { runId: '${fork.runId}' }))`)
  })
}

/** `cairn resume RUN --agents ./agents.js [--response ID=JSON …]`. */
export async function resumeCommand(ctx: Context, runId: string, options: { agents?: string; response?: string[] }): Promise<void> {
  const factories = await loadAgents(options.agents)
  const store = await ctx.store()
  const run = await ctx.run(runId)
  const runner = new Runner({ store, ...(ctx.out.json ? {} : { onEvent: printEvent(ctx.out) }) })
  const result = await runner.resume(await agentFor(run, factories), { runId, responses: parseResponses(options.response ?? []) })
  report(ctx, [result])
  if (result.state === 'failed') process.exitCode = 1
}

/** `cairn recover --agents ./agents.js`: resume every run a dead process left running. */
export async function recoverCommand(ctx: Context, options: { agents?: string }): Promise<void> {
  const factories = await loadAgents(options.agents)
  const store = await ctx.store()
  const runner = new Runner({ store, ...(ctx.out.json ? {} : { onEvent: printEvent(ctx.out) }) })
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

/** `cairn rekey [--sign-unsigned]`: re-seal every record under the first key of `CAIRN_KEYS`. */
export async function rekeyCommand(ctx: Context, options: { signUnsigned?: boolean }): Promise<void> {
  const store = (await ctx.store()) as CheckpointStore & { rekey?: (options: RekeyOptions) => Promise<RekeyResult> }
  if (typeof store.rekey !== 'function') throw new CliError(`${ctx.storeUrl} cannot be rekeyed: its store has no rekey()`)
  if (!ctx.keys) throw new CliError('rekey needs keys: set CAIRN_KEYS=newId:base64,oldId:base64 (the first key writes; every key listed is accepted to read)')
  const progress = ctx.out.progress('rekey')
  const result = await store.rekey({
    ...(options.signUnsigned === true ? { signUnsigned: true } : {}),
    onProgress: (p) => progress.update(p.runsDone, p.runsTotal),
  })
  progress.stop()
  ctx.out.result({ keyId: ctx.keys.writeKeyId, ...result }, () =>
    ctx.out.line(`rekeyed ${result.runs} runs under key ${ctx.keys!.writeKeyId}: ${result.checkpoints} checkpoints, ${result.items} list items and ${result.effects} effects rewritten`),
  )
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

async function loadAgents(path: string | undefined): Promise<AgentFactories> {
  if (path === undefined) throw new CliError('give the agents with --agents ./agents.js: a module exporting agent factories by name, e.g. export const agents = { researcher: () => buildAgent() }')
  let module: Record<string, unknown>
  try {
    module = (await import(pathToFileURL(resolve(path)).href)) as Record<string, unknown>
  } catch (err) {
    throw new CliError(`cannot load the agents module ${path}: ${(err as Error).message}`, { cause: err })
  }
  const record = (module.agents ?? module.default)
  const factories = typeof record === 'object' && record !== null ? (record as Record<string, unknown>) : module
  const found = Object.fromEntries(Object.entries(factories).filter(([, value]) => typeof value === 'function')) as AgentFactories
  if (Object.keys(found).length === 0) throw new CliError(`${path} exports no agent factories; export const agents = { name: () => buildAgent() }`)
  return found
}

async function agentFor(run: RunRecord, factories: AgentFactories): Promise<Agent> {
  const factory = run.name === null ? undefined : factories[run.name]
  if (!factory) throw new CliError(`run ${run.runId} is an agent named ${JSON.stringify(run.name)}, which the agents module does not export (it has ${Object.keys(factories).join(', ')})`)
  return factory()
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
  const rows = results.map((r) => ({ runId: r.runId, state: r.state, llmCalls: r.llmCalls, toolCalls: r.toolCalls, replayed: r.replayedEffectCount, error: r.error?.message ?? null, interrupts: r.interrupts.map((i) => i.id) }))
  ctx.out.result(rows, () => {
    for (const r of rows) {
      ctx.out.line(`run ${r.runId}: ${r.state}; ${r.llmCalls} model calls, ${r.toolCalls} tool calls, ${r.replayed} replayed from the journal${r.error ? `; error: ${r.error}` : ''}${r.interrupts.length ? `; waiting on ${r.interrupts.join(', ')}` : ''}`)
    }
    if (rows.length === 0) ctx.out.line('no run was left running by a dead process')
  })
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
