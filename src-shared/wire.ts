// The key layout of the two bundles the host sends the renderer (bundle.ts is their container): a
// trace's data (`trace:data`) and a replay's strategies (`replay:result`). Each writer sits beside
// its reader, so the names written are the names read. Pure: the host writes, the renderer's decode
// worker reads.
import { BundleError } from './bundle.ts'
import type { Bundle, BundleArray, TraceSummary } from './contract.ts'
import { LayoutOp } from './layout.ts'

// ---------------------------------------------------------------------------------------------
// trace:data — the request trace's columns under their own names, its tables in the metadata, and
// its stacks flattened: stack s is stackFrames[stackOffsets[s] .. stackOffsets[s + 1]).

export interface Frame {
  name: string
  filename: string
  line: number
}

/** The request trace as the host holds it (src-main/services/trace/model.ts, RequestTrace). */
export interface TraceToSend {
  events: {
    kind: Uint8Array
    id: Uint32Array
    size: Float64Array
    stream: Uint32Array
    device: Uint16Array
    time: Float64Array
    stack: Int32Array
    tag: Int32Array
    /** Memory pool of each alloc and free (0: the default pools); absent: all in the default pools. */
    pool?: Uint32Array
  }
  tables: { streams: string[]; frames: Frame[]; stacks: readonly Uint32Array[]; tags: string[]; markers: string[]; pools?: string[] }
  meta: unknown
}

/** A trace:data bundle read back: its tables, and its columns as views into the bundle. */
export interface TraceDataSent {
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
  /** Device of each event (absent from bundles that did not carry it). */
  device?: Uint16Array
  /** Memory pool of each event (0: the default pools, k: pools[k - 1]); absent: all in the default pools. */
  pool?: Uint32Array
  pools?: string[]
}

export function packTraceData(summary: TraceSummary, trace: TraceToSend): Bundle {
  const e = trace.events
  const t = trace.tables
  const stackOffsets = new Uint32Array(t.stacks.length + 1)
  for (let i = 0; i < t.stacks.length; i++) stackOffsets[i + 1] = stackOffsets[i]! + t.stacks[i]!.length
  const stackFrames = new Uint32Array(stackOffsets[t.stacks.length]!)
  t.stacks.forEach((s, i) => stackFrames.set(s, stackOffsets[i]!))
  return {
    meta: { summary, streams: t.streams, frames: t.frames, tags: t.tags, markers: t.markers, ...(t.pools && { pools: t.pools }), meta: trace.meta },
    arrays: {
      kind: e.kind,
      id: e.id,
      size: e.size,
      stream: e.stream,
      device: e.device,
      time: e.time,
      stack: e.stack,
      tag: e.tag,
      stackOffsets,
      stackFrames,
      ...(e.pool && { pool: e.pool }),
    },
  }
}

export function readTraceData({ meta, arrays }: Bundle): TraceDataSent {
  const m = meta as Pick<TraceDataSent, 'summary' | 'streams' | 'frames' | 'tags' | 'markers' | 'pools'>
  const a = arrays as unknown as Omit<TraceDataSent, 'summary' | 'streams' | 'frames' | 'tags' | 'markers'>
  return {
    ...(a.device && { device: a.device }),
    ...(a.pool && { pool: a.pool }),
    ...(m.pools && { pools: m.pools }),
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
  }
}

// ---------------------------------------------------------------------------------------------
// replay:result — recorded layouts and replays alike, as strategies 0, 1, … listed in the metadata
// (`strategies`, ListedStrategy). Strategy i has its metric buckets under `s{i}.m.*` (end: exclusive
// event index) and its layout in pieces of LAYOUT_PIECE events, `s{i}.l{k}.op/address/size/
// requested/stream/event`, each piece's six columns one after another: a reader of the bundle as it
// arrives builds the model piece by piece while the rest is on its way. Layouts carry no aux column
// (the renderer does not read it: on a million-event trace it was a tenth of the bundle), and sizes
// travel as u32 where exact (narrowed).

/** Layout events in each piece of a strategy's layout. */
export const LAYOUT_PIECE = 1 << 17

export const LAYOUT_COLUMNS = ['op', 'address', 'size', 'requested', 'stream', 'event'] as const

/** One strategy's layout placed on request events (event: the request event it belongs to). */
export interface LayoutSent {
  op: Uint8Array
  address: BigUint64Array
  /** Bytes; u32 when every value fits (narrowed). */
  size: Float64Array | Uint32Array
  requested: Float64Array | Uint32Array
  /** Stream index in the trace's stream table; 0xFFFFFFFF for region events. */
  stream: Uint32Array
  event: Uint32Array
}

/** Metrics per bucket of consecutive request events [end[b - 1], end[b]). */
export interface MetricsSent {
  end: Uint32Array
  requestedMax: Float64Array
  requestedMin: Float64Array
  roundedMax: Float64Array
  roundedMin: Float64Array
  reservedMax: Float64Array
  reservedMin: Float64Array
  fragmentation: Float64Array
  deviceCalls: Float64Array
}

/** The metrics the renderer reads back (it draws no minimum of rounded bytes). */
export type StrategyMetrics = Omit<MetricsSent, 'roundedMin'>

export interface StrategyToSend {
  name: string
  strategy: string
  params: Record<string, unknown>
  /** A layout the input recorded, not a replay. */
  recorded: boolean
  summary: Record<string, number>
  metrics?: MetricsSent
  layout: LayoutSent
}

/** A strategy as the bundle's metadata lists it. */
export interface ListedStrategy {
  name: string
  strategy: string
  params: Record<string, unknown>
  recorded: boolean
  summary: Record<string, number>
  /** The layout's pieces, and its allocs and region events (what the renderer sizes its records by). */
  layout: { pieces: number; allocs: number; regionEvents: number }
}

const METRICS = ['end', 'requestedMax', 'roundedMax', 'reservedMax', 'requestedMin', 'roundedMin', 'reservedMin', 'fragmentation', 'deviceCalls'] as const

/**
 * A byte-count column as 32-bit integers when every value is one (sizes below 4 GiB: nearly every
 * layout), else as it is: half the bytes to send, and the reader sees the same numbers.
 */
export function narrowed(values: Float64Array | Uint32Array): Float64Array | Uint32Array {
  if (values instanceof Uint32Array) return values
  for (let k = 0; k < values.length; k++) {
    const v = values[k]!
    if (!(v >= 0 && v <= 0xffffffff && Math.floor(v) === v)) return values
  }
  return Uint32Array.from(values)
}

const pieceKey = (strategy: number, piece: number, column: (typeof LAYOUT_COLUMNS)[number]) => `s${strategy}.l${piece}.${column}`

/** Strategy i's layout as pieces of `piece` events (views, no copies); the counts the reader sizes its records by. */
function putLayout(arrays: Record<string, BundleArray>, i: number, l: LayoutSent, piece: number): ListedStrategy['layout'] {
  const n = l.op.length
  const columns: LayoutSent = { ...l, size: narrowed(l.size), requested: narrowed(l.requested) }
  let pieces = 0
  for (let start = 0; pieces === 0 || start < n; start += piece, pieces++) {
    const end = Math.min(n, start + piece)
    for (const column of LAYOUT_COLUMNS) arrays[pieceKey(i, pieces, column)] = columns[column].subarray(start, end)
  }
  let allocs = 0
  let regionEvents = 0
  for (let k = 0; k < n; k++) {
    const op = l.op[k]!
    if (op === LayoutOp.alloc) allocs++
    else if (op === LayoutOp.regionReserve || op === LayoutOp.vaReserve || op === LayoutOp.map) regionEvents++
  }
  return { pieces, allocs, regionEvents }
}

/** The replay:result bundle of `strategies`, in order; `piece`: layout events a piece (tests make it small). */
export function packReplay(strategies: readonly StrategyToSend[], piece = LAYOUT_PIECE): Bundle {
  const arrays: Record<string, BundleArray> = {}
  const listed: ListedStrategy[] = strategies.map((s, i) => {
    if (s.metrics) for (const name of METRICS) arrays[`s${i}.m.${name}`] = s.metrics[name]
    const layout = putLayout(arrays, i, s.layout, piece)
    return { name: s.name, strategy: s.strategy, params: s.params, recorded: s.recorded, summary: s.summary, layout }
  })
  return { meta: { strategies: listed }, arrays }
}

/** The strategies a replay bundle's metadata lists. */
export function listedStrategies(meta: unknown): ListedStrategy[] {
  return (meta as { strategies: ListedStrategy[] }).strategies
}

/** The byte where the last column of strategy `strategy`'s piece `piece` ends; BundleError if one is missing. */
export function layoutPieceEnd(arrays: Bundle['arrays'], strategy: number, piece: number): number {
  let end = 0
  for (const column of LAYOUT_COLUMNS) {
    const a = arrays[pieceKey(strategy, piece, column)]
    if (!a) throw new BundleError(`bundle: strategy ${strategy} has no layout column ${column} in piece ${piece}`)
    end = Math.max(end, a.byteOffset + a.byteLength)
  }
  return end
}

/** The columns of strategy `strategy`'s piece `piece` (views into the bundle). */
export function layoutPiece(arrays: Bundle['arrays'], strategy: number, piece: number): LayoutSent {
  const get = <T>(column: (typeof LAYOUT_COLUMNS)[number]) => arrays[pieceKey(strategy, piece, column)] as T
  return { op: get('op'), address: get('address'), size: get('size'), requested: get('requested'), stream: get('stream'), event: get('event') }
}

/** Strategy `strategy`'s metric buckets, if the bundle has them. */
export function strategyMetrics(arrays: Bundle['arrays'], strategy: number): StrategyMetrics | undefined {
  const get = <T>(name: (typeof METRICS)[number]) => arrays[`s${strategy}.m.${name}`] as T
  const end = get<Uint32Array | undefined>('end')
  if (!end) return undefined
  return {
    end,
    requestedMax: get('requestedMax'),
    requestedMin: get('requestedMin'),
    roundedMax: get('roundedMax'),
    reservedMax: get('reservedMax'),
    reservedMin: get('reservedMin'),
    fragmentation: get('fragmentation'),
    deviceCalls: get('deviceCalls'),
  }
}
