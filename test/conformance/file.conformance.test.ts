import { open, readdir, readFile, truncate, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { FileStore } from '../../src/index.js'
import { runStoreConformance } from '../../src/testing.js'

const directory = (location: string) => join(location, 'store')

async function checkpointFile(location: string, runId: string, checkpointId: string): Promise<string> {
  const dir = join(directory(location), 'runs', runId, 'checkpoints')
  const name = (await readdir(dir)).find((file) => file.endsWith(`-${checkpointId}.json`))
  if (!name) throw new Error(`no file for checkpoint ${checkpointId} in ${dir}`)
  return join(dir, name)
}

await runStoreConformance({
  name: 'file',
  open: (location) => new FileStore({ directory: directory(location), onWarning: () => {} }),
  childModule: fileURLToPath(new URL('../fixtures/open-file.ts', import.meta.url)),
  corrupt: async ({ location, runId, checkpointId, kind }) => {
    const file = await checkpointFile(location, runId, checkpointId)
    const text = await readFile(file, 'utf8')
    switch (kind) {
      case 'truncate':
        return truncate(file, Math.floor(text.length / 2))
      case 'garble': {
        const handle = await open(file, 'r+')
        await handle.write(Buffer.from([0x00, 0xff, 0x7b, 0x22, 0x5d]), 0, 5, Math.floor(text.length / 3))
        return handle.close()
      }
      case 'edit':
        return writeFile(file, text.replace('\\"n\\":4', '\\"n\\":40'))
      case 'edit-list-item': {
        const { lists } = JSON.parse(text) as { lists: string }
        const [ref] = JSON.parse(lists) as { id: string }[]
        const listFile = join(directory(location), 'runs', runId, 'lists', `${ref!.id}.jsonl`)
        return writeFile(listFile, (await readFile(listFile, 'utf8')).replace('m0:', 'M0:'))
      }
    }
  },
})
