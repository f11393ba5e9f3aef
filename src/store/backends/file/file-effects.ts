import { rm } from 'node:fs/promises'
import { join } from 'node:path'
import type { EffectCompletionRow, EffectRow } from '../../engine/rows.js'
import type { DirectoryState } from './directory-state.js'
import { ensureDirectory, listDirectory, syncDirectory } from './driver.js'
import { FileBatch, writeFileAtomic } from './file-batch.js'
import { isEffectFileName } from './file-names.js'
import { effectRow, nextEffectOrder, readEffectFile, type StoredEffect } from './file-rows.js'
import { CheckpointCorruptionError } from '../../../core/errors.js'

/**
 * The effect files a commit changes, by path, as they will be written: a later change in the
 * same commit sees an earlier one.
 */
export type EffectEdits = Map<string, StoredEffect>

/**
 * The effect journal of a file store: one JSON file per (run, call) under the run's `effects/`.
 * The writing methods expect the caller to hold the run's lock. Given `edits`, they write
 * nothing and record the change there (see {@link FileEffects.publish}); without, they write it.
 */
export class FileEffects {
  readonly #dir: DirectoryState

  constructor(dir: DirectoryState) {
    this.#dir = dir
  }

  /** Create the intent, or count one more attempt on the existing one. */
  async recordIntent(row: EffectRow, edits?: EffectEdits): Promise<EffectRow> {
    const path = this.#dir.layout.effectFile(row.runId, row.callId)
    const existing = await this.#current(path, row.runId, row.callId, edits)
    const stored: StoredEffect = existing ? { ...existing, attempts: existing.attempts + 1 } : { ...row, order: nextEffectOrder() }
    await this.#change(row.runId, path, stored, edits)
    return effectRow(stored)
  }

  /** Mark a pending effect started (its callback is about to run). */
  async start(runId: string, callId: string, edits?: EffectEdits): Promise<EffectRow | undefined> {
    const path = this.#dir.layout.effectFile(runId, callId)
    const existing = await this.#current(path, runId, callId, edits)
    if (!existing || existing.status !== 'pending') return existing && effectRow(existing)
    const updated: StoredEffect = { ...existing, status: 'started' }
    await this.#change(runId, path, updated, edits)
    return effectRow(updated)
  }

  /** Write the outcome only while the effect is pending or started: the first outcome wins. */
  async complete(completion: EffectCompletionRow, edits?: EffectEdits): Promise<{ recorded: boolean; row: EffectRow | undefined }> {
    const path = this.#dir.layout.effectFile(completion.runId, completion.callId)
    const existing = await this.#current(path, completion.runId, completion.callId, edits)
    if (!existing) return { recorded: false, row: undefined }
    if (existing.status !== 'pending' && existing.status !== 'started') return { recorded: false, row: effectRow(existing) }
    const updated: StoredEffect = {
      ...existing,
      status: completion.status,
      output: completion.output,
      outputHash: completion.outputHash,
      completedAt: completion.completedAt,
    }
    await this.#change(completion.runId, path, updated, edits)
    return { recorded: true, row: effectRow(updated) }
  }

  /** Write the effect files of a run's `edits` together, with one round of syncs. */
  async publish(runId: string, edits: EffectEdits): Promise<void> {
    if (edits.size === 0) return
    await ensureDirectory(this.#dir.layout.effectsDir(runId))
    const batch = new FileBatch()
    try {
      for (const [path, stored] of edits) batch.replace(path, JSON.stringify(stored))
    } catch (err) {
      batch.discard()
      throw err
    }
    await batch.publish()
  }

  async get(runId: string, callId: string): Promise<EffectRow | undefined> {
    const stored = await this.#read(this.#dir.layout.effectFile(runId, callId), runId, callId)
    return stored && effectRow(stored)
  }

  /** In `startedAt` order; intents started in the same millisecond in the order they were recorded. */
  async list(runId: string): Promise<EffectRow[]> {
    const dir = this.#dir.layout.effectsDir(runId)
    const names = (await listDirectory(dir)).filter(isEffectFileName)
    const rows = await Promise.all(names.map((name) => readEffectFile(join(dir, name))))
    return rows
      .filter((row): row is StoredEffect => row !== undefined && row.runId === runId)
      .sort((a, b) => a.startedAt - b.startedAt || (Number(a.order) || 0) - (Number(b.order) || 0))
      .map(effectRow)
  }

  /** Replace an effect's hashes and output in place (re-sealing under a new key). */
  async rewrite(runId: string, effect: { callId: string; inputHash: string; output: string | null; outputHash: string | null }): Promise<void> {
    const path = this.#dir.layout.effectFile(runId, effect.callId)
    const existing = await this.#read(path, runId, effect.callId)
    if (!existing) return
    await writeFileAtomic(path, JSON.stringify({ ...existing, inputHash: effect.inputHash, output: effect.output, outputHash: effect.outputHash }))
  }

  async deleteAll(runId: string): Promise<number> {
    const dir = this.#dir.layout.effectsDir(runId)
    let deleted = 0
    for (const name of (await listDirectory(dir)).filter(isEffectFileName)) {
      await rm(join(dir, name), { force: true })
      deleted++
    }
    if (deleted > 0) await syncDirectory(dir)
    return deleted
  }

  async #current(path: string, runId: string, callId: string, edits: EffectEdits | undefined): Promise<StoredEffect | undefined> {
    return edits?.get(path) ?? (await this.#read(path, runId, callId))
  }

  async #change(runId: string, path: string, stored: StoredEffect, edits: EffectEdits | undefined): Promise<void> {
    if (edits) edits.set(path, stored)
    else await this.publish(runId, new Map([[path, stored]]))
  }

  async #read(path: string, runId: string, callId: string): Promise<StoredEffect | undefined> {
    const stored = await readEffectFile(path)
    if (stored && (stored.runId !== runId || stored.callId !== callId)) {
      throw new CheckpointCorruptionError(`effect file ${path} holds effect ${stored.callId} of run ${stored.runId}, not ${callId} of run ${runId}; restore it from a backup`, { runId })
    }
    return stored
  }
}
