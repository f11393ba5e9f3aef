/**
 * `npm run fuzz`: feed mutated inputs to every decoding surface and print a table of outcomes.
 *
 *   npm run fuzz                  # 10,000 inputs per surface
 *   npm run fuzz -- --runs 500    # fewer
 *   npm run fuzz -- --only sqlite # surfaces whose name contains the word
 *
 * Postgres is the server in DATABASE_URL, else postgresql://postgres@127.0.0.1:5432/test; when
 * none answers, its surface is skipped, saying so.
 */
import pg from 'pg'
import { fuzzStoreSurface, fuzzValueSurface } from './fuzz.js'
import { formatTable, type SurfaceReport } from './outcomes.js'
import { fileSurface, postgresSurface, sqliteSurface } from './store-surfaces.js'
import { valueSurfaces } from './value-surfaces.js'

const args = process.argv.slice(2)
const flag = (name: string): string | undefined => {
  const at = args.indexOf(`--${name}`)
  return at < 0 ? undefined : args[at + 1]
}
const runs = Number(flag('runs') ?? 10_000)
const seed = Number(flag('seed') ?? 42)
const only = flag('only')?.toLowerCase()
const wanted = (name: string) => only === undefined || name.toLowerCase().includes(only)

async function postgresUrl(): Promise<string | undefined> {
  const url = process.env.DATABASE_URL || 'postgresql://postgres@127.0.0.1:5432/test'
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 })
  try {
    await client.connect()
    await client.end()
    return url
  } catch {
    return undefined
  }
}

// Listing warns about each unreadable checkpoint it skips; thousands of edited rows would bury the table.
process.emitWarning = () => undefined

const reports: SurfaceReport[] = []
const started = Date.now()
const progress = (r: SurfaceReport) => {
  reports.push(r)
  process.stderr.write(`${r.surface}: ${r.inputs} inputs in ${(r.ms / 1000).toFixed(1)} s\n`)
}
for (const surface of await valueSurfaces()) if (wanted(surface.name)) progress(await fuzzValueSurface(surface, { runs, seed }))
const stores = [['SQLite rows', sqliteSurface], ['file store files', fileSurface]] as const
for (const [name, open] of stores) if (wanted(name)) progress(await fuzzStoreSurface(await open(), { runs, seed }))
if (wanted('Postgres rows')) {
  const url = await postgresUrl()
  if (url) progress(await fuzzStoreSurface(await postgresSurface(url), { runs, seed }))
  else process.stderr.write('Postgres rows: skipped, no server answers (set DATABASE_URL)\n')
}

console.log(formatTable(reports))
console.log(`\n${runs} inputs per surface, seed ${seed}, ${((Date.now() - started) / 1000).toFixed(0)} s in all`)
const bad = reports.filter((r) => r.counts.untyped + r.counts.hang + r.counts.polluted > 0)
for (const r of reports) for (const [outcome, example] of Object.entries(r.examples)) console.log(`${r.surface} — first ${outcome}: ${example}`)
for (const r of reports.filter((x) => x.counts.changed > 0)) {
  const places = Object.entries(r.changedAt).sort((a, b) => b[1] - a[1])
  console.log(`${r.surface} — changed, by place edited: ${places.map(([where, n]) => `${where} ${n}`).join(', ')}`)
}
console.log(
  '\naccepted: read without error (a caller-held checkpoint or codec text carries no integrity check; for a store, the edit changed nothing any read returns)\n' +
    'typed: refused with a CairnError\nchanged: a store read returned edited data without error (records with no digest when the store has no keys)\n' +
    'untyped: TypeError, RangeError or another error that is not a CairnError\nhang: no answer in 20 s\npolluted: a built-in prototype was modified',
)
process.exitCode = bad.length > 0 ? 1 : 0
