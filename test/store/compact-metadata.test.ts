import { describe, expect, it } from 'vitest'
import { metadataOf, storedMetadata } from '../../src/store/encoding/compact-metadata.js'

describe('compact checkpoint metadata', () => {
  it("stores the runner's usual metadata in a few characters and reads back the same text", () => {
    const cases: [string, string][] = [
      ['{"step":0,"snapshot":false}', 'f0'],
      ['{"step":12,"snapshot":true}', 't12'],
      ['{"step":999999999999999,"snapshot":false,"coalesced":true}', 'c999999999999999'],
    ]
    for (const [metadata, stored] of cases) {
      expect(storedMetadata(metadata)).toBe(stored)
      expect(metadataOf(stored)).toBe(metadata)
    }
  })

  it('keeps any other metadata text as it is', () => {
    for (const metadata of [
      '{}',
      '{"step":1}',
      '{"step":01,"snapshot":false}',
      '{"step":-1,"snapshot":false}',
      '{"step":1.5,"snapshot":false}',
      '{"step":1e3,"snapshot":false}',
      '{"step":1000000000000000,"snapshot":false}',
      '{"snapshot":false,"step":1}',
      '{"step":1,"snapshot":true,"coalesced":true}',
      '{"step":1,"snapshot":false,"coalesced":false}',
      '{"step":1,"snapshot":false,"forkedFrom":"x"}',
      '{"step": 1,"snapshot":false}',
    ]) {
      expect(storedMetadata(metadata)).toBe(metadata)
      expect(metadataOf(metadata)).toBe(metadata)
    }
  })

  it('passes a stored value that is no compact form on unchanged, for the row checks to reject', () => {
    for (const stored of ['x1', 'f', 'f01', 'f-1', 'F1', 't1.5', '', 7, null]) expect(metadataOf(stored)).toBe(stored)
  })
})
