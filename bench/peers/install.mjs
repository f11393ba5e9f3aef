#!/usr/bin/env node
// Installs the peer runtimes of `npm run bench:peers` into bench/peers/node_modules from their own
// lockfile, with `npm ci`, unless that lockfile is already what is installed (a stamp holds its hash).
// Cairn does not depend on any of them.
import { spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

const here = fileURLToPath(new URL('.', import.meta.url))
const lock = readFileSync(new URL('package-lock.json', import.meta.url))
const stamp = new URL('node_modules/.cairn-peers-lock', import.meta.url)
const want = `${createHash('sha256').update(lock).digest('hex')} ${process.version}\n`

if (existsSync(stamp) && readFileSync(stamp, 'utf8') === want) {
  console.error('[bench:peers] peers already installed from bench/peers/package-lock.json')
} else {
  console.error('[bench:peers] installing the peers: npm ci in bench/peers (builds better-sqlite3 when no prebuilt binary can be fetched)')
  const result = spawnSync('npm', ['ci', '--no-audit', '--no-fund'], { cwd: here, stdio: 'inherit', shell: process.platform === 'win32' })
  if (result.status !== 0) {
    console.error(`[bench:peers] npm ci in bench/peers failed (exit ${result.status ?? result.signal}); see above`)
    process.exit(1)
  }
  writeFileSync(stamp, want)
}
