import { readdir, stat } from 'node:fs/promises'
import { join } from 'node:path'

/** Sum of the sizes of every file under `directory`, recursively (0 when it does not exist). */
export async function directoryBytes(directory: string): Promise<number> {
  let entries
  try {
    entries = await readdir(directory, { withFileTypes: true })
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 0
    throw err
  }
  let total = 0
  for (const entry of entries) {
    const path = join(directory, entry.name)
    if (entry.isDirectory()) total += await directoryBytes(path)
    else if (entry.isFile()) total += await fileBytes(path)
  }
  return total
}

/** Size of a SQLite database: the main file plus its `-wal` and `-shm` files when present. */
export async function sqliteBytes(path: string): Promise<number> {
  const sizes = await Promise.all([path, `${path}-wal`, `${path}-shm`].map(fileBytes))
  return sizes.reduce((sum, size) => sum + size, 0)
}

async function fileBytes(path: string): Promise<number> {
  try {
    return (await stat(path)).size
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 0
    throw err
  }
}
