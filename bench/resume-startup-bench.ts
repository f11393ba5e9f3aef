/**
 * Start-up of a resumed run: how long a fresh `node` process, on the built package (`dist/`, the
 * path a user's app takes), needs from its start to the first model call of a run it resumes
 * after a crash, beside Node's own start-up.
 *
 *   npm run build && npm run bench:startup              # 15 trials
 *   npm run bench:startup -- --trials 25 --profile      # plus where a resume's time goes
 *
 * The run is prepared once: a process runs 20 cycles with `sync` durability, stalls in its next
 * model call and is killed with SIGKILL. Each trial resumes a fresh copy of that database file in
 * a new process (bench/startup/resume.mjs), which reports, on Node's clock (0 = process start),
 * when its imports were done, when the store was open and when the model was first called.
 */
import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { copyFile, mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import Database from 'better-sqlite3'
import { summarizeProfile } from './peers/cpu-profile.js'
import { median } from './stats.js'

const HERE = fileURLToPath(new URL('./startup/', import.meta.url))
const DIST = fileURLToPath(new URL('../dist/index.js', import.meta.url))
const STALL_AT = 20
/** Node's bare start-up: when user code starts, on Node's clock, and the CPU time used by then. */
const BARE = 'const c = process.cpuUsage(); process.stdout.write(JSON.stringify([performance.now(), (c.user + c.system) / 1000]))'

interface ResumeFigures {
  importedMs: number
  openMs: number
  firstCallMs: number
  firstCallCpuMs: number
  window: [number, number]
}

async function main(): Promise<void> {
  if (!existsSync(DIST)) throw new Error('dist/ is missing: run `npm run build` first (the bench measures the built package)')
  const at = process.argv.indexOf('--trials')
  const trials = at === -1 ? 15 : Number(process.argv[at + 1])
  const root = await mkdtemp(join(tmpdir(), 'cairn-startup-'))
  try {
    const prepared = join(root, 'prepared.db')
    await prepare(prepared)
    const bare: number[] = []
    const bareUser: number[] = []
    const bareCpu: number[] = []
    const figures: ResumeFigures[] = []
    const wall: number[] = []
    for (let t = 0; t < trials; t++) {
      const start = performance.now()
      const [userCodeMs, cpuMs] = JSON.parse(await output(['-e', BARE])) as [number, number]
      bareUser.push(userCodeMs)
      bareCpu.push(cpuMs)
      bare.push(performance.now() - start)
      const copy = join(root, `trial-${t}.db`)
      await copyFile(prepared, copy)
      const resumeStart = performance.now()
      figures.push(JSON.parse(await output([join(HERE, 'resume.mjs'), copy])) as ResumeFigures)
      wall.push(performance.now() - resumeStart)
    }
    const row = (label: string, values: number[]) => console.log(`${label.padEnd(62)} ${median(values).toFixed(1).padStart(7)} ms  (min ${Math.min(...values).toFixed(1)}, max ${Math.max(...values).toFixed(1)})`)
    console.log(`resume start-up on dist/, node ${process.version}, median of ${trials}`)
    row("node -e '': spawn to exit", bare)
    row("node -e '': process start to user code (performance.now())", bareUser)
    row('resume: process start to imports done (cairn, cairn/sqlite)', figures.map((f) => f.importedMs))
    row('resume: process start to store open', figures.map((f) => f.openMs))
    row('resume: process start to first model call', figures.map((f) => f.firstCallMs))
    row('resume: first model call minus node start to user code', figures.map((f, i) => f.firstCallMs - bareUser[i]!))
    row("CPU time: node -e '' at user code", bareCpu)
    row('CPU time: resume at its first model call', figures.map((f) => f.firstCallCpuMs))
    row('CPU time: resume at first model call minus node at user code', figures.map((f, i) => f.firstCallCpuMs - bareCpu[i]!))
    row('resume: spawn to exit (the whole resumed run, 20 more cycles)', wall)
    if (process.argv.includes('--profile')) await profile(prepared, root)
  } finally {
    await rm(root, { recursive: true, force: true })
  }
}

/** Run 20 cycles, stall in the next model call, and kill the process there with SIGKILL. */
async function prepare(path: string): Promise<void> {
  const child = spawn(process.execPath, [join(HERE, 'prepare.mjs'), path, String(STALL_AT)], { stdio: ['ignore', 'pipe', 'inherit'] })
  await new Promise<void>((resolve, reject) => {
    child.on('exit', (code, signal) => reject(new Error(`the preparing process ended (${signal ?? code}) before it stalled`)))
    child.stdout.on('data', (chunk: Buffer) => {
      if (chunk.toString().includes('stalled')) resolve()
    })
  })
  const exited = new Promise((resolve) => child.once('exit', resolve))
  child.kill('SIGKILL')
  await exited
  // Opening and closing the file folds the killed writer's WAL into it: one file to copy.
  new Database(path).close()
}

async function profile(prepared: string, root: string): Promise<void> {
  const directory = join(root, 'profile')
  const copy = join(root, 'profiled.db')
  await copyFile(prepared, copy)
  const figures = JSON.parse(await output(['--cpu-prof', '--cpu-prof-interval', '100', '--cpu-prof-dir', directory, join(HERE, 'resume.mjs'), copy])) as ResumeFigures
  const summary = await summarizeProfile(directory, [0, Number.MAX_SAFE_INTEGER], 15)
  console.log(`\none profiled resume (first model call at ${figures.firstCallMs.toFixed(1)} ms), self time by function:`)
  for (const entry of summary.byFunction) console.log(`  ${entry.ms.toFixed(1).padStart(7)} ms  ${entry.name}`)
  console.log('by group:')
  for (const entry of summary.byGroup) console.log(`  ${entry.ms.toFixed(1).padStart(7)} ms  ${entry.name}`)
  const resume = await summarizeProfile(directory, figures.window, 15)
  console.log(`\nfrom store open to first model call (${resume.sectionMs.toFixed(1)} ms), self time by function:`)
  for (const entry of resume.byFunction) console.log(`  ${entry.ms.toFixed(1).padStart(7)} ms  ${entry.name}`)
}

/** Run `node` with `args` and return what it printed. */
function output(args: readonly string[]): Promise<string> {
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] })
  let text = ''
  child.stdout.on('data', (chunk: Buffer) => (text += chunk.toString()))
  return new Promise((resolve, reject) => {
    child.on('error', reject)
    child.on('exit', (code) => (code === 0 ? resolve(text) : reject(new Error(`node ${args.join(' ')} exited with code ${code}`))))
  })
}

await main()
