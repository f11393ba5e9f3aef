import { readFile } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'
import { describe, expect, it } from 'vitest'

const entry = fileURLToPath(new URL('../src/index.ts', import.meta.url))

let names: string[] | undefined

/** The names `src/index.ts` exports, values and types, as the compiler resolves them (computed once). */
function rootExports(): string[] {
  names ??= compileRootExports()
  return names
}

function compileRootExports(): string[] {
  const program = ts.createProgram([entry], { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, noEmit: true, skipLibCheck: true })
  const checker = program.getTypeChecker()
  const module = checker.getSymbolAtLocation(program.getSourceFile(entry)!)!
  return checker.getExportsOfModule(module).map((symbol) => symbol.getName()).sort()
}

// Building the program takes seconds on a loaded machine: a generous limit, not an assertion.
describe('the public API of cairn', { timeout: 120_000 }, () => {
  it('the root entry point lists every export by name: no export * and exactly 297 names', async () => {
    const source = await readFile(entry, 'utf8')
    expect(source).not.toMatch(/export \*|export type \*/)
    const listed = rootExports()
    expect(listed).toHaveLength(297)
    expect(new Set(listed).size).toBe(listed.length)
  })

  it('keeps internals out of the root', () => {
    const exported = new Set(rootExports())
    const internals = ['TAG', 'streamManaged', 'LoopObserver', 'LoopStart', 'ManagedInvocation', 'CLAIMABLE_STATUSES', 'JOB_KEY', 'RUNNER_PHASES', 'RUNNER_KIND', 'CheckpointRow', 'RunRow', 'StorageEngine', 'CommitRequest', 'chainHash']
    expect(internals.filter((name) => exported.has(name))).toEqual([])
    for (const name of ['Agent', 'Runner', 'Worker', 'CairnClient', 'WorkflowBuilder', 'MemoryStore', 'FileStore', 'CheckpointStore', 'RunStore', 'StoreReader', 'StoreWriter', 'StoreAdmin', 'RecoveryLimitError', 'RunNotPausedError']) {
      expect(exported.has(name), name).toBe(true)
    }
  })
})
