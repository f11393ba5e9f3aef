export { emitTo, type RunEvent, type RunEventListener, type RunEventUsage } from './run-events.js'
