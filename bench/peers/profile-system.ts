/**
 * A CPU profile of one system's measured run, summarized: where its time went, by function and by
 * whose code. `npx tsx bench/peers/profile-system.ts langgraph-cairn-sqlite 200` (the system id and n;
 * `PROFILE_DIR=dir` keeps the profile).
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { summarizeProfile } from './cpu-profile.js'
import { remeasure } from './measure.js'
import { ensureDatabases, postgresProblem } from './pg-admin.js'
import { specOf } from './systems.js'

const [system = 'langgraph-cairn-sqlite', size = '200'] = process.argv.slice(2)
const spec = specOf(system)
if (spec.backend === 'postgres') {
  const problem = await postgresProblem()
  if (problem) throw new Error(problem)
  await ensureDatabases()
}
// PROFILE_DIR keeps the .cpuprofile there (for Chrome's DevTools); a temporary directory otherwise.
const kept = process.env.PROFILE_DIR
const directory = kept ?? (await mkdtemp(join(tmpdir(), 'cairn-peers-cpuprofile-')))
try {
  const report = await remeasure(spec, Number(size), 'run', { nodeFlags: ['--cpu-prof', '--cpu-prof-dir', directory, '--cpu-prof-interval', '250'] })
  const window = report.sections.run
  if (!window) throw new Error('the run reported no measured section')
  const profile = await summarizeProfile(directory, window, 25)
  console.log(`${spec.label} at n = ${size}: run ${report.run?.wallMs.toFixed(0)} ms, cpu ${report.run?.cpuMs?.toFixed(0)} ms, sampled ${profile.sampledMs.toFixed(0)} ms`)
  for (const entry of profile.byGroup) console.log(`  group ${entry.name.padEnd(50)} ${entry.ms.toFixed(0).padStart(7)} ms  ${(entry.share * 100).toFixed(1)}%`)
  for (const entry of profile.byFunction) console.log(`  ${entry.name.padEnd(70)} ${entry.ms.toFixed(0).padStart(7)} ms  ${(entry.share * 100).toFixed(1)}%`)
} finally {
  if (!kept) await rm(directory, { recursive: true, force: true })
}
