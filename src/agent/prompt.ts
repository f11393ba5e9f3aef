import type { JsonValue } from '../core/codec.js'
import { CheckpointError, InvalidArgumentError } from '../core/errors.js'
import type { ContentBlock, Message, PromptBlock } from '../model/messages.js'
import { Checkpoint } from './checkpoint.js'

/** What `invoke` accepts: text, or a list of blocks. */
export type AgentInput = string | readonly PromptBlock[] | undefined

/** A prompt, understood. */
export type ParsedPrompt =
  | { kind: 'message'; message: Message | undefined }
  | { kind: 'resume'; checkpoint: Checkpoint }
  | { kind: 'responses'; responses: Record<string, JsonValue> }

/**
 * Understand a prompt, validating a resume in the documented order: checkpointing disabled →
 * mixed blocks → more than one resume block → missing `checkpoint` key → schema version.
 */
export function parsePrompt(prompt: AgentInput, checkpointing: boolean): ParsedPrompt {
  if (prompt === undefined) return { kind: 'message', message: undefined }
  if (typeof prompt === 'string') return { kind: 'message', message: { role: 'user', content: [{ text: prompt }] } }
  if (!Array.isArray(prompt)) throw new InvalidArgumentError('a prompt is a string or a list of content blocks')
  const blocks = prompt as readonly PromptBlock[]
  const resumes = blocks.filter((block) => typeof block === 'object' && block !== null && 'checkpointResume' in block)
  if (resumes.length > 0) return { kind: 'resume', checkpoint: parseResume(blocks, resumes, checkpointing) }
  const responses = blocks.filter((block) => typeof block === 'object' && block !== null && 'interruptResponse' in block)
  if (responses.length > 0) {
    if (responses.length !== blocks.length) throw new InvalidArgumentError('interruptResponse blocks cannot be mixed with other content in one prompt')
    const answers: Record<string, JsonValue> = {}
    for (const block of responses) {
      const { interruptId, response } = (block as { interruptResponse: { interruptId?: unknown; response: JsonValue } }).interruptResponse ?? {}
      if (typeof interruptId !== 'string') throw new InvalidArgumentError('interruptResponse needs an interruptId string')
      answers[interruptId] = response
    }
    return { kind: 'responses', responses: answers }
  }
  if (blocks.length === 0) return { kind: 'message', message: undefined }
  return { kind: 'message', message: { role: 'user', content: structuredClone(blocks) as ContentBlock[] } }
}

function parseResume(blocks: readonly PromptBlock[], resumes: readonly PromptBlock[], checkpointing: boolean): Checkpoint {
  if (!checkpointing) {
    throw new CheckpointError('checkpointing_disabled', 'this agent was built with checkpointing: false, so it cannot resume from a checkpoint; build it with checkpointing: true')
  }
  if (resumes.length !== blocks.length) throw new InvalidArgumentError('a checkpointResume block must be the only block of the prompt; send other content after resuming')
  if (resumes.length > 1) throw new InvalidArgumentError('a prompt may hold only one checkpointResume block')
  const resume = (resumes[0] as { checkpointResume: Record<string, unknown> }).checkpointResume
  if (typeof resume !== 'object' || resume === null || !('checkpoint' in resume)) {
    throw new CheckpointError('missing_checkpoint', 'the checkpointResume block has no checkpoint key: pass { checkpointResume: { checkpoint } }')
  }
  const data = resume.checkpoint instanceof Checkpoint ? resume.checkpoint.toJSON() : resume.checkpoint
  return Checkpoint.fromJSON(data)
}
