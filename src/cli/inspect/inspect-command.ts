import { once } from 'node:events'
import type { Context } from '../context.js'
import { loadAgents } from '../write-commands.js'
import { positiveIntOrZero } from './port.js'
import { startInspector } from './server.js'

/** `cairn inspect [--port P] [--agents ./agents.js]`: serve the inspector until Ctrl-C. */
export async function inspectCommand(ctx: Context, options: { port: string; agents?: string }): Promise<void> {
  const agents = options.agents === undefined ? undefined : await loadAgents(options.agents)
  const store = await ctx.store()
  const inspector = await startInspector(store, { port: positiveIntOrZero(options.port, '--port'), ...(agents ? { agents } : {}) })
  ctx.out.result({ url: inspector.url, port: inspector.port }, () => {
    ctx.out.line(`Cairn inspector for ${ctx.storeUrl}`)
    ctx.out.line(`open ${inspector.url}`)
    ctx.out.line('(only this machine can reach it, and only with the token in the URL; Ctrl-C stops it)')
    if (agents) ctx.out.line(`paused runs of ${Object.keys(agents).join(', ')} resume here once answered on the page`)
  })
  await Promise.race([once(process, 'SIGINT'), once(process, 'SIGTERM')])
  await inspector.close()
}
