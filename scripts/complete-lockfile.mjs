#!/usr/bin/env node
// Adds lockfile entries for platform-specific optional packages that npm left out.
//
// Why: when the registry an install runs against does not serve some platform builds of a
// package (rollup's @rollup/rollup-<os>-<cpu> binaries, for instance), `npm install` silently
// drops them from package-lock.json, and `npm ci` then refuses the lockfile ("Missing: … from
// lock file"). Each added entry carries the os/cpu/libc read off the package name, so npm skips
// it on every other platform exactly as it would the real entry.
//
// Run after changing dependencies:  npm install && node scripts/complete-lockfile.mjs
import { readFileSync, writeFileSync } from 'node:fs'

const path = new URL('../package-lock.json', import.meta.url)
const lock = JSON.parse(readFileSync(path, 'utf8'))
const packages = lock.packages
const OS = ['android', 'darwin', 'freebsd', 'linux', 'openbsd', 'openharmony', 'win32', 'aix', 'netbsd', 'sunos', 'wasm32']
const CPU = ['arm64', 'arm', 'x64', 'ia32', 'loong64', 'ppc64', 'riscv64', 's390x', 'mips64el', 'wasi']

let added = 0
for (const [location, entry] of Object.entries(packages)) {
  for (const [name, version] of Object.entries(entry.optionalDependencies ?? {})) {
    const target = `${location === '' ? '' : `${location}/`}node_modules/${name}`.replace(/^\//, '')
    const hoisted = `node_modules/${name}`
    if (packages[target] || packages[hoisted]) continue
    const platform = platformOf(name)
    if (!platform) continue
    packages[hoisted] = { version, ...platform, dev: entry.dev, optional: true }
    if (!entry.dev) delete packages[hoisted].dev
    added++
  }
}
lock.packages = Object.fromEntries(Object.entries(packages).sort(([a], [b]) => (a === '' ? -1 : b === '' ? 1 : a < b ? -1 : a > b ? 1 : 0)))
writeFileSync(path, `${JSON.stringify(lock, null, 2)}\n`)
console.log(`complete-lockfile: added ${added} platform-specific optional package entries`)

function platformOf(name) {
  if (name === 'fsevents') return { os: ['darwin'] }
  const parts = name.split('/').pop().split('-')
  const os = parts.find((part) => OS.includes(part))
  const cpu = parts.find((part) => CPU.includes(part))
  if (!os || !cpu) return undefined
  const platform = { cpu: [cpu === 'wasi' ? 'wasm32' : cpu], os: [os === 'wasm32' ? 'wasi' : os] }
  if (name.includes('musl')) platform.libc = ['musl']
  else if (name.includes('gnu') && os === 'linux') platform.libc = ['glibc']
  return platform
}
