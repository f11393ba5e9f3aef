import { describe, expect, it } from 'vitest'
import { SharedOutputs } from '../../src/store/encoding/shared-outputs.js'

/** A tool's outcome as the journal stores it: a JSON object long enough to be shared. */
function output(callId: string): string {
  return JSON.stringify({ toolUseId: callId, status: 'success', content: [{ text: `${callId} `.repeat(80) }] })
}

/** The conversation item that holds the outcome's text. */
function itemWith(callId: string): string {
  return `{"role":"user","content":[{"toolResult":${output(callId)}}]}`
}

describe('SharedOutputs, the writer side', () => {
  it('rewrites an item holding an outcome of the same write into a ref to it', () => {
    const shared = new SharedOutputs()
    const share = shared.sharer('r', [{ callId: 'c1', output: output('c1') }])!
    expect(share(itemWith('c1'))).toBe('{"role":"user","content":[{"toolResult":{"~":"effect","c":"c1"}}]}')
  })

  it('does not search for an outcome again once an item of the same write refers to it', () => {
    const shared = new SharedOutputs()
    const completions = [{ callId: 'c1', output: output('c1') }]
    shared.sharer('r', completions)!(itemWith('c1'))
    shared.remember('r', completions)
    expect(shared.sharer('r', [])).toBeUndefined()
  })

  it('shares an outcome stored by an earlier write with an item of a later one', () => {
    const shared = new SharedOutputs()
    shared.remember('r', [{ callId: 'c1', output: output('c1') }])
    const share = shared.sharer('r', [])!
    expect(share(itemWith('c1'))).toContain('{"~":"effect","c":"c1"}')
    shared.remember('r', [])
    expect(shared.sharer('r', [])).toBeUndefined()
  })

  it('stops searching for an outcome no item took within a few writes of checkpoints', () => {
    const shared = new SharedOutputs()
    shared.remember('r', [{ callId: 'c1', output: output('c1') }])
    for (let write = 0; write < 4; write++) {
      expect(shared.sharer('r', [])).toBeDefined()
      shared.remember('r', [])
    }
    expect(shared.sharer('r', [])).toBeUndefined()
  })

  it('keeps the outcomes of each run to itself', () => {
    const shared = new SharedOutputs()
    shared.remember('a', [{ callId: 'c1', output: output('c1') }])
    expect(shared.sharer('b', [])).toBeUndefined()
    expect(shared.sharer('a', [])!(itemWith('c1'))).toContain('{"~":"effect","c":"c1"}')
  })

  it('rewrites every output an item holds, each where it is, and leaves the rest of the item as it was', () => {
    const shared = new SharedOutputs()
    const share = shared.sharer('r', [
      { callId: 'c1', output: output('c1') },
      { callId: 'c2', output: output('c2') },
    ])!
    const item = `{"role":"user","content":[{"toolResult":${output('c2')}},{"text":"between"},{"toolResult":${output('c1')}},{"again":${output('c2')}}]}`
    expect(share(item)).toBe(
      '{"role":"user","content":[{"toolResult":{"~":"effect","c":"c2"}},{"text":"between"},{"toolResult":{"~":"effect","c":"c1"}},{"again":{"~":"effect","c":"c2"}}]}',
    )
    expect(share('{"role":"user","content":[{"text":"no output here"}]}')).toBe('{"role":"user","content":[{"text":"no output here"}]}')
  })

  it('takes the longest of two outputs that start alike', () => {
    const shared = new SharedOutputs()
    const short = output('c1')
    const long = `${short.slice(0, -1)},"more":"${'x'.repeat(40)}"}`
    const share = shared.sharer('r', [
      { callId: 'short', output: short },
      { callId: 'long', output: long },
    ])!
    expect(share(`[${long},${short}]`)).toBe('[{"~":"effect","c":"long"},{"~":"effect","c":"short"}]')
  })
})
