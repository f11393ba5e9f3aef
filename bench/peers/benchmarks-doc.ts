/** docs/benchmarks.md, written from one run's results. */
import { formatBytes } from '../format-table.js'
import type { ProfileSummary } from './cpu-profile.js'
import type { Environment } from './environment.js'
import { asMarkdown, ratioTable, resultTable } from './report.js'
import type { Ratio, Row } from './summarize.js'
import { STORAGE_N, type TargetCheck } from './targets.js'
import { HISTORY_BUDGET_MS } from './protocol.js'

/** A missed target's measured explanation. */
export interface Explanation {
  target: string
  system: string
  n: number
  section: 'run' | 'load' | 'history'
  profile: ProfileSummary | null
  /** Wall and CPU of the profiled run, and the time inside each store method, when measured. */
  wallMs: number | null
  cpuMs: number | null
  storeCalls: Record<string, { calls: number; ms: number }> | null
  error?: string
}

/** Everything the doc is written from. */
export interface DocInput {
  environment: Environment
  sizes: readonly number[]
  rows: readonly Row[]
  ratios: readonly Ratio[]
  targets: readonly TargetCheck[]
  explanations: readonly Explanation[]
  elapsedMs: number
  plotFile: string
  notes: readonly string[]
}

/** The Markdown of docs/benchmarks.md. */
export function benchmarksDoc(input: DocInput): string {
  const { environment: env, sizes } = input
  const out: string[] = []
  out.push('# Benchmarks: Cairn and its peers, side by side')
  out.push('')
  out.push(
    'What durability costs, measured in one run on one machine: Cairn, LangGraph.js and DBOS Transact run the same agent loop, ' +
      'each with its own idiomatic persistence, and each against the same loop with no persistence at all. ' +
      'This file is written by `npm run bench:peers`; every figure below comes from the run described under [Machine and versions](#machine-and-versions).',
  )
  out.push('')
  out.push('## Reproduce')
  out.push('')
  out.push('```sh')
  out.push('npm ci                 # Cairn and its dev dependencies')
  out.push('npm run bench:peers    # installs bench/peers (its own lockfile), runs everything, rewrites this file')
  out.push('```')
  out.push('')
  out.push(
    `It needs Node ≥ 20 and a PostgreSQL server at \`127.0.0.1:5432\` (user \`postgres\`, trust auth; set \`PEERS_PG_URL\` for another), where it creates ` +
      '`cairn_bench_cairn`, `cairn_bench_langgraph` and `cairn_bench_dbos`, one database per system, and one schema per run that it drops afterwards. ' +
      `Without Postgres the Postgres rows are reported as not measured. The peers are not dependencies of Cairn: they live in \`bench/peers/package.json\`. ` +
      `This run took ${(input.elapsedMs / 60000).toFixed(1)} minutes. Results: \`bench/results/peers.json\`.`,
  )
  out.push('')
  out.push('## The workload')
  out.push('')
  out.push(
    'An agent loop of **n cycles** (n = ' +
      sizes.join(', ') +
      '): each cycle a model step that appends a ~1 KB assistant message asking for one tool call, and a tool step that appends a ~1 KB result; ' +
      'then a closing model call that ends the turn — **2n + 1 steps**, 2n + 2 messages with the prompt. There is no real model: every system’s model step returns the same deterministic text, so what differs is the runtime and its persistence.',
  )
  out.push('')
  out.push('| system | how it runs the loop | persistence |')
  out.push('| :--- | :--- | :--- |')
  out.push('| Cairn | the real `Runner` driving the real `Agent` (a `Model` that streams the reply, a `tool()` declared `idempotent`) | `MemoryStore`, `FileStore`, `SqliteStore`, `PostgresStore`, each with `durability: \'async\'` (default) and `\'sync\'` |')
  out.push('| Cairn baseline | the same `Agent`, `agent.invoke()`, checkpointing off | none |')
  out.push('| LangGraph.js | a `StateGraph` with a messages field (`MessagesValue`), a model node and a prebuilt `ToolNode`, default durability (`async`) | `MemorySaver`, `SqliteSaver`, `PostgresSaver` |')
  out.push('| LangGraph + delta channel | the same graph with `MessagesDeltaValue` (a `DeltaChannel`: each step writes only its new messages, with a full snapshot every 1,000 updates) | `SqliteSaver`, `PostgresSaver` |')
  out.push('| LangGraph baseline | the same graph compiled without a checkpointer | none |')
  out.push('| DBOS Transact | a registered workflow whose model and tool steps are `DBOS.runStep` calls | DBOS system database (Postgres) |')
  out.push('| DBOS baseline | the same loop calling the same step functions, no DBOS | none |')
  out.push('')
  out.push('## What is measured')
  out.push('')
  out.push('Each system runs in its own child process per n (after an untimed 20-cycle warm-up run on a throwaway store, so JIT warm-up is not counted); the loading and listing run in a second, fresh process.')
  out.push('')
  out.push('- **wall**: the run itself, with the store or saver already open and set up.')
  out.push('- **added µs/step**: (wall − the same family’s no-persistence wall at the same n) ÷ (2n + 1). What persistence adds to each step.')
  out.push('- **cycle ms first→last**: mean time of a cycle over the first and the last tenth of the run. A cost that grows along the run shows here.')
  out.push('- **stored**: bytes on disk right after the run with the writer still open (SQLite: the database plus its `-wal` and `-shm` files; FileStore: the whole directory; Postgres: `pg_total_relation_size` of every table of the run’s schema: heap, TOAST and indexes). **closed**: the same after the writer closed (SQLite then folds the WAL into the database).')
  out.push('- **checkpoints**: the checkpoint rows the run left (Cairn: stored checkpoints, whose phase logs hold the other phases; LangGraph: checkpoints; DBOS: steps). **rows written per step**: that ÷ the run’s 2n + 1 steps.')
  out.push('- **cold load**: in a fresh process, open the store and load the run’s latest state with its full message list — Cairn: `store.openRun`, the read path of `runner.resume`, which returns the run, its latest checkpoint, the newest runtime snapshot that checkpoint rests on, and the effects of the calls under way (at most two reads of the backend); LangGraph: `graph.getState()`; DBOS: `DBOS.launch()` plus `DBOS.listWorkflowSteps()`, from whose outputs the conversation is rebuilt (DBOS’s own recovery replays the workflow function instead). In-memory stores are loaded in the writer’s process (marked). Each system’s database driver module is loaded before the timer starts (the peers load theirs when they are imported; Cairn’s PostgresStore on first use).')
  out.push(`- **history (full states)**: list the run’s whole checkpoint history with its states — Cairn \`runner.history()\`, LangGraph \`getStateHistory()\` iterated to the end (stopped after ${HISTORY_BUDGET_MS / 1000} s, then shown as “> t”, a lower bound), DBOS \`listWorkflowSteps()\`. **listing (headers)**: Cairn \`store.listCheckpoints()\` paged to the end (ids, phases, steps, metadata; LangGraph has no listing without states).`)
  out.push('- **peak RSS**: `process.resourceUsage().maxRSS` of the process that ran the workload, and of the one that loaded it back (Node + tsx + the system’s modules + the run).')
  out.push('- **ratios**: peer ÷ Cairn for every figure, from the same run: above 1× Cairn is smaller or faster, below 1× the peer is.')
  out.push('')
  out.push('## Results')
  out.push('')
  out.push(`![Bytes stored against n, per system](${input.plotFile})`)
  out.push('')
  for (const n of sizes) {
    out.push(`### n = ${n.toLocaleString('en-US')} (${2 * n + 1} steps)`)
    out.push('')
    out.push(asMarkdown(resultTable(input.rows, n)))
    out.push('')
    const ratios = ratioTable(input.ratios, n)
    if (ratios.rows.length > 0) {
      out.push(`Cairn against its peers at n = ${n.toLocaleString('en-US')} (peer ÷ Cairn):`)
      out.push('')
      out.push(asMarkdown(ratios))
      out.push('')
    }
  }
  out.push('## Targets')
  out.push('')
  out.push('| target | result |')
  out.push('| :--- | :--- |')
  for (const t of input.targets) out.push(`| ${t.target} | ${verdict(t.pass)} |`)
  out.push('')
  for (const t of input.targets) {
    out.push(`### ${verdict(t.pass)}: ${t.target}`)
    out.push('')
    for (const line of t.evidence) out.push(`- ${line}`)
    out.push('')
    if (t.pass === false) out.push(...explain(t, input))
  }
  if (input.notes.length > 0) {
    out.push('## Not measured, and caveats')
    out.push('')
    for (const note of input.notes) out.push(`- ${note}`)
    out.push('')
  }
  out.push('## Machine and versions')
  out.push('')
  out.push(`- Date: ${env.date}`)
  out.push(`- Machine: ${env.cpu}, ${env.cores} cores, ${env.memoryGiB} GiB; ${env.os}`)
  out.push(`- Load average (1 min) when the run started: ${env.loadAverageAtStart.toFixed(2)} — the machine was not otherwise idle when this is well above 0`)
  out.push(`- Node ${env.node}`)
  out.push(`- PostgreSQL: ${env.postgres ?? 'not reachable'}${Object.keys(env.postgresSettings).length > 0 ? ` (${Object.entries(env.postgresSettings).map(([k, v]) => `${k} = ${v}`).join(', ')})` : ''}`)
  out.push(`- Cairn ${env.cairn.version}, commit ${env.cairn.commit}`)
  for (const [name, version] of Object.entries(env.versions)) out.push(`- ${name} ${version}`)
  out.push('')
  return `${out.join('\n')}\n`
}

function verdict(pass: boolean | null): string {
  return pass === true ? 'met' : pass === false ? 'missed' : 'not determined'
}

/** The measured reasons under a missed target: storage by table, or where the time went. */
function explain(t: TargetCheck, input: DocInput): string[] {
  const out: string[] = []
  if (t.id.startsWith('storage')) {
    for (const system of ['cairn-sqlite-async', 'cairn-sqlite-sync']) {
      const row = input.rows.find((r) => r.system === system && r.n === STORAGE_N)
      if (!row?.storage) continue
      const total = Object.values(row.storage).reduce((a, b) => a + b, 0)
      out.push(`Where ${row.label}’s ${formatBytes(total)} of database pages go at n = ${STORAGE_N} (SQLite \`dbstat\`, writer open; ${row.checkpoints ?? '?'} checkpoints, ${2 * row.n + 2} messages of ~1 KB):`)
      out.push('')
      out.push('| table or index | bytes | share |')
      out.push('| :--- | ---: | ---: |')
      for (const [name, bytes] of Object.entries(row.storage)) out.push(`| ${name} | ${formatBytes(bytes)} | ${((bytes / total) * 100).toFixed(1)}% |`)
      out.push('')
    }
    return out
  }
  const explanation = input.explanations.find((e) => e.target === t.id)
  if (!explanation) return out
  if (explanation.error) return [`The profile of ${explanation.system} at n = ${explanation.n} could not be taken: ${explanation.error}`, '']
  const what = explanation.section === 'run' ? 'run' : explanation.section === 'load' ? 'cold load' : 'history listing'
  if (explanation.wallMs !== null && explanation.cpuMs !== null) {
    out.push(
      `Where the time goes: a CPU profile of ${explanation.system} at n = ${explanation.n} (its own child process, sampled every 250 µs, cut to the ${what}). ` +
        `The run took ${explanation.wallMs.toFixed(0)} ms wall and ${explanation.cpuMs.toFixed(0)} ms CPU: ${explanation.cpuMs >= explanation.wallMs * 0.8 ? 'it is CPU-bound, not waiting on the disk' : 'much of it waits on I/O'}.`,
    )
  } else {
    out.push(`Where the time goes: a CPU profile of ${explanation.system} at n = ${explanation.n}, cut to the ${what}.`)
  }
  out.push('')
  if (explanation.storeCalls) {
    out.push('Time inside the store’s methods during the run (the background writer’s too; calls overlap the loop in async mode):')
    out.push('')
    out.push('| store method | calls | ms |')
    out.push('| :--- | ---: | ---: |')
    for (const [name, c] of Object.entries(explanation.storeCalls).sort((a, b) => b[1].ms - a[1].ms)) out.push(`| ${name} | ${c.calls} | ${c.ms.toFixed(1)} |`)
    out.push('')
  }
  const profile = explanation.profile
  if (profile) {
    out.push(`By whose code (self time, ${profile.sampledMs.toFixed(0)} ms sampled of ${profile.sectionMs.toFixed(0)} ms):`)
    out.push('')
    out.push('| code | ms | share |')
    out.push('| :--- | ---: | ---: |')
    for (const g of profile.byGroup) out.push(`| ${g.name} | ${g.ms.toFixed(1)} | ${(g.share * 100).toFixed(1)}% |`)
    out.push('')
    out.push('Top functions by self time:')
    out.push('')
    out.push('| function (file) | ms | share |')
    out.push('| :--- | ---: | ---: |')
    for (const f of profile.byFunction) out.push(`| ${f.name.replace(/\|/g, '\\|')} | ${f.ms.toFixed(1)} | ${(f.share * 100).toFixed(1)}% |`)
    out.push('')
  }
  return out
}
