import type { JsonObject } from '../core/codec.js'

/**
 * A validator for the JSON Schema subset tool inputs use: `type` (one or several), `properties`,
 * `required`, `additionalProperties: false`, `items`, `enum`, `const`, `minimum`/`maximum`,
 * `minLength`/`maxLength`, `anyOf`, and `additionalProperties` as a schema for the values of a
 * record. Returns the first problem as `path: reason`, or undefined. A property whose value is
 * `undefined` counts as absent. In an `anyOf`, the problem reported is that of the first option
 * whose `required` keys the value has (so a tagged union names the branch meant), else the first.
 */
export function validateJsonSchema(schema: JsonObject, value: unknown, path = ''): string | undefined {
  const at = path === '' ? 'input' : path
  if (Array.isArray(schema.anyOf)) {
    const options = schema.anyOf as JsonObject[]
    // The options in order until one holds: a long list of tagged blocks checks each once.
    const problems: (string | undefined)[] = []
    for (const option of options) {
      const problem = validateJsonSchema(option, value, path)
      if (problem === undefined) break
      problems.push(problem)
    }
    if (problems.length === options.length) return problems[Math.max(0, options.findIndex((option) => hasRequired(option, value)))]
  }
  if (schema.const !== undefined && JSON.stringify(schema.const) !== JSON.stringify(value)) return `${at}: must be ${JSON.stringify(schema.const)}`
  if (Array.isArray(schema.enum) && !schema.enum.some((option) => JSON.stringify(option) === JSON.stringify(value))) {
    return `${at}: must be one of ${schema.enum.map((option) => JSON.stringify(option)).join(', ')}`
  }
  if (schema.type !== undefined) {
    const types = Array.isArray(schema.type) ? (schema.type as string[]) : [schema.type as string]
    if (!types.some((type) => matchesType(type, value))) return `${at}: expected ${types.join(' or ')}, got ${describeType(value)}`
  }
  if (typeof value === 'string') {
    if (typeof schema.minLength === 'number' && value.length < schema.minLength) return `${at}: must be at least ${schema.minLength} characters`
    if (typeof schema.maxLength === 'number' && value.length > schema.maxLength) return `${at}: must be at most ${schema.maxLength} characters`
  }
  if (typeof value === 'number') {
    if (typeof schema.minimum === 'number' && value < schema.minimum) return `${at}: must be ≥ ${schema.minimum}`
    if (typeof schema.maximum === 'number' && value > schema.maximum) return `${at}: must be ≤ ${schema.maximum}`
  }
  if (Array.isArray(value) && isSchema(schema.items)) {
    for (const [i, item] of value.entries()) {
      const problem = validateJsonSchema(schema.items, item, `${path}[${i}]`)
      if (problem) return problem
    }
  }
  if (typeof value === 'object' && value !== null && !Array.isArray(value)) return validateObject(schema, value as Record<string, unknown>, path)
  return undefined
}

function validateObject(schema: JsonObject, value: Record<string, unknown>, path: string): string | undefined {
  const properties = isSchema(schema.properties) ? (schema.properties as Record<string, JsonObject>) : {}
  for (const key of Array.isArray(schema.required) ? (schema.required as string[]) : []) {
    if (value[key] === undefined) return `${join(path, key)}: is required`
  }
  for (const [key, item] of Object.entries(value)) {
    if (item === undefined) continue
    const propertySchema = Object.prototype.hasOwnProperty.call(properties, key) ? properties[key] : undefined
    if (propertySchema) {
      const problem = validateJsonSchema(propertySchema, item, join(path, key))
      if (problem) return problem
    } else if (schema.additionalProperties === false) {
      return `${join(path, key)}: is not an allowed property`
    } else if (isSchema(schema.additionalProperties)) {
      const problem = validateJsonSchema(schema.additionalProperties, item, join(path, key))
      if (problem) return problem
    }
  }
  return undefined
}

function hasRequired(option: JsonObject, value: unknown): boolean {
  if (typeof value !== 'object' || value === null || !Array.isArray(option.required) || option.required.length === 0) return false
  return option.required.every((key) => typeof key === 'string' && (value as Record<string, unknown>)[key] !== undefined)
}

function matchesType(type: string, value: unknown): boolean {
  switch (type) {
    case 'object':
      return typeof value === 'object' && value !== null && !Array.isArray(value)
    case 'array':
      return Array.isArray(value)
    case 'integer':
      return Number.isInteger(value)
    case 'null':
      return value === null
    default:
      return typeof value === type
  }
}

function describeType(value: unknown): string {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'array'
  return typeof value
}

function isSchema(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

function join(path: string, key: string): string {
  return path === '' ? key : `${path}.${key}`
}
