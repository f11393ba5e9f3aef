import { Agent, Checkpoint, deserialize, MemoryStore, Runner, serialize, tool, type Tool } from '../src/index.js'
import { ScriptedModel } from '../src/testing.js'
import { CliError } from '../src/cli/cli-error.js'
import { exportRun, importRun } from '../src/store/portable-run.js'
import { squaresWorkflow } from '../test/workflow/helpers.js'
import { parsedOrText, type Surface } from './surface.js'

/** The surfaces that decode a value handed over by a caller (no store integrity to check). */
export async function valueSurfaces(): Promise<Surface[]> {
  return [codecSurface(), await fromJsonSurface(), await resumeSurface(), await workflowSurface(), await importSurface()]
}

function codecSurface(): Surface {
  const value = {
    at: new Date(0),
    index: new Map<unknown, unknown>([['a', 1], [2, new Set(['x', null])]]),
    bytes: new Uint8Array([1, 2, 3]),
    big: 12345678901234567890n,
    odd: [Number.NaN, -0, Number.POSITIVE_INFINITY, undefined],
    escaped: { '~': 'user data', nested: [{ deep: { deeper: 'leaf' } }] },
    text: 'hello',
  }
  return {
    name: 'codec decode',
    seed: serialize(value),
    async attempt(text) {
      deserialize(text, { what: 'fuzzed value' })
      return 'accepted'
    },
  }
}

function weatherTools(): Tool[] {
  return ['get_weather', 'get_forecast'].map((name) =>
    tool({ name, description: `${name} for a city.`, inputSchema: { type: 'object', properties: { city: { type: 'string' } } }, callback: async () => 'sunny' }),
  )
}

function weatherAgent(): Agent {
  const model = new ScriptedModel(
    [
      [
        { toolUse: { toolUseId: 't1', name: 'get_weather', input: { city: 'Oslo' } } },
        { toolUse: { toolUseId: 't2', name: 'get_forecast', input: { city: 'Oslo' } } },
      ],
      ...Array.from({ length: 8 }, () => [{ text: 'Sunny.' }]),
    ],
    { select: 'call' },
  )
  return new Agent({ model, tools: weatherTools(), systemPrompt: 'Weather.', checkpointing: true })
}

async function checkpointText(): Promise<string> {
  const result = await weatherAgent().invoke('Weather in Oslo?')
  return JSON.stringify(result.checkpoint!.toJSON())
}

async function fromJsonSurface(): Promise<Surface> {
  return {
    name: 'Checkpoint.fromJSON',
    seed: await checkpointText(),
    async attempt(text) {
      Checkpoint.fromJSON(parsedOrText(text))
      return 'accepted'
    },
  }
}

async function resumeSurface(): Promise<Surface> {
  return {
    name: 'checkpointResume block',
    seed: await checkpointText(),
    async attempt(text) {
      await weatherAgent().invoke([{ checkpointResume: { checkpoint: parsedOrText(text) } }])
      return 'accepted'
    },
  }
}

async function workflowSurface(): Promise<Surface> {
  const storage = new MemoryStore()
  const ran = await squaresWorkflow(storage).workflow.run({ message: 3 })
  const history = await storage.listCheckpoints({ runId: ran.runId })
  const record = await storage.load(history[1]!.id)
  let n = 0
  return {
    name: 'workflow checkpoint restore',
    seed: serialize(record.payload),
    async attempt(text) {
      const payload = deserialize(text, { what: 'fuzzed workflow checkpoint' })
      const id = await storage.save({ runId: `fuzzed-${++n}`, kind: 'workflow', phase: 'superstep', workflowName: 'squares', payload })
      await squaresWorkflow(storage).workflow.run({ checkpointId: id })
      return 'accepted'
    },
  }
}

async function importSurface(): Promise<Surface> {
  const source = new MemoryStore()
  const model = new ScriptedModel([[{ toolUse: { toolUseId: 't1', name: 'get_weather', input: { city: 'Oslo' } } }], [{ text: 'Sunny.' }]])
  await new Runner({ store: source }).run(new Agent({ model, tools: weatherTools(), systemPrompt: 'Weather.' }), { input: 'Weather?', runId: 'exported' })
  const seed = JSON.stringify(await exportRun(source, 'exported'))
  return {
    name: 'cairn import',
    seed,
    async attempt(text) {
      const document = parsedOrText(text)
      // As `cairn import` does: text that is not JSON is refused before it reaches importRun.
      if (typeof document === 'string') throw new CliError('the input is not JSON; give a document made by `cairn export RUN`')
      const store = new MemoryStore()
      const run = await importRun(store, document)
      // What is imported verifies: every finished effect holds the outcome the document hashed,
      // so an altered output or status is never accepted (and, on a keyed store, never signed).
      const imported = new Map((await store.listEffects(run.runId)).map((effect) => [effect.callId, effect]))
      for (const effect of (document as { effects: { callId: string; status: string; outputHash: string | null }[] }).effects) {
        const stored = imported.get(effect.callId)
        if (stored?.status !== effect.status || stored.outputHash !== (effect.outputHash ?? null)) {
          throw new Error(`cairn import accepted effect ${effect.callId} (${effect.status}) but stored ${stored?.status ?? 'nothing'} with another output hash`)
        }
      }
      return 'accepted'
    },
  }
}
