import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import {
  CheckpointCorruptionError,
  CheckpointNotFoundError,
  FileStore,
  MemoryStore,
  inspectWorkflowCheckpoint,
  listWorkflowCheckpointIds,
  listWorkflowCheckpoints,
  loadWorkflowCheckpoint,
  pruneWorkflowCheckpoints,
  type CheckpointStorage,
  type WorkflowCheckpoint,
} from '../../src/index.js'
import { JsonTextStorage, squares, squaresWorkflow } from './helpers.js'
import { runLogOf } from '../support/file-log.js'

describe('checkpoint storage and management', () => {
  let dir = ''
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'cairn-workflow-storage-'))
  })
  afterEach(async () => {
    // A FileStore left open may still be writing into the run's directory (its async sync): retry a directory that filled meanwhile.
    await rm(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 })
  })

  const backends: { name: string; open: (path: string) => CheckpointStorage }[] = [
    { name: 'MemoryStore', open: () => new MemoryStore() },
    { name: 'FileStore', open: (path) => new FileStore({ directory: join(path, 'nested', 'checkpoints') }) },
    { name: 'a custom five-method storage', open: () => new JsonTextStorage() },
  ]

  it.each(backends)('$name saves (returning the id), loads, lists by workflow, deletes and gets the latest', async ({ open }) => {
    const storage = open(dir)
    expect(await storage.getLatest({ workflowName: 'squares' })).toBeUndefined()
    const { workflow } = squaresWorkflow(storage)
    const result = await workflow.run({ message: 2 })
    expect(result.getOutputs()).toEqual([squares(2)])
    const latest = await storage.getLatest<WorkflowCheckpoint>({ workflowName: workflow.name })
    expect(latest!.checkpointId).toBe(result.checkpointId)
    expect(latest!.payload.checkpointId).toBe(result.checkpointId)
    const ids = await listWorkflowCheckpointIds(storage, { workflowName: 'squares' })
    expect(ids).toHaveLength(4)
    expect(ids[0]).toBe(result.checkpointId)
    expect((await storage.listCheckpoints({ workflowName: 'squares' })).map((c) => c.id)).toEqual(ids)
    expect(await storage.delete(ids[0]!)).toBe(true)
    expect(await storage.delete(ids[0]!)).toBe(false)
    await expect(storage.load(ids[0]!)).rejects.toBeInstanceOf(CheckpointNotFoundError)
    expect((await storage.getLatest({ workflowName: 'squares' }))!.checkpointId).toBe(ids[1])
    // The squares example resumes from whatever is latest.
    const resumed = await squaresWorkflow(storage).workflow.run({ checkpointId: ids[1]! })
    expect(resumed.getOutputs()).toEqual([squares(2)])
  })

  it('MemoryStore copies in and out; FileStore creates its directory, refuses path traversal and, asked to, skips an unreadable record when listing', async () => {
    const memory = new MemoryStore()
    const { workflow } = squaresWorkflow(memory)
    const result = await workflow.run({ message: 2 })
    const loaded = await memory.load<WorkflowCheckpoint>(result.checkpointId!)
    ;(loaded.payload.executorStates.worker as { results: Record<number, number> }).results[1] = -1
    expect((await loadWorkflowCheckpoint(memory, result.checkpointId!)).executorStates.worker).toEqual({ results: squares(2) })

    const warnings: string[] = []
    const storagePath = join(dir, 'created', 'here')
    const files = new FileStore({ directory: storagePath, onWarning: (w) => warnings.push(w) })
    const run = await squaresWorkflow(files).workflow.run({ message: 2 })
    await expect(files.load('../../etc/passwd')).rejects.toThrow(/not a valid id/)
    // The frame of the newest checkpoint torn in the run's log (its line end kept).
    const log = await runLogOf(storagePath, run.runId)
    const at = log.frameOf(run.checkpointId!)
    log.lines[at] = `${log.lines[at]!.split(' ').slice(0, 2).join(' ')} { torn`
    await log.write(false)
    await expect(listWorkflowCheckpoints(files, { workflowName: 'squares' })).rejects.toBeInstanceOf(CheckpointCorruptionError)
    const listed = await files.listCheckpoints({ workflowName: 'squares', unreadable: 'skip' })
    expect(listed).toHaveLength(3)
    expect(warnings.join('\n')).toMatch(/skipped checkpoint/)
  })

  it('checkpoints are listed with their summaries (no payload read) and inspected: name, iteration, hash, message count, state keys, pending requests', async () => {
    const { workflow, storage } = squaresWorkflow()
    const result = await workflow.run({ message: 3 })
    const listed = await workflow.listCheckpoints()
    expect(listed.map((c) => c.iterationCount)).toEqual([4, 3, 2, 1, 0])
    expect(listed.map((c) => c.phase)).toEqual(['superstep', 'superstep', 'superstep', 'superstep', 'entry'])
    expect(listed.map((c) => c.messageCount)).toEqual([0, 1, 1, 1, 1])
    expect(listed[0]).toEqual({
      checkpointId: result.checkpointId,
      runId: result.runId,
      workflowName: 'squares',
      phase: 'superstep',
      iterationCount: 4,
      timestamp: expect.stringMatching(/Z$/) as unknown,
      previousCheckpointId: listed[1]!.checkpointId,
      graphSignatureHash: workflow.graphSignatureHash,
      messageCount: 0,
      stateKeys: [],
      pendingRequestCount: 0,
    })
    expect(await inspectWorkflowCheckpoint(storage, listed[2]!.checkpointId)).toEqual(listed[2])
    expect(await workflow.inspectCheckpoint(listed[2]!.checkpointId)).toEqual(listed[2])
    expect(await listWorkflowCheckpoints(storage, { workflowName: 'squares', limit: 2 })).toEqual(listed.slice(0, 2))
    expect(await listWorkflowCheckpoints(storage, { workflowName: 'other' })).toEqual([])
    expect((await workflow.getLatestCheckpoint())!.checkpointId).toBe(result.checkpointId)
    expect(await workflow.deleteCheckpoint(listed[4]!.checkpointId)).toBe(true)
    expect(await workflow.listCheckpoints()).toHaveLength(4)
  })

  it('the retention loop (delete checkpoints older than a cutoff) and prune work per run and keep every run resumable', async () => {
    for (const storage of [new MemoryStore(), new JsonTextStorage()]) {
      const { workflow } = squaresWorkflow(storage)
      const first = await workflow.run({ message: 3 })
      const second = await workflow.run({ message: 2 })
      expect(await pruneWorkflowCheckpoints(storage, { workflowName: 'squares', olderThan: 0 })).toBe(0)
      expect(await workflow.pruneCheckpoints({ keepLast: 2 })).toBe(3 + 2)
      const left = await workflow.listCheckpoints()
      expect(left.filter((c) => c.runId === first.runId)).toHaveLength(2)
      expect(left.filter((c) => c.runId === second.runId)).toHaveLength(2)
      expect(await pruneWorkflowCheckpoints(storage, { workflowName: 'squares' })).toBe(2)
      expect((await workflow.listCheckpoints()).map((c) => c.checkpointId).sort()).toEqual([first.checkpointId, second.checkpointId].sort())

      // The retention loop: list, compare each timestamp with a cutoff, delete.
      const cutoff = Date.now() + 1000
      for (const cp of await listWorkflowCheckpoints(storage, { workflowName: 'squares' })) {
        if (Date.parse(cp.timestamp) < cutoff) await storage.delete(cp.checkpointId)
      }
      expect(await workflow.listCheckpoints()).toEqual([])
    }
  })
})
