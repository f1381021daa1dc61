// The key layout of the two bundles the host sends the renderer (bundle.ts is their container): a
// trace's data (`trace:data`) and a replay's strategies (`replay:result`). Each writer sits beside
// its reader, so the names written are the names read. Pure: the host writes, the renderer's decode
// worker reads.
import { AddressTable, hashOf } from './address-table.ts'
import { BundleError } from './bundle.ts'
import type { Bundle, BundleArray, TraceSummary } from './contract.ts'
import type { Device } from './device.ts'
import { LayoutOp, reuseKindOf, type ReuseKind } from './layout.ts'
import type { StrategySummary } from './summary.ts'

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
// region, which the maps do not draw, stay behind; so does the aux column. Addresses travel as u32
// words above a base where they fit (AddressWords), request events as u16 steps where every step
// fits. On a million-event trace caching's layout is 16.1 MB this way against 57.2 MB with every
// column for every event.

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
 * for each alloc, in order. Sizes are u32 where every value fits.
 */
export interface LayoutSent {
  op: Uint8Array
  /** As they are (u64), or u32 words: address = words.base + word · 2^words.shift (LayoutSent's `words`). */
  address: BigUint64Array | Uint32Array
  /** As they are (u32), or u16 steps: each event less the one before, the first less `eventBase`. */
  event: Uint32Array | Uint16Array
  /** With u16 steps: the event the first step counts from (the first event itself: its step is 0). */
  eventBase?: number
  size: Float64Array | Uint32Array
  requested: Float64Array | Uint32Array
  stream: Uint32Array
  /** How u32 address words read (absent: addresses are u64). */
  words?: AddressWords
}

/**
 * Addresses as 32-bit words: address = base + word · 2^shift. Every address the model reads fits
 * this way when a strategy's memory spans less than 2^32 of its alignment (a 512-byte aligned
 * caching pool: up to 2 TiB). Events whose address the model does not read (failure, reset, trim)
 * have word 0.
 */
export interface AddressWords {
  base: number
  shift: number
}

/** Whether the model reads the address of an event of this op. */
function addressed(op: number): boolean {
  return op !== LayoutOp.failure && op !== LayoutOp.reset && op !== LayoutOp.trim
}

/** `address` (u64, as 32-bit halves) as u32 words above a base, or undefined where they do not fit. */
function addressWords(op: Uint8Array, halves: Uint32Array): { words: Uint32Array; base: number; shift: number } | undefined {
  const n = op.length
  let base = Infinity
  let top = 0
  // The words' unit: the largest power of two every address is a multiple of (up to 2^32), from
  // the low halves alone.
  let low = 0
  for (let k = 0; k < n; k++) {
    if (!addressed(op[k]!)) continue
    if (halves[2 * k + 1]! >= 0x200000) return undefined // 2^53 and above: not exact as a number
    const a = halves[2 * k]! + halves[2 * k + 1]! * 4294967296
    if (a < base) base = a
    if (a > top) top = a
    low |= halves[2 * k]!
  }
  if (base === Infinity) base = top = 0
  const shift = low === 0 ? 32 : 31 - Math.clz32(low & -low)
  const unit = 2 ** shift
  if ((top - base) / unit > 0xffffffff) return undefined
  const words = new Uint32Array(n)
  for (let k = 0; k < n; k++) if (addressed(op[k]!)) words[k] = (halves[2 * k]! + halves[2 * k + 1]! * 4294967296 - base) / unit
  return { words, base, shift }
}

/**
 * Request events (ascending) as u16 steps, each piece's first step 0 (its base is that event,
 * `starts` the pieces' first events), or undefined where a step does not fit.
 */
function eventSteps(event: Uint32Array, starts: readonly number[]): Uint16Array | undefined {
  const steps = new Uint16Array(event.length)
  let next = 1
  for (let k = 1; k < event.length; k++) {
    if (k === starts[next]) {
      next++
      continue
    }
    const step = event[k]! - event[k - 1]!
    if (step < 0 || step > 0xffff) return undefined
    steps[k] = step
  }
  return steps
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

/** Piece boundaries of a sent layout: where piece k starts among its events, its sizes and its allocs; with u16 event steps, the event each piece counts from. */
export interface SentPieces {
  events: number[]
  sizes: number[]
  allocs: number[]
  eventBases?: number[]
}

/**
 * `l` as it travels (LayoutSent), where each piece of `piece` events starts in its columns, and
 * how many region events it has (regions, VA reservations and mappings made: with its allocs,
 * `layout.requested.length`, what a reader sizes its records by). Columns of every event are views
 * of `l`'s own when every event is drawn, copies otherwise.
 */
export function sentLayout(l: LayoutOnEvents, piece = LAYOUT_PIECE): { layout: LayoutSent; pieces: SentPieces; regionEvents: number } {
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
  // Counted first, and whether every size and requested size is a u32: each column is made once,
  // in the type it travels in.
  let sized = 0
  let allocs = 0
  let regionEvents = 0
  let wideSize = false
  let wideRequested = false
  const fits = (v: number) => v >= 0 && v <= 0xffffffff && Math.floor(v) === v
  for (let k = 0; k < n; k++) {
    const o = ops[k]!
    if (carriesSize(o)) {
      sized++
      if (!wideSize && !fits(l.size[k]!)) wideSize = true
    }
    if (o === LayoutOp.alloc) {
      allocs++
      if (!wideRequested && !fits(l.requested[k]!)) wideRequested = true
    } else if (o === LayoutOp.regionReserve || o === LayoutOp.vaReserve || o === LayoutOp.map) regionEvents++
  }
  const size = wideSize ? new Float64Array(sized) : new Uint32Array(sized)
  const requested = wideRequested ? new Float64Array(allocs) : new Uint32Array(allocs)
  const stream = new Uint32Array(allocs)
  const pieces: SentPieces = { events: [], sizes: [], allocs: [] }
  let j = 0
  let s = 0
  let a = 0
  let untilPiece = 0
  for (let k = 0; k < n; k++) {
    const o = ops[k]!
    if (!drawn(o)) continue
    if (untilPiece-- === 0) {
      untilPiece = piece - 1
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
  const words = addressWords(op, new Uint32Array(address.buffer, address.byteOffset, kept * 2))
  const steps = eventSteps(event, pieces.events)
  if (steps) pieces.eventBases = pieces.events.map((j) => event[j] ?? 0)
  const layout: LayoutSent = {
    op,
    address: words?.words ?? address,
    event: steps ?? event,
    ...(steps && { eventBase: pieces.eventBases![0]! }),
    size,
    requested,
    stream,
    ...(words && { words: { base: words.base, shift: words.shift } }),
  }
  return { layout, pieces, regionEvents }
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
  summary: StrategySummary
  metrics?: MetricsSent
  layout: LayoutOnEvents
  /** The layout is cut to what the map shows after this request event (layoutAt): a preview, its history to follow. */
  previewAt?: number
  /** The replay's own cut of the layout (ReplayOptions.previewAt), for previewOf. */
  cut?: LayoutCut
}

/** A strategy as the bundle's metadata lists it. */
export interface ListedStrategy {
  name: string
  strategy: string
  params: Record<string, unknown>
  recorded: boolean
  summary: StrategySummary
  /** Its layout holds only what its map shows after this event (StrategyToSend.previewAt). */
  previewAt?: number
  /** The layout's pieces, and its allocs and region events (what the renderer sizes its records by). */
  layout: {
    pieces: number
    allocs: number
    regionEvents: number
    /** With u32 address words: how they read. */
    words?: AddressWords
    /** With u16 event steps: each piece's base event. */
    eventBases?: number[]
  }
}

const METRICS = ['end', 'requestedMax', 'roundedMax', 'reservedMax', 'requestedMin', 'roundedMin', 'reservedMin', 'fragmentation', 'deviceCalls'] as const

const pieceKey = (strategy: number, piece: number, column: (typeof LAYOUT_COLUMNS)[number]) => `s${strategy}.l${piece}.${column}`

/** `l` as it travels, in pieces of `piece` events, in order (what StrategyModelBuilder.add takes, one after another), and its counts (sentLayout). */
export function sentPieces(l: LayoutOnEvents, piece = LAYOUT_PIECE): { pieces: LayoutSent[]; allocs: number; regionEvents: number } {
  const { layout, pieces, regionEvents } = sentLayout(l, piece)
  const count = pieces.events.length
  const bounds = (starts: number[], total: number, k: number) => [starts[k]!, k + 1 < count ? starts[k + 1]! : total] as const
  const sent = Array.from({ length: count }, (_, k): LayoutSent => {
    const [e0, e1] = bounds(pieces.events, layout.op.length, k)
    const [s0, s1] = bounds(pieces.sizes, layout.size.length, k)
    const [a0, a1] = bounds(pieces.allocs, layout.requested.length, k)
    return {
      op: layout.op.subarray(e0, e1),
      address: layout.address.subarray(e0, e1),
      event: layout.event.subarray(e0, e1),
      size: layout.size.subarray(s0, s1),
      requested: layout.requested.subarray(a0, a1),
      stream: layout.stream.subarray(a0, a1),
      ...(layout.words && { words: layout.words }),
      ...(pieces.eventBases && { eventBase: pieces.eventBases[k]! }),
    }
  })
  return { pieces: sent, allocs: layout.requested.length, regionEvents }
}

/** Strategy i's layout as it travels (sentPieces); the counts the reader sizes its records by. */
function putLayout(arrays: Record<string, BundleArray>, i: number, l: LayoutOnEvents, piece: number): ListedStrategy['layout'] {
  const { pieces, allocs, regionEvents } = sentPieces(l, piece)
  pieces.forEach((p, k) => {
    for (const column of LAYOUT_COLUMNS) arrays[pieceKey(i, k, column)] = p[column]
  })
  const words = pieces[0]!.words
  const steps = pieces[0]!.eventBase !== undefined
  return {
    pieces: pieces.length,
    allocs,
    regionEvents,
    ...(words && { words }),
    ...(steps && { eventBases: pieces.map((p) => p.eventBase!) }),
  }
}

/** The replay:result bundle of `strategies`, in order; `piece`: layout events a piece (tests make it small). */
export function packReplay(strategies: readonly StrategyToSend[], piece = LAYOUT_PIECE, device?: Device): Bundle {
  const arrays: Record<string, BundleArray> = {}
  const listed: ListedStrategy[] = strategies.map((s, i) => {
    if (s.metrics) for (const name of METRICS) arrays[`s${i}.m.${name}`] = s.metrics[name]
    const layout = putLayout(arrays, i, s.layout, piece)
    return {
      name: s.name,
      strategy: s.strategy,
      params: s.params,
      recorded: s.recorded,
      summary: s.summary,
      ...(s.previewAt !== undefined && { previewAt: s.previewAt }),
      layout,
    }
  })
  // The device the replays ran on without a cap (src-shared/device.ts), for the compare view's header.
  return { meta: { strategies: listed, ...(device && { device }) }, arrays }
}

/**
 * A layout cut at request event `at` (layoutAt): the indices of the layout events kept, ascending,
 * and the joined ranges (ascending) of the regions not present then, which stand in for their
 * events. The native replay makes the same cut in each target's thread (ReplayOptions.previewAt).
 */
export interface LayoutCut {
  event: number
  kept: Uint32Array
  goneStart: BigUint64Array
  goneEnd: BigUint64Array
}

/**
 * A strategy's layout cut to what its map shows after request event `at`: every region event (or,
 * where regions are released, those of the regions present then and joined stand-ins for the rest:
 * the map's address space stays the whole one), failure, reset and trim, and the events of the
 * blocks present after `at` (allocated at or before it, not yet freed). The model built from the cut
 * (src-renderer/viz/model.ts) holds exactly the full model's records present at `at`, each with
 * its whole interval, so the map and its figures at `at` are the full ones; at any other event they
 * are not. A few kilobytes to a few megabytes where the whole layout is tens: a map drawn before
 * its history has crossed (docs/architecture.md, "The opening view"). Undefined where a cut would
 * draw otherwise: bump allocators (a freed block stays as dead space until a reset) and layouts
 * with no regions (their address space is made from every block).
 */
export function layoutAt(l: LayoutOnEvents, at: number, reuse: ReuseKind): LayoutOnEvents | undefined {
  const cut = cutAt(l, at, reuse)
  return cut && cutLayout(l, cut)
}

/** Which events layoutAt keeps, and the ranges that stand in for the regions it leaves out. */
export function cutAt(l: LayoutOnEvents, at: number, reuse: ReuseKind): LayoutCut | undefined {
  if (reuse !== 'any') return undefined
  const n = l.op.length
  const ops = l.op
  const events = l.event
  const halves = new Uint32Array(l.address.buffer, l.address.byteOffset, n * 2)
  const addressAt = (i: number) => halves[2 * i]! + halves[2 * i + 1]! * 4294967296
  const hashAt = (i: number) => hashOf(halves[2 * i]!, halves[2 * i + 1]!)
  const keep = new Uint8Array(n)
  // Open blocks as the model's builder reads them: by address, the index of their alloc; the
  // first pending free of each open alloc plus one (by alloc index; 0: none, so the column needs
  // no fill: few blocks are freed pending, and most of its pages are never touched).
  const open = new AddressTable()
  const pending = new Int32Array(n)
  let regions = false
  let releases = false
  for (let i = 0; i < n && !releases; i++) releases = ops[i] === LayoutOp.regionRelease
  // Where regions are released (a slab allocator's hundreds of thousands), only those present at
  // `at` keep their events; the others' ranges, joined, stand in as regions reserved and released
  // at event 0 (present at no event), so the map's address space is still every range ever held.
  const openRegions = new AddressTable(16)
  // Regions gone at `at`, by start: the index of the largest reserved there (a slab allocator
  // reserves the same few ranges again and again).
  const gone = new AddressTable(16)
  const ended = (alloc: number, end: number, endEvent: number) => {
    if (events[alloc]! <= at && at < endEvent) {
      keep[alloc] = 1
      if (end >= 0) keep[end] = 1
      if (pending[alloc]! > 0) keep[pending[alloc]! - 1] = 1
    }
  }
  const regionEnded = (reserve: number, release: number, releaseEvent: number) => {
    if (events[reserve]! <= at && at < releaseEvent) {
      keep[reserve] = 1
      if (release >= 0) keep[release] = 1
    } else {
      const start = addressAt(reserve)
      const hash = hashAt(reserve)
      const before = gone.get(start, hash)
      if (before < 0 || l.size[before]! < l.size[reserve]!) gone.set(start, hash, reserve)
    }
  }
  for (let i = 0; i < n; i++) {
    const op = ops[i]!
    if (op === LayoutOp.alloc || op === LayoutOp.free || op === LayoutOp.freeCompleted || op === LayoutOp.freePending) {
      const address = addressAt(i)
      const hash = hashAt(i)
      const alloc = open.get(address, hash)
      if (op === LayoutOp.alloc) {
        // A second alloc at an open address leaves the first open for good (the builder's rule).
        if (alloc >= 0) ended(alloc, -1, Infinity)
        open.set(address, hash, i)
      } else if (alloc < 0) continue
      else if (op === LayoutOp.freePending) {
        if (pending[alloc] === 0) pending[alloc] = i + 1
      } else {
        ended(alloc, i, events[i]!)
        open.delete(address, hash)
      }
      continue
    }
    switch (op) {
      case LayoutOp.reset:
        open.forEachValue((alloc) => ended(alloc, -1, events[i]!))
        open.clear()
        keep[i] = 1
        break
      case LayoutOp.split:
      case LayoutOp.merge:
        break
      case LayoutOp.regionReserve:
        regions = true
        if (releases) {
          const address = addressAt(i)
          const hash = hashAt(i)
          const before = openRegions.get(address, hash)
          if (before >= 0) regionEnded(before, -1, Infinity)
          openRegions.set(address, hash, i)
        } else keep[i] = 1
        break
      case LayoutOp.regionRelease: {
        const address = addressAt(i)
        const hash = hashAt(i)
        const reserve = openRegions.get(address, hash)
        if (reserve >= 0) {
          regionEnded(reserve, i, events[i]!)
          openRegions.delete(address, hash)
        }
        break
      }
      case LayoutOp.vaReserve:
      case LayoutOp.map:
        regions = true
        keep[i] = 1
        break
      default:
        keep[i] = 1
    }
  }
  if (!regions) return undefined
  open.forEachValue((alloc) => ended(alloc, -1, Infinity))
  openRegions.forEachValue((reserve) => regionEnded(reserve, -1, Infinity))
  // The ranges of regions not present at `at`, sorted and joined where they touch or overlap.
  const ranges: [number, number][] = []
  gone.forEachValue((k) => ranges.push([addressAt(k), addressAt(k) + l.size[k]!]))
  ranges.sort((a, b) => a[0] - b[0])
  const joined: [number, number][] = []
  for (const [start, end] of ranges) {
    const last = joined.at(-1)
    if (last && start <= last[1]) last[1] = Math.max(last[1], end)
    else joined.push([start, end])
  }
  let kept = 0
  for (let i = 0; i < n; i++) kept += keep[i]!
  const indices = new Uint32Array(kept)
  for (let i = 0, j = 0; i < n; i++) if (keep[i] !== 0) indices[j++] = i
  return { event: at, kept: indices, goneStart: BigUint64Array.from(joined, ([s]) => BigInt(s)), goneEnd: BigUint64Array.from(joined, ([, e]) => BigInt(e)) }
}

/** The layout of a cut (cutAt, or the native replay's): the stand-in regions at event 0, then the events kept. */
export function cutLayout(l: LayoutOnEvents, cut: LayoutCut): LayoutOnEvents {
  const stand = cut.goneStart.length
  const kept = cut.kept.length + stand * 2
  const widths = Array.from(cut.goneStart, (s, k) => Number(cut.goneEnd[k]! - s))
  const sizeType = l.size instanceof Uint32Array && widths.every((w) => w <= 0xffffffff) ? Uint32Array : Float64Array
  const requestedType = l.requested instanceof Uint32Array ? Uint32Array : Float64Array
  const out: LayoutOnEvents = {
    op: new Uint8Array(kept),
    address: new BigUint64Array(kept),
    size: new sizeType(kept),
    requested: new requestedType(kept),
    stream: new Uint32Array(kept),
    event: new Uint32Array(kept),
  }
  let j = 0
  for (let k = 0; k < stand; k++)
    for (const op of [LayoutOp.regionReserve, LayoutOp.regionRelease]) {
      out.op[j] = op
      out.address[j] = cut.goneStart[k]!
      out.size[j] = widths[k]!
      out.stream[j] = 0xffffffff
      j++
    }
  const halves = new Uint32Array(l.address.buffer, l.address.byteOffset, l.op.length * 2)
  const outHalves = new Uint32Array(out.address.buffer, 0, kept * 2)
  for (const i of cut.kept) {
    out.op[j] = l.op[i]!
    outHalves[2 * j] = halves[2 * i]!
    outHalves[2 * j + 1] = halves[2 * i + 1]!
    out.size[j] = l.size[i]!
    out.requested[j] = l.requested[i]!
    out.stream[j] = l.stream[i]!
    out.event[j] = l.event[i]!
    j++
  }
  return out
}

/**
 * A strategy to send as its preview at request event `at` (layoutAt; the replay's own cut where it
 * made one there), or as it is where it cannot be cut.
 */
export function previewOf(s: StrategyToSend, at: number): StrategyToSend {
  const reuse = reuseKindOf(s.strategy, s.params)
  const { cut: made, ...rest } = s
  const cut = made?.event === at && reuse === 'any' ? made : cutAt(s.layout, at, reuse)
  return cut ? { ...rest, layout: cutLayout(s.layout, cut), previewAt: at } : rest
}

/**
 * Strategy `i` of a replay bundle alone, as a replay bundle of its own (its arrays are the same
 * views, renamed as strategy 0); past the last strategy, a bundle of none.
 */
export function strategyBundle(bundle: Bundle, i: number): Bundle {
  const listed = listedStrategies(bundle.meta)
  const device = replayDevice(bundle.meta)
  const meta = (strategies: ListedStrategy[]) => ({ strategies, ...(device && { device }) })
  if (i >= listed.length) return { meta: meta([]), arrays: {} }
  const prefix = `s${i}.`
  const arrays: Record<string, BundleArray> = {}
  for (const [key, array] of Object.entries(bundle.arrays)) if (key.startsWith(prefix)) arrays[`s0.${key.slice(prefix.length)}`] = array
  return { meta: meta([listed[i]!]), arrays }
}

/** The device a replay bundle's replays ran on (packReplay), where it says. */
export function replayDevice(meta: unknown): Device | undefined {
  return (meta as { device?: Device }).device
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

/** The columns of strategy `strategy`'s piece `piece` (views into the bundle); `listed`: the strategy as the metadata lists it. */
export function layoutPiece(arrays: Bundle['arrays'], listed: ListedStrategy, strategy: number, piece: number): LayoutSent {
  const get = <T>(column: (typeof LAYOUT_COLUMNS)[number]) => arrays[pieceKey(strategy, piece, column)] as T
  const { words, eventBases } = listed.layout
  return {
    op: get('op'),
    address: get('address'),
    event: get('event'),
    size: get('size'),
    requested: get('requested'),
    stream: get('stream'),
    ...(words && { words }),
    ...(eventBases && { eventBase: eventBases[piece] ?? 0 }),
  }
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
