// What main accepts on each IPC channel, as zod schemas: a renderer shows untrusted traces, so main
// trusts nothing it sends. Typed against the contract, so a channel added there without a schema
// here does not compile. Objects are strict (no extra keys) and every string has a length limit.
import { z } from 'zod'

import type { Channel, ChannelArg } from '../../src-shared/contract.ts'

const id = z.string().min(1).max(128)
/** Largest file a window may hand over as bytes (a drop); bigger files go by path. */
export const MAX_OPEN_BYTES = 2 * 1024 ** 3

const bytes = z.custom<Uint8Array>((v) => v instanceof Uint8Array, { message: 'bytes must be a Uint8Array' }).refine((v) => v.byteLength <= MAX_OPEN_BYTES, {
  message: `bytes: at most ${MAX_OPEN_BYTES} bytes`,
})

export const CHANNEL_SCHEMAS: { [C in Channel]: z.ZodType<ChannelArg<C>> } = {
  'app:info': z.undefined(),
  'trace:openSample': z.strictObject({ name: z.string().min(1).max(255) }),
  'trace:openPath': z.strictObject({ path: z.string().min(1).max(4096) }),
  'trace:openBytes': z.strictObject({ name: z.string().max(255), bytes }),
  'trace:openRecent': z.strictObject({ key: id }),
  'trace:recent': z.undefined(),
  'trace:data': z.strictObject({ traceId: id }),
  'replay:start': z.strictObject({
    traceId: id,
    strategies: z.string().min(1).max(4096),
    cap: z.string().max(64).optional(),
    includeStored: z.boolean().optional(),
    targets: z.strictObject({ first: z.number().int().min(0), count: z.number().int().min(0).optional() }).optional(),
  }),
  'replay:result': z.strictObject({ jobId: id }),
  'record:workload': z.strictObject({
    workload: z.string().min(1).max(64),
    strategy: z.string().min(1).max(1024).optional(),
    params: z.record(z.string().max(64), z.string().max(256)).optional(),
  }),
  'job:status': z.strictObject({ jobId: id }),
  'job:result': z.strictObject({ jobId: id }),
  'job:cancel': z.strictObject({ jobId: id }),
}

/** The payload as its channel's argument, or a message naming what is wrong. */
export function parsePayload<C extends Channel>(channel: C, payload: unknown): { ok: true; arg: ChannelArg<C> } | { ok: false; message: string } {
  const parsed = CHANNEL_SCHEMAS[channel].safeParse(payload)
  if (parsed.success) return { ok: true, arg: parsed.data }
  const issues = parsed.error.issues.map((i) => `${i.path.length > 0 ? i.path.join('.') : 'argument'}: ${i.message}`)
  return { ok: false, message: `${channel}: ${issues.join('; ')}` }
}
