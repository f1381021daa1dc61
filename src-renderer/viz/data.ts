// Decoding what the host sends into the renderer's model: the request trace (columns and tables)
// and each strategy's records, placement and metrics. Runs in the decode worker; pure, so unit
// tests run it in Node on bundles the real host encoded.
import { BundleError, bundleByteLength, decodeBundle } from '../../src-shared/bundle.ts'
import { concatBytes } from '../../src-shared/bytes.ts'
import type { Bundle } from '../../src-shared/contract.ts'
import {
  layoutPiece,
  layoutPieceEnd,
  listedStrategies,
  replayDevice,
  readTraceData,
  strategyMetrics,
  type Frame,
  type ListedStrategy,
  type StrategyMetrics,
  type TraceDataSent,
} from '../../src-shared/wire.ts'
import type { Device } from '../../src-shared/device.ts'
import type { StrategySummary } from '../../src-shared/summary.ts'
import { reuseKindOf, StrategyModelBuilder, type StrategyModel } from './model.ts'
import { placeModel, type PlacedModel } from './layout.ts'
import { requestedSeries, type RequestedSeries } from '../../src-shared/requested.ts'

export type { Frame, StrategyMetrics }

/** A trace's data as the host sent it (src-shared/wire.ts), and what the renderer derives at once. */
export interface TraceData extends TraceDataSent {
  /** The program's requested bytes over the trace, from these columns (drawn before any replay). */
  requested: RequestedSeries
}

export interface StrategyView {
  name: string
  strategy: string
  params: Record<string, unknown>
  recorded: boolean
  summary: StrategySummary
  model: StrategyModel
  placed: PlacedModel
  metrics?: StrategyMetrics
  /**
   * Its model holds only what its map shows after this request event (src-shared/wire.ts,
   * layoutAt): a map drawn before its history has crossed, right at that event and no other.
   */
  previewAt?: number
  /** A replay's: the device it ran on without a cap and where its memory came from (src-shared/device.ts). */
  device?: Device
}

export function decodeTraceData(buffer: ArrayBuffer): TraceData {
  const sent = readTraceData(decodeBundle(buffer))
  return { ...sent, requested: requestedSeries(sent.kind, sent.id, sent.size) }
}

/** A replay bundle (src-shared/wire.ts, packReplay) held whole. */
export function decodeReplay(buffer: ArrayBuffer): StrategyView[] {
  const decoder = new ReplayDecoder()
  decoder.push(new Uint8Array(buffer))
  return decoder.finish()
}

/**
 * A replay bundle read as it arrives: push() each piece of bytes in order, finish() at the end.
 * Each strategy's model is built from each piece of its layout as soon as that piece is in, so
 * the build runs while the rest of the bundle is still on its way; the result is the same as
 * building from the whole layout at once.
 */
export class ReplayDecoder {
  private head: Uint8Array[] = []
  private headBytes = 0
  private bytes: Uint8Array | undefined
  private received = 0
  private listed: ListedStrategy[] = []
  private device: Device | undefined
  private arrays: Bundle['arrays'] = {}
  private builders: StrategyModelBuilder[] = []
  /** Pieces of layout in bundle order, each with the byte its last column ends at. */
  private pieces: { strategy: number; piece: number; end: number }[] = []
  private nextPiece = 0

  /**
   * The next bytes of the bundle. `reused`: the caller will write over `chunk`'s memory (a reader
   * that reads into one buffer again and again), so nothing of it is kept; otherwise a chunk that
   * is the whole bundle is read in place.
   */
  push(chunk: Uint8Array, reused = false): void {
    if (chunk.byteLength === 0) return
    if (!this.bytes) {
      this.head.push(reused ? chunk.slice() : chunk)
      this.headBytes += chunk.byteLength
      const head = concatBytes(this.head)
      const total = bundleByteLength(head)
      if (total === undefined) return
      this.head = []
      // Held whole already (a buffer of exactly the bundle): read in place, no copy.
      const whole = !reused && head.byteOffset === 0 && head.byteLength === total && head.buffer instanceof ArrayBuffer && head.buffer.byteLength === total
      if (head.byteLength > total) throw new BundleError('bundle: more bytes than its header announced')
      this.bytes = whole ? head : new Uint8Array(total)
      if (!whole) this.bytes.set(head)
      this.received = head.byteLength
      this.start()
    } else {
      if (this.received + chunk.byteLength > this.bytes.byteLength) throw new BundleError('bundle: more bytes than its header announced')
      this.bytes.set(chunk, this.received)
      this.received += chunk.byteLength
    }
    this.buildArrived()
  }

  private start(): void {
    const { meta, arrays } = decodeBundle(this.bytes!.buffer as ArrayBuffer)
    this.arrays = arrays
    this.listed = listedStrategies(meta)
    this.device = replayDevice(meta)
    this.listed.forEach((s, i) => {
      this.builders.push(new StrategyModelBuilder(reuseKindOf(s.strategy, s.params), s.layout.allocs, s.layout.regionEvents))
      for (let k = 0; k < s.layout.pieces; k++) this.pieces.push({ strategy: i, piece: k, end: layoutPieceEnd(arrays, i, k) })
    })
  }

  private buildArrived(): void {
    while (this.nextPiece < this.pieces.length && this.pieces[this.nextPiece]!.end <= this.received) {
      const { strategy, piece } = this.pieces[this.nextPiece++]!
      this.builders[strategy]!.add(layoutPiece(this.arrays, this.listed[strategy]!, strategy, piece))
    }
  }

  finish(): StrategyView[] {
    if (!this.bytes || this.received !== this.bytes.byteLength)
      throw new BundleError(`bundle: ended after ${this.bytes ? this.received : this.headBytes} bytes, short of its header's length`)
    return this.listed.map(({ layout: _, ...s }, i) => {
      const model = this.builders[i]!.finish()
      const view: StrategyView = { ...s, model, placed: placeModel(model), ...(this.device && !s.recorded && { device: this.device }) }
      const metrics = strategyMetrics(this.arrays, i)
      if (metrics) view.metrics = metrics
      return view
    })
  }
}

/** Bytes a byte-stream reader reads at a time, into the same buffer each time. */
const READ_BYTES = 1 << 20

/** A replay bundle read from a stream as it arrives (ReplayDecoder), its models built piece by piece. */
export async function replayFrom(stream: ReadableStream<Uint8Array>): Promise<StrategyView[]> {
  const decoder = new ReplayDecoder()
  // A byte stream is read into one buffer, again and again: a default reader hands over a new
  // buffer for every chunk, and new memory is dear (a first touch of each page; docs/benchmarks.md).
  let byob: ReadableStreamBYOBReader | undefined
  try {
    byob = stream.getReader({ mode: 'byob' })
  } catch {
    // Not a byte stream here: chunk by chunk as the stream gives them.
  }
  if (byob) {
    let buffer = new Uint8Array(READ_BYTES)
    for (;;) {
      const { done, value } = await byob.read(buffer)
      if (done || !value) return decoder.finish()
      decoder.push(value, true)
      // The read handed the buffer back in `value`: the whole of it is read into next time.
      buffer = new Uint8Array(value.buffer, 0, READ_BYTES)
    }
  }
  const reader = stream.getReader()
  for (;;) {
    const { done, value } = await reader.read()
    if (done) return decoder.finish()
    decoder.push(value)
  }
}

/** The frames of the stack an alloc event recorded, innermost first. */
export function framesOf(trace: TraceData, event: number): Frame[] {
  const s = trace.stack[event]
  if (s === undefined || s < 0) return []
  const out: Frame[] = []
  for (let k = trace.stackOffsets[s]!; k < trace.stackOffsets[s + 1]!; k++) {
    const f = trace.frames[trace.stackFrames[k]!]
    if (f) out.push(f)
  }
  return out
}

/** The buffers of a value's typed arrays, to transfer them from a worker without copying. */
export function transferablesOf(value: unknown, out = new Set<ArrayBuffer>()): ArrayBuffer[] {
  if (ArrayBuffer.isView(value)) {
    if (value.buffer instanceof ArrayBuffer) out.add(value.buffer)
  } else if (Array.isArray(value)) for (const v of value) transferablesOf(v, out)
  else if (value && typeof value === 'object') for (const v of Object.values(value)) transferablesOf(v, out)
  return [...out]
}
