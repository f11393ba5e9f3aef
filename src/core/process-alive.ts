/**
 * Whether process `pid` of this machine no longer exists: signal 0 checks without signalling.
 * A process that exists but belongs to another user (EPERM) is alive.
 */
export function processIsGone(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return false
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ESRCH'
  }
}
