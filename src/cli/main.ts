#!/usr/bin/env node
/**
 * The `cairn` command: look inside any Cairn store, fork, resume and move runs, and serve the
 * local inspector. `cairn --help` lists the commands.
 */
import { readFileSync } from 'node:fs'
import { Command, Option } from 'commander'
import { CairnError, KeyRing } from '../index.js'
import { CliError, describeFailure } from './cli-error.js'
import { makeContext, type Context } from './context.js'
import { DEFAULT_STORE } from './open-store.js'
import { makeOutput } from './output.js'
import { diffCommand, effectsCommand, exportCommand, runsCommand, showCommand, verifyCommand } from './read-commands.js'
import { schedulesCommand, sendCommand, wakeCommand } from './time-commands.js'
import { forkCommand, importCommand, migrateCommand, pruneCommand, recoverCommand, rekeyCommand, resumeCommand } from './write-commands.js'

interface GlobalOptions {
  store: string
  json?: boolean
  debug?: boolean
  encrypt?: boolean
}

/** The package's version: package.json is two folders up from dist/cli/ and from src/cli/. */
const VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version

/** What `cairn resume --help` and `cairn recover --help` say about `--agents`. */
const AGENTS_HELP = `
The agents module (--agents) is a .js/.mjs file, or a .ts file when tsx is installed
(npm install -D tsx). It exports agent factories by agent name: a run is resumed with the
factory named like the agent that started it, and an Agent's name defaults to "agent".

  // agents.ts
  import { Agent } from 'cairn-agents'
  export const agents = {
    researcher: () => new Agent({ name: 'researcher', model, tools }),
    agent: () => new Agent({ model }), // an Agent given no name
  }

Named exports work too (export const researcher = () => …), as does a default export of that object.`

/** Build the command line program. */
function buildProgram(): Command {
  const program = new Command('cairn')
    .description('Inspect, fork, resume and move durable Cairn runs, in any store')
    .version(VERSION, '-v, --version', 'print the version of cairn-agents')
    .addOption(new Option('--store <url>', 'the store: sqlite:PATH, file:DIR or postgres://…?schema=NAME').env('CAIRN_STORE').default(DEFAULT_STORE))
    .option('--json', 'print JSON for scripts instead of tables')
    .option('--debug', 'print the stack of an error')
    .addOption(new Option('--encrypt', 'encrypt what is written (needs CAIRN_KEYS=id:base64,…, which also signs and verifies records)').env('CAIRN_ENCRYPT'))
    .showHelpAfterError()
  program.command('runs').description('runs, newest first').option('--status <status>', 'only runs in this status').option('--name <text>', 'only runs whose id or name contains this').option('--limit <n>', 'at most this many runs', '20').action(action(runsCommand))
  program.command('send').description('send an event to the runs waiting for it (ctx.waitForEvent)').argument('<name>', 'event name').argument('[payload]', 'the payload, as JSON').option('--match <text>', 'only waits with this match (an order id, say)').option('--key <key>', 'idempotency key: sent again with it, the event is delivered once').action(action(sendCommand))
  program.command('schedules').description('schedules that start runs on a cron').option('--pause <id>', 'pause this schedule').option('--resume <id>', 'resume this schedule').option('--delete <id>', 'delete this schedule').action(action(schedulesCommand))
  program.command('wake').description('wake a sleeping run now').argument('<run>', 'run id').action(action(wakeCommand))
  program.command('show').description("a run's timeline, one line per checkpoint").argument('[run]', 'run id').option('--payload <checkpoint>', "print one checkpoint's full payload (its id, or N from the # column)").action(action(showCommand))
  program.command('diff').description('what changed between two checkpoints (of one run, or a run and its fork)').argument('<a>', 'checkpoint id, or RUN#N').argument('<b>', 'checkpoint id, or RUN#N').action(action(diffCommand))
  program.command('effects').description("a run's effect journal").argument('<run>', 'run id').action(action(effectsCommand))
  program.command('fork').description('a new run continuing from a checkpoint, resumable with `cairn resume`').argument('<checkpoint>', 'checkpoint id, or RUN#N').option('--run-id <id>', 'id of the new run').action(action(forkCommand))
  program.command('resume').description('resume a run with agents from your module').argument('<run>', 'run id').option('--agents <module>', 'a .js or .ts module exporting agent factories by agent name').option('--response <id=json...>', 'answers to pending interrupts').addHelpText('after', AGENTS_HELP).action(action(resumeCommand))
  program.command('recover').description('resume every run a dead process left running').option('--agents <module>', 'a .js or .ts module exporting agent factories by agent name').addHelpText('after', AGENTS_HELP).action(action(recoverCommand))
  program.command('prune').description('delete old checkpoints (the latest of each run and terminal ones stay)').option('--run <run>', 'only this run').option('--keep-last <n>', 'keep this many newest checkpoints per run').option('--older-than <days>', 'only checkpoints older than this many days').action(action(pruneCommand))
  program.command('migrate').description("apply the store's schema migrations and report its versions").action(action(migrateCommand))
  program.command('verify').description('read every checkpoint back and check digests and hash chains').argument('[run]', 'only this run').action(action(verifyCommand))
  program.command('export').description('a run with its checkpoints and effects as one JSON document').argument('<run>', 'run id').action(action(exportCommand))
  program
    .command('rekey')
    .description('re-seal every record under the first key of CAIRN_KEYS (rotation), or sign an unsigned store')
    .option('--sign-unsigned', 'also sign records written before the store had keys (their digests are checked first); run it while nothing else writes')
    .option('--decrypt', 'write encrypted records in plaintext (without it, a store holding encrypted records is rekeyed only with --encrypt)')
    .addHelpText('after', '\nWith --encrypt on the command line (cairn rekey --encrypt), records stored in plaintext are encrypted; CAIRN_ENCRYPT alone keeps them as they are.')
    .action(async (options: { signUnsigned?: boolean; decrypt?: boolean }, command: Command) => {
      // Only an --encrypt typed for this command turns encryption on for stored records, not CAIRN_ENCRYPT.
      const encrypt = command.parent?.getOptionValueSource('encrypt') === 'cli'
      await withContext(command, (ctx) => rekeyCommand(ctx, { ...options, encrypt }))
    })
  program
    .command('import')
    .description('import a run document made by `cairn export`')
    .option('--file <path>', 'read it from this regular file, not standard input')
    .addOption(new Option('--max-bytes <n>', 'refuse a document larger than this many bytes (default 256 MiB)').env('CAIRN_IMPORT_MAX_BYTES'))
    .action(action(importCommand))
  program
    .command('inspect')
    .description('serve the local web inspector on 127.0.0.1 (the URL carries an access token)')
    .option('--port <port>', 'port (0: any free port)', '0')
    .option('--agents <module>', 'a module exporting agent factories by name: a run paused by a Runner resumes from the page once answered')
    .action(async (options: { port: string; agents?: string }, command: Command) => {
      // The HTTP server loads only for this command.
      const { inspectCommand } = await import('./inspect/inspect-command.js')
      await withContext(command, (ctx) => inspectCommand(ctx, options))
    })
  return program
}

/** A commander action running `handler` with a context, its arguments first. */
function action<A extends unknown[]>(handler: (ctx: Context, ...args: A) => Promise<void>): (...args: unknown[]) => Promise<void> {
  return async (...args: unknown[]) => {
    const command = args[args.length - 1] as Command
    await withContext(command, (ctx) => handler(ctx, ...(args.slice(0, -1) as A)))
  }
}

async function withContext(command: Command, run: (ctx: Context) => Promise<void>): Promise<void> {
  const globals = command.optsWithGlobals<GlobalOptions>()
  const ctx = makeContext(globals.store, makeOutput({ json: globals.json === true }), { ...keysFromEnv(), encrypt: globals.encrypt === true })
  try {
    await run(ctx)
  } finally {
    await ctx.close().catch(() => {})
  }
}

/** The key ring in `CAIRN_KEYS`, if set; a malformed one is a one-line error. */
function keysFromEnv(): { keys?: KeyRing } {
  try {
    const keys = KeyRing.fromEnv()
    return keys === undefined ? {} : { keys }
  } catch (err) {
    if (err instanceof CairnError) throw new CliError(`CAIRN_KEYS: ${err.message}`, { cause: err })
    throw err
  }
}

// A reader that stops early (`cairn show RUN | head`) closes the pipe: that is the end of the
// output, not an error.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code !== 'EPIPE') throw err
  process.exit(process.exitCode ?? 0)
})

const program = buildProgram()
try {
  await program.parseAsync(process.argv)
} catch (err) {
  const debug = program.opts<GlobalOptions>().debug === true || process.argv.includes('--debug')
  process.stderr.write(`${describeFailure(err, debug)}\n`)
  process.exitCode = 1
}
