import { createServer, connect, type Socket } from 'node:net'
import { join } from 'node:path'

/** A socket barrier that racing child processes wait at, so they are released at one instant. */
export interface Barrier {
  /** The socket path to hand the racers ({@link waitAtBarrier} in each). */
  path: string
  /** Resolves once `count` racers are waiting. */
  ready: Promise<void>
  /** Release every waiting racer, back to back. */
  release(): void
  close(): void
}

/** Open a barrier for `count` racers, its socket in `dir`. */
export async function openBarrier(dir: string, count: number): Promise<Barrier> {
  const path = join(dir, `barrier-${Math.random().toString(36).slice(2)}.sock`)
  const waiting: Socket[] = []
  let allReady!: () => void
  const ready = new Promise<void>((resolve) => (allReady = resolve))
  const server = createServer((socket) => {
    socket.once('data', () => {
      waiting.push(socket)
      if (waiting.length === count) allReady()
    })
  })
  await new Promise<void>((resolve) => server.listen(path, resolve))
  return {
    path,
    ready,
    release: () => {
      for (const socket of waiting) socket.write('go\n')
    },
    close: () => server.close(),
  }
}

/** In a racer: wait at the barrier at `path` until it releases. */
export async function waitAtBarrier(path: string): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const socket = connect(path, () => socket.write('ready\n'))
    socket.once('data', () => {
      socket.destroy()
      resolve()
    })
    socket.once('error', reject)
  })
}
