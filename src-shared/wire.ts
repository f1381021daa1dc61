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
// event index) and its layout in pieces of LAYOUT_PIECE events, `s{i}.l{k}.op/address/event/size/
// requested/stream`, each piece's six columns one after another: a reader of the bundle as it
// arrives builds the model piece by piece while the rest is on its way.
//
// A layout travels as the renderer reads it (LayoutSent, docs/architecture.md "Layouts on the
// wire"): op, address and event for every event it draws; a size only for the events whose size it
// reads (carriesSize); requested bytes and stream only for allocs. Splits and merges inside a
// region, which the maps do not draw, stay behind; so does the aux column. On a million-event trace
// caching's layout is 24.6 MB this way against 57 MB with every column for every event.

/** Layout events in each piece of a strategy's layout. */
export const LAYOUT_PIECE = 1 << 17

export const LAYOUT_COLUMNS = ['op', 'address', 'event', 'size', 'requested', 'stream'] as const

/** One strategy's layout placed on request events, every column for every event (event: the request event it belongs to). */
export interface LayoutOnEvents {
  op: Uint8Array
  address: BigUint64Array
  /** Bytes. */
  size: Float64Array | Uint32Array
  requested: Float64Array | Uint32Array
  /** Stream index in the trace's stream table; 0xFFFFFFFF for region events. */
  stream: Uint32Array
  event: Uint32Array
}

/**
 * A layout as it travels and as the renderer's model reads it: `op`, `address` and `event` one a
 * drawn event; `size` one for each event that carriesSize, in order; `requested` and `stream` one
 * for each alloc, in order. Sizes are u32 where every value fits (narrowed).
 */
export interface LayoutSent {
  op: Uint8Array
  address: BigUint64Array
  event: Uint32Array
  size: Float64Array | Uint32Array
  requested: Float64Array | Uint32Array
  stream: Uint32Array
}

/** Whether the renderer reads the size of an event of this op: what a block, region or mapping occupies, what an unmap or trim released. */
export function carriesSize(op: number): boolean {
  return (
    op === LayoutOp.alloc || op === LayoutOp.regionReserve || op === LayoutOp.vaReserve || op === LayoutOp.map || op === LayoutOp.unmap || op === LayoutOp.trim
  )
}

/** Whether an event of this op is drawn at all: splits and merges move no block and no region's edge. */
function drawn(op: number): boolean {
  return op !== LayoutOp.split && op !== LayoutOp.merge
}

/** Piece boundaries of a sent layout: where piece k starts among its events, its sizes and its allocs. */
export interface SentPieces {
  events: number[]
  sizes: number[]
  allocs: number[]
}

/**
 * `l` as it travels (LayoutSent), and where each piece of `piece` events starts in its columns.
 * Columns of every event are views of `l`'s own when every event is drawn, copies otherwise.
 */
export function sentLayout(l: LayoutOnEvents, piece = LAYOUT_PIECE): { layout: LayoutSent; pieces: SentPieces } {
  const n = l.op.length
  const ops = l.op
  let kept = 0
  for (let k = 0; k < n; k++) if (drawn(ops[k]!)) kept++
  const whole = kept === n
  const op = whole ? ops : new Uint8Array(kept)
  const address = whole ? l.address : new BigUint64Array(kept)
  const event = whole ? l.event : new Uint32Array(kept)
  // Addresses copied as their two 32-bit halves: no BigInt an event.
  const fromWords = new Uint32Array(l.address.buffer, l.address.byteOffset, n * 2)
  const toWords = new Uint32Array(address.buffer, address.byteOffset, kept * 2)
  let sized = 0
  let allocs = 0
  for (let k = 0; k < n; k++) {
    const o = ops[k]!
    if (carriesSize(o)) sized++
    if (o === LayoutOp.alloc) allocs++
  }
  const size = new Float64Array(sized)
  const requested = new Float64Array(allocs)
  const stream = new Uint32Array(allocs)
  const pieces: SentPieces = { events: [], sizes: [], allocs: [] }
  let j = 0
  let s = 0
  let a = 0
  for (let k = 0; k < n; k++) {
    const o = ops[k]!
    if (!drawn(o)) continue
    if (j % piece === 0) {
      pieces.events.push(j)
      pieces.sizes.push(s)
      pieces.allocs.push(a)
    }
    if (!whole) {
      op[j] = o
      toWords[2 * j] = fromWords[2 * k]!
      toWords[2 * j + 1] = fromWords[2 * k + 1]!
      event[j] = l.event[k]!
    }
    if (carriesSize(o)) size[s++] = l.size[k]!
    if (o === LayoutOp.alloc) {
      requested[a] = l.requested[k]!
      stream[a++] = l.stream[k]!
    }
    j++
  }
  // An empty layout still has one (empty) piece.
  if (pieces.events.length === 0) {
    pieces.events.push(0)
    pieces.sizes.push(0)
    pieces.allocs.push(0)
  }
  return { layout: { op, address, event, size: narrowed(size), requested: narrowed(requested), stream }, pieces }
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
  layout: LayoutOnEvents
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

/** Strategy i's layout as it travels (sentLayout), in pieces of `piece` events; the counts the reader sizes its records by. */
function putLayout(arrays: Record<string, BundleArray>, i: number, l: LayoutOnEvents, piece: number): ListedStrategy['layout'] {
  const { layout, pieces } = sentLayout(l, piece)
  const count = pieces.events.length
  const bounds = (starts: number[], total: number, k: number) => [starts[k]!, k + 1 < count ? starts[k + 1]! : total] as const
  for (let k = 0; k < count; k++) {
    const [e0, e1] = bounds(pieces.events, layout.op.length, k)
    const [s0, s1] = bounds(pieces.sizes, layout.size.length, k)
    const [a0, a1] = bounds(pieces.allocs, layout.requested.length, k)
    arrays[pieceKey(i, k, 'op')] = layout.op.subarray(e0, e1)
    arrays[pieceKey(i, k, 'address')] = layout.address.subarray(e0, e1)
    arrays[pieceKey(i, k, 'event')] = layout.event.subarray(e0, e1)
    arrays[pieceKey(i, k, 'size')] = layout.size.subarray(s0, s1)
    arrays[pieceKey(i, k, 'requested')] = layout.requested.subarray(a0, a1)
    arrays[pieceKey(i, k, 'stream')] = layout.stream.subarray(a0, a1)
  }
  let regionEvents = 0
  for (let k = 0; k < layout.op.length; k++) {
    const op = layout.op[k]!
    if (op === LayoutOp.regionReserve || op === LayoutOp.vaReserve || op === LayoutOp.map) regionEvents++
  }
  return { pieces: count, allocs: layout.requested.length, regionEvents }
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
  return { op: get('op'), address: get('address'), event: get('event'), size: get('size'), requested: get('requested'), stream: get('stream') }
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
