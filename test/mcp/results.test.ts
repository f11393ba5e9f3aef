import { describe, expect, it } from 'vitest'
import { connectMcp } from '../../src/mcp.js'
import { toToolResult } from '../../src/integrations/mcp/results.js'
import { InvalidArgumentError } from '../../src/index.js'

describe('an MCP tool result as a Cairn tool result', () => {
  it('keeps text, turns structured content into one JSON block and drops the text that only repeats it', () => {
    const result = toToolResult('t1', { content: [{ type: 'text', text: '{"b":2,"a":1}' }, { type: 'text', text: 'two fields' }], structuredContent: { a: 1, b: 2 } }, 'x')
    expect(result).toEqual({ toolUseId: 't1', status: 'success', content: [{ text: 'two fields' }, { json: { a: 1, b: 2 } }] })
  })

  it('describes images, audio, links and binary resources in a line instead of inlining them; isError makes an error result', () => {
    const result = toToolResult(
      't2',
      {
        isError: true,
        content: [
          { type: 'image', mimeType: 'image/png', data: 'AAAA' },
          { type: 'audio', mimeType: 'audio/wav', data: 'AAAAAA==' },
          { type: 'resource_link', name: 'report', uri: 'file:///r.pdf' },
          { type: 'resource', resource: { uri: 'file:///a.txt', text: 'inline text' } },
          { type: 'resource', resource: { uri: 'file:///b.bin', blob: 'AAAA', mimeType: 'application/octet-stream' } },
        ],
      },
      'x',
    )
    expect(result).toEqual({
      toolUseId: 't2',
      status: 'error',
      content: [
        { text: '[image image/png, 3 bytes, not shown]' },
        { text: '[audio audio/wav, 4 bytes, not shown]' },
        { text: '[resource report at file:///r.pdf]' },
        { text: 'inline text' },
        { text: '[resource file:///b.bin (application/octet-stream), 3 bytes, not shown]' },
      ],
    })
  })

  it('an empty result is one empty text block', () => {
    expect(toToolResult('t3', { content: [] }, 'x').content).toEqual([{ text: '' }])
  })
})

describe('connectMcp options', () => {
  it('refuses options that cannot work before starting anything, naming the option', async () => {
    await expect(connectMcp({ name: 'bad name', command: 'node' })).rejects.toThrow(/server name of 1-40 letters/)
    await expect(connectMcp({ name: 'both', command: 'node', url: 'http://localhost/mcp' })).rejects.toThrow(/either command .* or url/)
    await expect(connectMcp({ name: 'x', command: 'node', approval: 'sometimes' as never })).rejects.toThrow(/approval must be one of never, destructive, always/)
    await expect(connectMcp({ name: 'x', url: 'ftp://host/mcp' })).rejects.toThrow(/url must be http: or https:/)
    await expect(connectMcp({ name: 'x', command: 'node', callTimeoutMs: 0 })).rejects.toThrow(/callTimeoutMs must be a positive number/)
    await expect(connectMcp({ name: 'x', command: 'node', callTimeoutMs: -1 })).rejects.toBeInstanceOf(InvalidArgumentError)
    await expect(connectMcp({ name: 'bad name', command: 'node' })).rejects.toMatchObject({ code: 'invalid_argument' })
  })
})
