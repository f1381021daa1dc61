// The decode workers (workers/decode.worker.ts): bundles from the host become a trace's columns and
// strategies' views off the page's thread.
import { ApiCallError, type FetchRequest } from '../api/client.ts'
import type { DecodeRequest, DecodeResponse } from '../workers/decode.worker.ts'

/**
 * The decode workers: one to start with, more while several decodes run at once (two, or as many
 * as the cores up to four), each request going to the worker with the fewest in flight.
 */
export class Decoder {
  private readonly workers: { worker: Worker; inFlight: number }[] = []
  private readonly most = Math.min(4, Math.max(2, globalThis.navigator?.hardwareConcurrency ?? 2))
  private next = 1
  private waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>()
  /** Milliseconds the worker spent on the last decode. */
  lastMs = 0

  private spawn(): { worker: Worker; inFlight: number } {
    const entry = { worker: new Worker(new URL('../workers/decode.worker.ts', import.meta.url), { type: 'module' }), inFlight: 0 }
    entry.worker.onmessage = (m: MessageEvent<DecodeResponse>) => {
      entry.inFlight--
      const w = this.waiting.get(m.data.id)
      if (!w) return
      this.waiting.delete(m.data.id)
      if (m.data.ok) {
        this.lastMs = m.data.ms
        w.resolve(m.data.value)
      } else w.reject(m.data.code !== undefined ? new ApiCallError(m.data.message, m.data.code) : new Error(m.data.message))
    }
    this.workers.push(entry)
    return entry
  }

  private pick(): { worker: Worker; inFlight: number } {
    const idle = this.workers.reduce<{ worker: Worker; inFlight: number } | undefined>((best, w) => (!best || w.inFlight < best.inFlight ? w : best), undefined)
    if (idle && (idle.inFlight === 0 || this.workers.length >= this.most)) return idle
    return this.spawn()
  }

  /** Starts a worker ahead of the first decode (its script loads and compiles while the host works). */
  warm(): void {
    if (this.workers.length === 0) this.spawn()
  }

  decode<T>(what: DecodeRequest['what'], buffer: ArrayBuffer): Promise<T> {
    return this.send<T>((id) => ({ id, what, buffer }), [buffer])
  }
  /** A replay bundle the worker fetches itself, building the models while it arrives. */
  fetchReplay<T>(request: FetchRequest): Promise<T> {
    return this.send<T>((id) => ({ id, what: 'replay', fetch: request }), [])
  }
  private send<T>(request: (id: number) => DecodeRequest, transfer: Transferable[]): Promise<T> {
    const id = this.next++
    const entry = this.pick()
    return new Promise<T>((resolve, reject) => {
      this.waiting.set(id, { resolve: resolve as (v: unknown) => void, reject })
      entry.inFlight++
      entry.worker.postMessage(request(id), transfer)
    })
  }
}
