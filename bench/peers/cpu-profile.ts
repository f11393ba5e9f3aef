/** Read a V8 `.cpuprofile` and say where the time of one measured section went. */
import { readdir, readFile } from 'node:fs/promises'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'

/** Self time of one function, or of one group of code. */
export interface ProfileEntry {
  name: string
  ms: number
  share: number
}

/** Where a section's time went: by function, and grouped by whose code it is. */
export interface ProfileSummary {
  sectionMs: number
  sampledMs: number
  byFunction: ProfileEntry[]
  byGroup: ProfileEntry[]
}

interface CpuProfile {
  nodes: { id: number; callFrame: { functionName: string; url: string }; children?: number[] }[]
  startTime: number
  samples: number[]
  timeDeltas: number[]
}

const REPO = fileURLToPath(new URL('../..', import.meta.url))

/**
 * Summarize the one profile in `directory`, counting only samples inside `window` (monotonic
 * microseconds, as `process.hrtime` reads them; V8 stamps samples on the same clock).
 */
export async function summarizeProfile(directory: string, window: [number, number], top = 12): Promise<ProfileSummary> {
  const file = (await readdir(directory)).find((name) => name.endsWith('.cpuprofile'))
  if (!file) throw new Error(`no .cpuprofile in ${directory}`)
  const profile = JSON.parse(await readFile(join(directory, file), 'utf8')) as CpuProfile
  const nodes = new Map(profile.nodes.map((node) => [node.id, node]))
  const byFunction = new Map<string, number>()
  const byGroup = new Map<string, number>()
  let at = profile.startTime
  let sampled = 0
  for (let i = 0; i < profile.samples.length; i++) {
    at += profile.timeDeltas[i] ?? 0
    const duration = profile.timeDeltas[i + 1] ?? 0
    if (at < window[0] || at > window[1]) continue
    const node = nodes.get(profile.samples[i] ?? -1)
    if (!node) continue
    const frame = node.callFrame
    const name = `${frame.functionName || '(anonymous)'} ${where(frame.url)}`.trim()
    byFunction.set(name, (byFunction.get(name) ?? 0) + duration)
    const group = groupOf(frame.functionName, frame.url)
    byGroup.set(group, (byGroup.get(group) ?? 0) + duration)
    sampled += duration
  }
  const entries = (map: Map<string, number>) =>
    [...map.entries()]
      .map(([name, micros]) => ({ name, ms: micros / 1000, share: sampled > 0 ? micros / sampled : 0 }))
      .sort((a, b) => b.ms - a.ms)
  return { sectionMs: (window[1] - window[0]) / 1000, sampledMs: sampled / 1000, byFunction: entries(byFunction).slice(0, top), byGroup: entries(byGroup) }
}

/** The file of a frame, relative to the repository (line numbers of transpiled TypeScript would mislead). */
function where(url: string): string {
  if (!url) return ''
  const path = url.startsWith('file://') ? relative(REPO, fileURLToPath(url)) : url
  return `(${path.replace(/^(bench\/peers\/)?node_modules\//, '')})`
}

/** Whose code a frame is: waiting, GC, Cairn, a peer library, a driver, or Node itself. */
function groupOf(functionName: string, url: string): string {
  if (functionName === '(idle)') return 'idle (waiting on I/O)'
  if (functionName === '(garbage collector)') return 'garbage collector'
  if (functionName === '(program)') return 'V8/native, unattributed'
  if (url.includes('/better-sqlite3/')) return 'better-sqlite3 (SQLite calls)'
  if (url.includes('/node_modules/pg') || url.includes('/pg-protocol/') || url.includes('/pg-pool/')) return 'pg driver'
  if (url.includes('/@langchain/')) return 'LangGraph / LangChain'
  if (url.includes('/@dbos-inc/')) return 'DBOS'
  const path = url.startsWith('file://') ? relative(REPO, fileURLToPath(url)) : ''
  if (path.startsWith('src/')) return 'Cairn (src/)'
  if (path.startsWith('bench/') && !path.includes('node_modules')) return 'bench workload'
  if (url.startsWith('node:') || url === '') return 'Node built-ins (JSON, crypto, fs, …)'
  return 'other'
}
