import { ownerProcessIsGone } from '../runner/run-ownership.js'
import { CLAIMABLE_STATUSES } from '../store/engine/lease-engine.js'
import type { ClaimedLease, RunLeases } from '../store/leases/run-leases.js'
import { jobOf } from './job.js'
import type { WorkerStore } from './worker-store.js'

/** How many runs of each claimable status one look for dead local owners reads at most. */
const SCAN_LIMIT = 200

/** What {@link takeOverDeadLocalOwners} needs. */
export interface DeadOwnerScan {
  store: WorkerStore
  leases: RunLeases
  /** The worker taking the runs over. */
  owner: string
  leaseMs: number
  /** At most this many runs. */
  limit: number
  /** Only runs of these queues; every queue when absent. */
  queues: readonly string[] | undefined
}

/**
 * Take over enqueued runs whose holder is a process on this machine that no longer exists (a
 * worker or a `Runner` killed here), at once rather than after its lease lapses, as a `Runner`
 * takes over a dead local owner. Each takeover is a compare-and-set on the dead holder's owner and
 * epoch, so a holder that is alive, or a run another worker took first, is left alone; it counts
 * one more recovery of the run, as a claim after a lapse does. Holders on other machines cannot
 * be checked from here: their runs wait for their leases to lapse.
 */
export async function takeOverDeadLocalOwners(scan: DeadOwnerScan): Promise<ClaimedLease[]> {
  // A held run is `queued` until its holder's runner marks it `running`: both are looked at.
  const held = (await Promise.all(CLAIMABLE_STATUSES.map((status) => scan.store.listRuns({ status, limit: SCAN_LIMIT })))).flat()
  const taken: ClaimedLease[] = []
  for (const run of held) {
    if (taken.length >= scan.limit) break
    if (jobOf(run) === undefined) continue
    const lease = await scan.leases.getLease(run.runId)
    if (!lease || lease.owner === null || lease.owner === scan.owner || lease.queue === null) continue
    if (scan.queues !== undefined && !scan.queues.includes(lease.queue)) continue
    if (!ownerProcessIsGone(lease.owner)) continue
    const outcome = await scan.leases.acquire({ runId: run.runId, owner: scan.owner, leaseMs: scan.leaseMs, takeFrom: { owner: lease.owner, epoch: lease.epoch } })
    if (outcome.outcome === 'acquired') taken.push({ run: outcome.run, lease: outcome.lease, fence: outcome.fence })
  }
  return taken
}
