import type { LanguageModelV2, LanguageModelV2CallOptions, LanguageModelV2StreamPart, LanguageModelV3, LanguageModelV3CallOptions, LanguageModelV3StreamPart } from '@ai-sdk/provider'

/**
 * The slice of the AI SDK's `LanguageModelV4` that Cairn uses. Its provider package needs a
 * newer Node than Cairn supports, so the slice is declared here: calls and stream parts as in
 * V3, except that a file part's `data` is a tagged `{ type: 'data' | 'url' }` object and a finish
 * may be `interrupted`.
 */
export interface LanguageModelV4Slice {
  readonly specificationVersion: 'v4'
  readonly provider: string
  readonly modelId: string
  doStream(options: Omit<LanguageModelV3CallOptions, 'prompt'> & { prompt: unknown[] }): PromiseLike<{ stream: ReadableStream<LanguageModelV3StreamPart>; response?: { headers?: Record<string, string> } }>
}

/** Any AI SDK language model Cairn accepts. */
export type AnyLanguageModel = LanguageModelV2 | LanguageModelV3 | LanguageModelV4Slice

/** A stream part of any of the three versions (V4's are read as V3's, which they extend). */
export type AnyStreamPart = LanguageModelV2StreamPart | LanguageModelV3StreamPart

/** Call options of any version, prompt aside. */
export type CallOptionsWithoutPrompt = Omit<LanguageModelV2CallOptions, 'prompt'> & Omit<LanguageModelV3CallOptions, 'prompt'>
