// Decoding what the host sends into the renderer's model: the request trace (columns and tables)
// and each strategy's records, placement and metrics. Runs in the decode worker; pure, so unit
// tests run it in Node on bundles the real host encoded.
import { decodeBundle } from '../../src-main/ipc/bundle.ts'
import type { TraceSummary } from '../../src-main/ipc/contract.ts'
import { buildStrategyModel, reuseKindOf, type LayoutColumns, type StrategyModel } from './model.ts'
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

export function decodeReplay(buffer: ArrayBuffer): StrategyView[] {
  const { meta, arrays } = decodeBundle(buffer)
  const listed = (meta as { strategies: Omit<StrategyView, 'model' | 'placed' | 'metrics'>[] }).strategies
  return listed.map((s, i) => {
    const get = <T>(name: string) => arrays[`s${i}.${name}`] as T
    const layout: LayoutColumns = {
      op: get('op'),
      address: get('address'),
      size: get('size'),
      requested: get('requested'),
      stream: get('stream'),
      event: get('event'),
    }
    const model = buildStrategyModel(layout, reuseKindOf(s.strategy, s.params))
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
