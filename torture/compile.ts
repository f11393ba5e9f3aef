import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'

const ROOT = fileURLToPath(new URL('..', import.meta.url))

/** A worker script compiled to plain JavaScript, and how to remove it. */
export interface CompiledWorker {
  /** Absolute path of `torture/worker.js`. */
  script: string
  dispose(): Promise<void>
}

/**
 * Transpile `src/` and `torture/` to JavaScript (no type check: `tsc` does that) under
 * `node_modules/.cache/`, so node resolves `better-sqlite3` from there. A plain-JS worker starts
 * in about a third of the CPU time of `node --import tsx`, which is what lets hundreds of
 * crash scenarios run in a minute on two cores.
 */
export async function compileWorker(): Promise<CompiledWorker> {
  const cache = join(ROOT, 'node_modules', '.cache', 'cairn-torture')
  await removeAbandoned(cache)
  const out = join(cache, `${process.pid}-${Date.now().toString(36)}`)
  await mkdir(out, { recursive: true })
  await writeFile(join(out, 'package.json'), '{ "type": "module" }\n')
  for (const folder of ['src', 'torture']) {
    for (const file of await tsFiles(join(ROOT, folder))) {
      const source = await readFile(file, 'utf8')
      const { outputText } = ts.transpileModule(source, {
        fileName: file,
        compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022, verbatimModuleSyntax: true, sourceMap: false },
      })
      const target = join(out, relative(ROOT, file)).replace(/\.ts$/, '.js')
      await mkdir(dirname(target), { recursive: true })
      await writeFile(target, outputText)
    }
  }
  return { script: join(out, 'torture', 'worker.js'), dispose: () => rm(out, { recursive: true, force: true }) }
}

/** Remove the output of harnesses that died before cleaning up (their pid is gone). */
async function removeAbandoned(cache: string): Promise<void> {
  const entries = await readdir(cache).catch(() => [])
  for (const entry of entries) {
    const pid = Number(entry.split('-')[0])
    if (Number.isInteger(pid) && pid > 0 && !alive(pid)) await rm(join(cache, entry), { recursive: true, force: true })
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return (err as NodeJS.ErrnoException).code !== 'ESRCH'
  }
}

async function tsFiles(folder: string): Promise<string[]> {
  const entries = await readdir(folder, { withFileTypes: true, recursive: true })
  return entries
    .filter((entry) => entry.isFile() && entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts'))
    .map((entry) => join(entry.parentPath, entry.name))
}
