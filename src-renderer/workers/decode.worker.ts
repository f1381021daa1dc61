// Decoding off the UI thread: bundles arrive as transferred ArrayBuffers, the trace's columns and
// each strategy's interval records go back transferred (no copies), so opening or replaying a
// million-event trace never stalls a frame.
import { decodeReplay, decodeTraceData, transferablesOf } from '../viz/data.ts'

export type DecodeRequest = { id: number; what: 'trace' | 'replay'; buffer: ArrayBuffer }
export type DecodeResponse = { id: number; ok: true; value: unknown; ms: number } | { id: number; ok: false; message: string }

self.onmessage = (message: MessageEvent<DecodeRequest>) => {
  const { id, what, buffer } = message.data
  const started = performance.now()
  try {
    const value = what === 'trace' ? decodeTraceData(buffer) : decodeReplay(buffer)
    const response: DecodeResponse = { id, ok: true, value, ms: performance.now() - started }
    ;(self as unknown as Worker).postMessage(response, transferablesOf(value))
  } catch (e) {
    const response: DecodeResponse = { id, ok: false, message: (e as Error).message }
    ;(self as unknown as Worker).postMessage(response)
  }
}
