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
})
