// Decoding what the host sends into the renderer's model: the request trace (columns and tables)
// and each strategy's records, placement and metrics. Runs in the decode worker; pure, so unit
// tests run it in Node on bundles the real host encoded.
import { BundleError, bundleByteLength, decodeBundle } from '../../src-shared/bundle.ts'
import { concatBytes } from '../../src-shared/bytes.ts'
import type { Bundle, TraceSummary } from '../../src-shared/contract.ts'
import { reuseKindOf, StrategyModelBuilder, type StrategyModel } from './model.ts'
import { placeModel, type PlacedModel } from './layout.ts'
import { requestedSeries, type RequestedSeries } from './requested.ts'

export interface Frame {
  name: string
  filename: string
  line: number
}

export interface TraceData {
  summary: TraceSummary
  streams: string[]
  frames: Frame[]
  tags: string[]
  markers: string[]
  kind: Uint8Array
  id: Uint32Array
  size: Float64Array
  stream: Uint32Array
  time: Float64Array
  stack: Int32Array
  tag: Int32Array
  stackOffsets: Uint32Array
  stackFrames: Uint32Array
  /** The program's requested bytes over the trace, from these columns (drawn before any replay). */
  requested: RequestedSeries
}

export interface StrategyMetrics {
  /** Exclusive end event of each bucket. */
  end: Uint32Array
  requestedMax: Float64Array
  requestedMin: Float64Array
  roundedMax: Float64Array
  reservedMax: Float64Array
  reservedMin: Float64Array
  fragmentation: Float64Array
  deviceCalls: Float64Array
}

export interface StrategyView {
  name: string
  strategy: string
  params: Record<string, unknown>
  recorded: boolean
  summary: Record<string, number>
  model: StrategyModel
  placed: PlacedModel
  metrics?: StrategyMetrics
}

export function decodeTraceData(buffer: ArrayBuffer): TraceData {
  const { meta, arrays } = decodeBundle(buffer)
  const m = meta as { summary: TraceSummary; streams: string[]; frames: Frame[]; tags: string[]; markers: string[] }
  const a = arrays as unknown as Omit<TraceData, 'summary' | 'streams' | 'frames' | 'tags' | 'markers' | 'requested'>
  return {
    summary: m.summary,
    streams: m.streams,
    frames: m.frames,
    tags: m.tags,
    markers: m.markers,
    kind: a.kind,
    id: a.id,
    size: a.size,
    stream: a.stream,
    time: a.time,
    stack: a.stack,
    tag: a.tag,
    stackOffsets: a.stackOffsets,
    stackFrames: a.stackFrames,
    requested: requestedSeries(a.kind, a.id, a.size),
  }
}

/** A replay bundle (src-main/services/app-session.ts, replayBundle) held whole. */
export function decodeReplay(buffer: ArrayBuffer): StrategyView[] {
  const decoder = new ReplayDecoder()
  decoder.push(new Uint8Array(buffer))
  return decoder.finish()
}

type ListedStrategy = Omit<StrategyView, 'model' | 'placed' | 'metrics'> & { layout: { pieces: number; allocs: number; regionEvents: number } }

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
  private arrays: Bundle['arrays'] = {}
  private builders: StrategyModelBuilder[] = []
  /** Pieces of layout in bundle order, each with the byte its last column ends at. */
  private pieces: { strategy: number; piece: number; end: number }[] = []
  private nextPiece = 0

  push(chunk: Uint8Array): void {
    if (chunk.byteLength === 0) return
    if (!this.bytes) {
      this.head.push(chunk)
      this.headBytes += chunk.byteLength
      const head = concatBytes(this.head)
      const total = bundleByteLength(head)
      if (total === undefined) return
      this.head = []
      // Held whole already (a buffer of exactly the bundle): read in place, no copy.
      const whole = head.byteOffset === 0 && head.byteLength === total && head.buffer instanceof ArrayBuffer && head.buffer.byteLength === total
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
    this.listed = (meta as { strategies: ListedStrategy[] }).strategies
    this.listed.forEach((s, i) => {
      this.builders.push(new StrategyModelBuilder(reuseKindOf(s.strategy, s.params), s.layout.allocs, s.layout.regionEvents))
      for (let k = 0; k < s.layout.pieces; k++) {
        let end = 0
        for (const column of LAYOUT_COLUMNS) {
          const a = arrays[`s${i}.l${k}.${column}`]
          if (!a) throw new BundleError(`bundle: strategy ${i} has no layout column ${column} in piece ${k}`)
          end = Math.max(end, a.byteOffset + a.byteLength)
        }
        this.pieces.push({ strategy: i, piece: k, end })
      }
    })
  }

  private buildArrived(): void {
    while (this.nextPiece < this.pieces.length && this.pieces[this.nextPiece]!.end <= this.received) {
      const { strategy, piece } = this.pieces[this.nextPiece++]!
      const get = <T>(column: string) => this.arrays[`s${strategy}.l${piece}.${column}`] as T
      this.builders[strategy]!.add({ op: get('op'), address: get('address'), size: get('size'), requested: get('requested'), stream: get('stream'), event: get('event') })
    }
  }

  finish(): StrategyView[] {
    if (!this.bytes || this.received !== this.bytes.byteLength) throw new BundleError(`bundle: ended after ${this.bytes ? this.received : this.headBytes} bytes, short of its header's length`)
    return this.listed.map(({ layout: _, ...s }, i) => {
      const get = <T>(name: string) => this.arrays[`s${i}.${name}`] as T
      const model = this.builders[i]!.finish()
      const view: StrategyView = { ...s, model, placed: placeModel(model) }
      const end = get<Uint32Array | undefined>('m.end')
    if (end)
      view.metrics = {
        end,
        requestedMax: get('m.requestedMax'),
        requestedMin: get('m.requestedMin'),
        roundedMax: get('m.roundedMax'),
        reservedMax: get('m.reservedMax'),
        reservedMin: get('m.reservedMin'),
        fragmentation: get('m.fragmentation'),
        deviceCalls: get('m.deviceCalls'),
      }
      return view
    })
  }
}

const LAYOUT_COLUMNS = ['op', 'address', 'size', 'requested', 'stream', 'event'] as const


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
