import { applyRunPatch, CLAIMABLE_STATUSES, RUN_CHANGED, swapFails, unleased, type LeaseEngine, type RunPatch, type RunRow } from 'cairn-agents/engine'
import { key, type KvDatabase } from './kv-database.js'

/** The lease capability of the outside engine, over the published lease table. */
export function kvLeases(db: KvDatabase): LeaseEngine {
  const run = (runId: string) => db.get<RunRow>(key.run(runId))
  // The published helper applies a patch, with the digest of its swap (checked first with swapFails).
  const patchRun = (row: RunRow, patch: RunPatch) => db.set(key.run(row.runId), applyRunPatch(row, patch))
  return {
    enqueue: async (row, job) => {
      if (run(row.runId)) return false
      db.set(key.run(row.runId), row)
      db.leases.add(row.runId, { ...job, createdAt: row.createdAt })
      return true
    },
    claim: async (request) => db.leases.claim(request, (runId) => run(runId)?.status).map(({ runId, row }) => ({ run: run(runId)!, lease: row })),
    heartbeat: async (request) => db.leases.heartbeat(request),
    release: async ({ fence, patch, failed = false }) => {
      const row = run(fence.runId)
      if (!row || !db.leases.check(fence).held) return false
      if (patch && swapFails(row, patch.swap)) return RUN_CHANGED
      const next = patch ? applyRunPatch(row, patch) : row
      db.set(key.run(row.runId), next)
      return db.leases.release(fence, { failed, claimableAfter: CLAIMABLE_STATUSES.includes(next.status) })
    },
    cancel: async (runId, swap) => {
      const row = run(runId)
      if (!row) return undefined
      if (swapFails(row, swap)) return RUN_CHANGED
      const outcome = db.leases.cancel(runId, row.status)
      if (outcome !== 'cancelled') return { outcome, status: row.status }
      patchRun(row, { status: 'cancelled', updatedAt: Math.max(row.updatedAt, Date.now()), ...(swap ? { swap } : {}) })
      return { outcome, status: 'cancelled' }
    },
    requeuePaused: async ({ runId, metadata, now, swap }) => {
      const row = run(runId)
      if (!row) return undefined
      if (row.status !== 'paused') return { outcome: 'not_paused', status: row.status }
      const blocked = db.leases.blocksRequeue(runId, now)
      if (blocked) return blocked
      if (swapFails(row, swap)) return RUN_CHANGED
      db.leases.requeue(runId)
      patchRun(row, { status: 'queued', metadata, updatedAt: Math.max(row.updatedAt, now), swap })
      db.leases.wake()
      return { outcome: 'queued' }
    },
    acquire: async (request) => {
      let created = false
      if (!run(request.runId)) {
        if (!request.create) return { outcome: 'not_found' }
        db.set(key.run(request.runId), request.create)
        created = true
      }
      const { acquired, row } = db.leases.acquire(request.runId, request)
      return acquired ? { outcome: 'acquired', run: run(request.runId)!, lease: row, created } : { outcome: 'held', lease: row }
    },
    getLease: async (runId) => (run(runId) ? (db.leases.get(runId) ?? unleased(runId)) : undefined),
  }
}
