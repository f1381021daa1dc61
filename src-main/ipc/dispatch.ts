// The one dispatcher of the API (docs/architecture.md): a call is (channel, argument) checked
// against the contract's schema (src-shared/contract.ts), then handed to that channel's handler.
// The web host, the worker process and Electron's main process are transports over it: each
// reads a call off its own wire, dispatches it, and writes the result back as the contract says
// (JSON or a bundle). Nothing here knows which transport it serves.
import { array, boolean, custom, number, record, strictObject, string, undefined as undefinedSchema, type z, type ZodType } from 'zod'

import {
  CONTRACT,
  isChannel,
  type Bundle,
  type BundleChannel,
  type Channel,
  type ChannelArg,
  type ChannelResult,
  type SchemaKit,
} from '../../src-shared/contract.ts'
import { ApiError } from '../../src-shared/api-error.ts'

/** What a handler returns: the channel's result, or for a bundle, its encoded bytes (a worker's). */
export type Handled<C extends Channel> = C extends BundleChannel ? Bundle | ArrayBuffer : ChannelResult<C>

/** One handler per channel, given the checked argument. */
export type Handlers = { [C in Channel]: (arg: ChannelArg<C>) => Handled<C> | Promise<Handled<C>> }

/** An argument its channel's schema refuses: `problems` names each, `message` adds the channel. */
export class ArgumentError extends ApiError {
  constructor(
    readonly channel: Channel,
    readonly problems: string,
  ) {
    super('BAD_INPUT', `${channel}: ${problems}`)
  }
}

// Named functions, not the namespace: a bundle then carries only the zod these need.
const KIT: SchemaKit = { strictObject, string, number, boolean, undefined: undefinedSchema, custom, record, array }

const schemas = new Map<Channel, ZodType>()

function schemaOf(channel: Channel): ZodType {
  let schema = schemas.get(channel)
  if (!schema) schemas.set(channel, (schema = CONTRACT[channel].arg(KIT) as ZodType))
  return schema
}

const EXPECTED: Record<string, string> = {
  string: 'a string',
  number: 'a number',
  boolean: 'true or false',
  object: 'a JSON object',
  record: 'a JSON object',
  array: 'a JSON array',
}

/** "name must be a string", "the argument must be a JSON object", "cap: Too big: …". */
function describeIssue(issue: z.core.$ZodIssue): string {
  const where = issue.path.length > 0 ? issue.path.join('.') : 'the argument'
  if (issue.code === 'invalid_type') {
    if (issue.expected === 'undefined' && issue.path.length === 0) return 'takes no argument'
    return `${where} must be ${EXPECTED[issue.expected] ?? issue.expected}`
  }
  if (issue.code === 'unrecognized_keys')
    return `${issue.path.length > 0 ? `${where}: ` : ''}unexpected ${issue.keys.length === 1 ? 'key' : 'keys'} ${issue.keys.map((k) => JSON.stringify(k)).join(', ')}`
  return `${where}: ${issue.message}`
}

/** The channel named `name`; throws ApiError NOT_FOUND if there is none. */
export function channelNamed(name: unknown): Channel {
  if (!isChannel(name)) throw new ApiError('NOT_FOUND', `no channel ${JSON.stringify(name)?.slice(0, 100)}`)
  return name
}

/** `arg` as `channel`'s argument; throws ArgumentError naming every problem. */
export function checkedArg<C extends Channel>(channel: C, arg: unknown): ChannelArg<C> {
  const parsed = schemaOf(channel).safeParse(arg)
  if (!parsed.success) throw new ArgumentError(channel, parsed.error.issues.map(describeIssue).join('; '))
  return parsed.data as ChannelArg<C>
}

/**
 * Serves one call: the channel must exist and have a handler here (else ApiError NOT_FOUND), and
 * the argument must pass its schema (else ArgumentError); then the handler's result, or its error.
 */
export async function dispatch<C extends Channel>(handlers: Partial<Handlers>, channel: C | string, arg: unknown): Promise<Handled<C>> {
  const known = channelNamed(channel) as C
  const handler = handlers[known] as ((arg: ChannelArg<C>) => Handled<C> | Promise<Handled<C>>) | undefined
  if (!handler) throw new ApiError('NOT_FOUND', `no channel ${JSON.stringify(known)} here`)
  return handler(checkedArg(known, arg))
}
