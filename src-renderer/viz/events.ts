// The allocator's state as a list of events: the request trace's events (alloc, free, marker,
// out-of-memory, trim) and, where a strategy's layout is shown beside them, the segments it
// reserved and released, in order. And "follow": every event of one block (its alloc and free)
// and of its address (what else lived there) through the trace.
// Pure functions over typed arrays; unit tests run them in Node.
import type { AllocBands } from './alloc-timeline.ts'
import { LIVE } from './alloc-timeline.ts'
import { NEVER, RegionKind, type StrategyModel } from './model.ts'

export const KIND_NAMES = ['alloc', 'free', 'marker', 'out of memory', 'trim (empty_cache)'] as const

export function kindName(kind: number): string {
  return KIND_NAMES[kind] ?? `kind ${kind}`
}

/** Rows of the list: each a request event, or a segment reserved or released at one. */
export interface EventRows {
  count: number
  /** Request event of each row, non-decreasing. */
  event: Uint32Array
  /** -1: the request event itself; else region index × 2 (+ 1: its release). */
  region: Int32Array
}

/**
 * The rows for a trace of `events` events; with `model`, its memory regions (segments) too, a
 * reserve before the request event it happened in and a release before it as well (both are what
 * serving that request did).
 */
export function eventRows(events: number, model?: StrategyModel | null): EventRows {
  const marks: number[] = []
  if (model) {
    const r = model.regions
    for (let k = 0; k < r.count; k++) {
      if (r.kind[k] !== RegionKind.memory) continue
      marks.push(r.from[k]!, k * 2)
      if (r.to[k] !== NEVER) marks.push(r.to[k]!, k * 2 + 1)
    }
  }
  const regionRows = marks.length / 2
  const order = Array.from({ length: regionRows }, (_, i) => i).sort((a, b) => marks[2 * a]! - marks[2 * b]! || a - b)
  const count = events + regionRows
  const event = new Uint32Array(count)
  const region = new Int32Array(count)
  let j = 0
  let row = 0
  for (let e = 0; e < events; e++) {
    while (j < regionRows && marks[2 * order[j]!]! <= e) {
      event[row] = marks[2 * order[j]!]!
      region[row++] = marks[2 * order[j]! + 1]!
      j++
    }
    event[row] = e
    region[row++] = -1
  }
  return { count: row, event: event.subarray(0, row), region: region.subarray(0, row) }
}

/** The row of request event `e` (its own row, after its segment rows). */
export function rowOfEvent(rows: EventRows, e: number): number {
  let lo = 0
  let hi = rows.count
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if (rows.event[mid]! < e) lo = mid + 1
    else hi = mid
  }
  while (lo < rows.count - 1 && rows.region[lo]! >= 0 && rows.event[lo] === e) lo++
  return lo
}

/** The block a strategy placed for the alloc at request event `e`, or -1. Blocks are in event order. */
export function blockOfAlloc(model: StrategyModel, e: number): number {
  const from = model.blocks.from
  let lo = 0
  let hi = model.blocks.count
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if (from[mid]! < e) lo = mid + 1
    else hi = mid
  }
  return lo < model.blocks.count && from[lo] === e ? lo : -1
}

/** The alloc event of the block an alloc or free event is about, or -1. */
export function allocEventOf(kind: Uint8Array, id: Uint32Array, bands: AllocBands, e: number): number {
  if (kind[e] === 0) return e
  if (kind[e] !== 1) return -1
  const band = bands.bandOfId[id[e]!] ?? -1
  return band >= 0 && bands.allocEvent[band]! < e ? bands.allocEvent[band]! : -1
}

/** What is followed: one block of a strategy, its request id and address. */
export interface Followed {
  strategy: number
  block: number
  /** Request id (the trace's id column) of the block. */
  id: number
  address: number
  /** The block's own events (its alloc, its free). */
  own: Uint32Array
  /** Every event of any block at its address (what else lived there), the block's own included, sorted. */
  events: Uint32Array
  /** The blocks at that address. */
  blocks: number
}

/** Follows block `k` of `model`: its events and every alloc and free at its address. */
export function follow(kind: Uint8Array, id: Uint32Array, bands: AllocBands, model: StrategyModel, strategy: number, k: number): Followed {
  const b = model.blocks
  const address = b.address[k]!
  const allocAt = b.from[k]!
  const requestId = id[allocAt]!
  const band = bands.bandOfId[requestId] ?? -1
  const freeAt = band >= 0 ? bands.freeEvent[band]! : LIVE
  const own = freeAt === LIVE ? [allocAt] : [allocAt, freeAt]
  const all = new Set<number>(own)
  let blocks = 0
  for (let j = 0; j < b.count; j++) {
    if (b.address[j] !== address) continue
    blocks++
    const from = b.from[j]!
    all.add(from)
    const other = bands.bandOfId[id[from]!] ?? -1
    if (other >= 0 && bands.freeEvent[other] !== LIVE && kind[from] === 0) all.add(bands.freeEvent[other]!)
  }
  return {
    strategy,
    block: k,
    id: requestId,
    address,
    own: Uint32Array.from(own),
    events: Uint32Array.from([...all].sort((x, y) => x - y)),
    blocks,
  }
}

/** The next followed event after `e` (direction 1) or before it (-1), wrapping; -1 if none. */
export function stepFollowed(events: Uint32Array, e: number, direction: 1 | -1): number {
  if (events.length === 0) return -1
  if (direction > 0) {
    for (const x of events) if (x > e) return x
    return events[0]!
  }
  for (let i = events.length - 1; i >= 0; i--) if (events[i]! < e) return events[i]!
  return events[events.length - 1]!
}
