/**
 * A reader process of the read race test: reads the run until the stop file appears, then prints
 * its tally as one JSON line. Arguments: the JSON `RaceTarget`, the run id, the directory of the stop file.
 */
import { openRaceStore, readUntil, stopped, type RaceTarget } from './read-race.js'

const [target, runId, dir] = process.argv.slice(2)
const store = openRaceStore(JSON.parse(target!) as RaceTarget)
console.log('reading')
const deadline = Date.now() + 60_000
const tally = await readUntil(store, runId!, () => stopped(dir!) || Date.now() > deadline)
await store.close()
console.log(JSON.stringify(tally))
