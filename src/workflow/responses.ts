import { validateJsonSchema } from '../tools/json-schema.js'
import { RESPONSE_SOURCE, type WorkflowMessage } from './checkpoint.js'
import { WorkflowError } from './errors.js'
import type { RequestInfoEvent } from './events.js'

/**
 * Check answers against the pending requests before anything is delivered: every id must be
 * pending (an unknown or already answered id is an error naming it), and every answer must
 * satisfy its request's `responseSchema`. Returns the response messages, in request order.
 */
export function acceptResponses(params: {
  workflowName: string
  runId: string
  pending: ReadonlyMap<string, RequestInfoEvent>
  responses: Record<string, unknown>
}): WorkflowMessage[] {
  const { workflowName, runId, pending, responses } = params
  const ids = Object.keys(responses)
  for (const requestId of ids) {
    const request = pending.get(requestId)
    if (request === undefined) {
      const waiting = pending.size === 0 ? 'no request is pending' : `pending requests: ${[...pending.keys()].join(', ')}`
      throw new WorkflowError('unknown_request', `workflow ${workflowName} has no pending request ${requestId} (unknown, or already answered); ${waiting}`, {
        workflowName,
        runId,
        requestId,
      })
    }
    const problem = request.responseSchema === undefined ? undefined : validateJsonSchema(request.responseSchema, responses[requestId], 'response')
    if (problem !== undefined) {
      throw new WorkflowError('invalid_response', `the response to request ${requestId} of executor ${request.executorId} is invalid: ${problem}`, {
        workflowName,
        runId,
        requestId,
        executorId: request.executorId,
      })
    }
  }
  return [...pending.values()]
    .filter((request) => ids.includes(request.requestId))
    .map((request) => ({ kind: 'response', sourceId: RESPONSE_SOURCE, targetId: request.executorId, data: responses[request.requestId], request }))
}
