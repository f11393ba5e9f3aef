/**
 * What signing and encryption cost: `npm run bench:trust`. The workloads of bench:store (a run
 * of n checkpoints, one message added per step) and bench:runner (200 tool cycles under a Runner,
 * sync and async durability) on SQLite and the file store, each with no keys, with signing
 * (`keys`) and with signing and encryption (`keys`, `encrypt: true`). Variants interleave within
 * every trial; the table shows medians and the ratio to the same workload without keys.
 * Results go to stdout and `bench/results/trust.json`; progress to stderr.
 */
import { mkdir, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { arch, cpus, platform, release } from 'node:os'
import { FileStore, MemoryStore, type EngineStoreOptions } from '../src/index.js'
import { SqliteStore } from '../src/sqlite.js'
import type { BenchBackend } from './backends.js'
import { directoryBytes, sqliteBytes } from './disk-usage.js'
import { formatNumber, formatTable } from './format-table.js'
import { runLoop } from './runner-workload.js'
import { median } from './stats.js'
import { runStoreWorkload, warmUpStore } from './store-workload.js'

const N = Number(process.env.CAIRN_BENCH_N ?? 200)
const CYCLES = 200
const TRIALS = Number(process.env.CAIRN_BENCH_TRIALS ?? 5)
const KEYS = [{ id: 'bench', secret: Buffer.alloc(32, 5).toString('base64') }]
const VARIANTS: readonly { name: string; options: EngineStoreOptions }[] = [
  { name: 'no keys', options: {} },
  { name: 'signed', options: { keys: KEYS } },
  { name: 'signed+encrypted', options: { keys: KEYS, encrypt: true } },
]
const RESULTS_FILE = new URL('./results/trust.json', import.meta.url)

function backendsOf(options: EngineStoreOptions, variant: string): BenchBackend[] {
  return [
    {
      // No I/O: the ratio is the whole CPU cost of sealing, the worst case.
      name: `memory, ${variant}`,
      persistent: false,
      open: () => new MemoryStore(options),
      openEngine: () => {
        throw new Error('not used')
      },
      diskBytes: async () => undefined,
    },
    {
      name: `sqlite, ${variant}`,
      persistent: true,
      open: (location) => new SqliteStore({ path: join(location, 'cairn.db'), ...options }),
      openEngine: () => {
        throw new Error('not used')
      },
      diskBytes: (location) => sqliteBytes(join(location, 'cairn.db')),
    },
    {
      name: `file, ${variant}`,
      persistent: true,
      open: (location) => new FileStore({ directory: join(location, 'store'), ...options }),
      openEngine: () => {
        throw new Error('not used')
      },
      diskBytes: (location) => directoryBytes(join(location, 'store')),
    },
  ]
}

const storeSamples = new Map<string, { saves: number[]; coldReads: number[]; bytes: number[] }>()
const loopSamples = new Map<string, number[]>()
progress('warming up')
for (const variant of VARIANTS) for (const backend of backendsOf(variant.options, variant.name)) await warmUpStore(backend, 100)
for (const variant of VARIANTS) await runLoop('sync', 20, { store: variant.options })

for (let trial = 0; trial < TRIALS; trial++) {
  progress(`trial ${trial + 1}/${TRIALS}`)
  const order = VARIANTS.map((_, i) => VARIANTS[(i + trial) % VARIANTS.length]!)
  for (const variant of order) {
    for (const backend of backendsOf(variant.options, variant.name)) {
      const result = await runStoreWorkload(backend, N)
      const samples = storeSamples.get(backend.name) ?? { saves: [], coldReads: [], bytes: [] }
      samples.saves.push(...result.saves)
      samples.coldReads.push(...result.coldReads)
      samples.bytes.push(result.bytesClosed ?? 0)
      storeSamples.set(backend.name, samples)
    }
    for (const mode of ['sync', 'async'] as const) {
      const loop = await runLoop(mode, CYCLES, { store: variant.options })
      const key = `runner ${mode}, ${variant.name}`
      loopSamples.set(key, [...(loopSamples.get(key) ?? []), loop.micros / loop.checkpoints])
    }
  }
}

const storeRows = [...storeSamples].map(([name, s]) => {
  const base = storeSamples.get(name.replace(/, .*$/, ', no keys'))!
  const save = median(s.saves)
  return [name, formatNumber(save, 1), `${formatNumber(save / median(base.saves), 2)}×`, formatNumber(median(s.coldReads), 0), `${formatNumber(median(s.coldReads) / median(base.coldReads), 2)}×`, formatNumber(median(s.bytes) / 1024, 0)]
})
const loopRows = [...loopSamples].map(([name, samples]) => {
  const base = loopSamples.get(name.replace(/, [^,]*$/, ', no keys'))!
  return [name, formatNumber(median(samples), 1), `${formatNumber(median(samples) / median(base), 2)}×`]
})
console.log(`\nCairn signing and encryption cost: medians of ${TRIALS} interleaved trials\n`)
console.log(`Store (bench:store workload, n=${N} checkpoints, one message added per step)`)
console.log(
  formatTable(
    [{ header: 'backend, keys', align: 'left' }, { header: 'save µs' }, { header: 'vs no keys' }, { header: 'cold getLatest µs' }, { header: 'vs no keys' }, { header: 'KiB on disk' }],
    storeRows,
  ),
)
console.log(`\nRunner (bench:runner workload, ${CYCLES} tool cycles on SQLite): wall time per checkpoint written`)
console.log(formatTable([{ header: 'durability, keys', align: 'left' }, { header: 'µs/checkpoint' }, { header: 'vs no keys' }], loopRows))

await mkdir(new URL('./', RESULTS_FILE), { recursive: true })
const report = {
  environment: { node: process.version, os: `${platform()} ${release()} ${arch()}`, cpu: cpus()[0]?.model ?? 'unknown', cpus: cpus().length, date: new Date().toISOString() },
  config: { n: N, cycles: CYCLES, trials: TRIALS },
  store: Object.fromEntries([...storeSamples].map(([name, s]) => [name, { saveMedianUs: median(s.saves), coldReadMedianUs: median(s.coldReads), bytesClosed: median(s.bytes) }])),
  runner: Object.fromEntries([...loopSamples].map(([name, samples]) => [name, { microsPerCheckpoint: median(samples) }])),
}
await writeFile(RESULTS_FILE, `${JSON.stringify(report, null, 2)}\n`)
console.log(`\nwrote ${RESULTS_FILE.pathname}`)

function progress(message: string): void {
  process.stderr.write(`[bench:trust] ${message}\n`)
}
