/**
 * One measurement in its own process (so peak RSS is one system's, and resume is cold):
 * `child.ts '<ChildRequest as JSON>'`. Writes a `ChildReport` to the request's result file.
 */
import { writeFile } from 'node:fs/promises'
import { SECTIONS, type ChildReport, type ChildRequest } from './protocol.js'
import { driverFor } from './systems.js'

const request = JSON.parse(process.argv[2] ?? '{}') as ChildRequest
const driver = await driverFor(request.system)
const report: ChildReport = { system: request.system, n: request.n, phase: request.phase, maxRssBytes: 0, sections: SECTIONS }
if (request.phase === 'run') {
  Object.assign(report, await driver.run(request))
} else {
  if (!driver.resume) throw new Error(`${request.system} has nothing to resume`)
  report.resume = await driver.resume(request)
}
report.maxRssBytes = process.resourceUsage().maxRSS * 1024
await writeFile(request.resultFile, `${JSON.stringify(report)}\n`)
// Drivers close what they open; exit anyway so a library's stray timer cannot hold the process.
process.exit(0)
