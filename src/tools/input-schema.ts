import type { JsonObject } from '../core/codec.js'
import { validateJsonSchema } from './json-schema.js'
import { InvalidArgumentError } from '../core/errors.js'

/**
 * The Standard Schema interface (zod, valibot, arktype, …), declared here so Cairn depends on
 * no schema library. See https://standardschema.dev.
 */
export interface StandardSchemaV1<Input = unknown, Output = Input> {
  readonly '~standard': {
    readonly version: 1
    readonly vendor: string
    readonly validate: (value: unknown) => StandardResult<Output> | Promise<StandardResult<Output>>
    readonly types?: { readonly input: Input; readonly output: Output } | undefined
    /** Standard JSON Schema (zod ≥ 4.2, arktype, valibot via its converter). */
    readonly jsonSchema?: { input(options: { target: string }): Record<string, unknown> }
  }
}

type StandardResult<Output> =
  | { readonly value: Output; readonly issues?: undefined }
  | { readonly issues: readonly { readonly message: string; readonly path?: readonly (PropertyKey | { readonly key: PropertyKey })[] | undefined }[] }

/** What a tool's `inputSchema` may be: a Standard Schema or a JSON Schema object. */
export type InputSchema = StandardSchemaV1 | JsonObject

/** The validated type a schema produces. */
export type InferInput<S> = S extends StandardSchemaV1<unknown, infer O> ? O : unknown

/** Validation outcome: the (possibly transformed) value, or a message naming the field. */
export type Validation = { ok: true; value: unknown } | { ok: false; problem: string }

/** Whether a schema is a Standard Schema (as opposed to a JSON Schema object). */
export function isStandardSchema(schema: InputSchema): schema is StandardSchemaV1 {
  return typeof (schema as Partial<StandardSchemaV1>)['~standard']?.validate === 'function'
}

/** Validate tool input against either kind of schema. */
export async function validateInput(schema: InputSchema, input: unknown): Promise<Validation> {
  if (!isStandardSchema(schema)) {
    const problem = validateJsonSchema(schema, input)
    return problem === undefined ? { ok: true, value: input } : { ok: false, problem }
  }
  const result = await schema['~standard'].validate(input)
  if (result.issues === undefined) return { ok: true, value: result.value }
  const problems = result.issues.map((issue) => {
    const path = (issue.path ?? []).map((part) => String(typeof part === 'object' ? part.key : part)).join('.')
    return `${path === '' ? 'input' : path}: ${issue.message}`
  })
  return { ok: false, problem: problems.join('; ') }
}

/** The JSON Schema sent to the model for a tool's input. */
export function jsonSchemaOf(schema: InputSchema, toolName: string): JsonObject {
  if (!isStandardSchema(schema)) return schema
  const converter = schema['~standard'].jsonSchema
  if (!converter) {
    throw new InvalidArgumentError(
      `tool ${toolName}: its ${schema['~standard'].vendor} schema cannot produce a JSON Schema for the model; pass a JSON Schema as inputSchema, or use a library that implements Standard JSON Schema (zod ≥ 4.2, arktype ≥ 2.1.28)`,
    )
  }
  const { $schema: _ignored, ...json } = converter.input({ target: 'draft-2020-12' })
  return json as JsonObject
}
