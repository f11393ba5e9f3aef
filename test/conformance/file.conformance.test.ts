import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { FileStore } from '../../src/index.js'
import { runStoreConformance } from '../../src/testing.js'
import { runLogOf } from '../support/file-log.js'

const directory = (location: string) => join(location, 'store')

await runStoreConformance({
  name: 'file',
  open: (location) => new FileStore({ directory: directory(location), onWarning: () => {} }),
  childModule: fileURLToPath(new URL('../fixtures/open-file.ts', import.meta.url)),
  corrupt: async ({ location, runId, checkpointId, kind }) => {
    const log = await runLogOf(directory(location), runId)
    const at = log.frameOf(checkpointId)
    const line = log.lines[at]!
    const record = line.indexOf(' {')
    switch (kind) {
      case 'truncate':
        // The frame lost its second half but is followed by its line end: a whole frame that fails its check.
        // (A last frame cut short without its line end is a write never acknowledged: see test/file-engine.test.ts.)
        log.lines[at] = line.slice(0, Math.floor((line.length + record) / 2))
        return log.write(false)
      case 'garble': {
        const offset = Math.floor((line.length + 2 * record) / 3)
        log.lines[at] = line.slice(0, offset) + '\u0000\u00ff{"]' + line.slice(offset + 5)
        return log.write(false)
      }
      case 'edit':
        log.lines[at] = line.replace('\\"n\\":4', '\\"n\\":40')
        if (log.lines[at] === line) throw new Error('the edit changed nothing')
        return log.write(true)
      case 'edit-list-item': {
        const item = log.lines.findIndex((frame) => frame.includes('m0:'))
        log.lines[item] = log.lines[item]!.replace('m0:', 'M0:')
        return log.write(true)
      }
    }
  },
})
