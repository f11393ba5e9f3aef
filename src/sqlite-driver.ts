/**
 * The first module `cairn-agents/sqlite` evaluates: it loads better-sqlite3 through the optional
 * peer loader, so a program without the driver gets a MissingDependencyError naming it and the
 * command that installs it, before the backend's own modules ask for the driver (they then find
 * it in the module cache).
 */
import { requirePeer } from './core/peers.js'

requirePeer({ name: 'better-sqlite3', neededBy: 'cairn-agents/sqlite' })
