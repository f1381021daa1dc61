// Decoding off the UI thread: bundles arrive as transferred ArrayBuffers, or a replay's as the
// response stream itself (its models build piece by piece as it arrives); the trace's columns and
// each strategy's interval records go back transferred (no copies), so opening or replaying a
// million-event trace never stalls a frame.
import { ApiCallError, responseError, type FetchRequest } from '../api/client.ts'
import { decodeReplay, decodeTraceData, replayFrom, transferablesOf } from '../viz/data.ts'

export type DecodeRequest = { id: number; what: 'trace' | 'replay'; buffer: ArrayBuffer } | { id: number; what: 'replay'; fetch: FetchRequest }
export type DecodeResponse = { id: number; ok: true; value: unknown; ms: number } | { id: number; ok: false; message: string; code?: string }

/** Fetches a replay's bundle and builds its models as it arrives. */
async function replayFetched(request: FetchRequest): Promise<unknown> {
  const response = await fetch(request.url, request.init)
  if (!response.ok) throw await responseError('replay:result', response)
  if (!response.body) throw new ApiCallError('replay:result: the response has no body', 'INTERNAL')
  return replayFrom(response.body)
}

self.onmessage = async (message: MessageEvent<DecodeRequest>) => {
  const request = message.data
  const started = performance.now()
  try {
    const value =
      'fetch' in request ? await replayFetched(request.fetch) : request.what === 'trace' ? decodeTraceData(request.buffer) : decodeReplay(request.buffer)
    const response: DecodeResponse = { id: request.id, ok: true, value, ms: performance.now() - started }
    ;(self as unknown as Worker).postMessage(response, transferablesOf(value))
  } catch (e) {
    const response: DecodeResponse = { id: request.id, ok: false, message: (e as Error).message, ...(e instanceof ApiCallError && { code: e.code }) }
    ;(self as unknown as Worker).postMessage(response)
  }
}
