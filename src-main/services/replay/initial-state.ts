// The allocator's state when a recording's window opened (docs/architecture.md, "Replay from the
// recorded state"): a recording that began late, or whose ring buffer dropped its oldest events,
// opens on segments that already held blocks and free space. The PyTorch snapshot importer
// reconstructs them backwards from the final `segments` (mapper.ts) as the recorded layout's first
// rows, and marks how many rows and request events those stand-ins are (the trace properties
// below); this module reads them back as the replay's initial state (ReplayTarget.initialState),
// for a trace just imported and for one read back from a trace file alike.
import { LayoutOp, type LayoutTrace } from '../../../src-shared/layout.ts'
import type { StrategyResult } from '../../../src-shared/results.ts'
import type { ReplayInitialState } from '../../../native/index.js'
import { RECORDED_LAYOUT_NAME, STAND_IN_EVENTS, STAND_IN_ROWS } from '../import/pytorch/types.ts'
import { EventKind, type RequestTrace } from '../trace/model.ts'
import { badArgument, describe, isPlainObject } from './allocators.ts'

/** PyTorch's small-pool segment (kSmallBuffer): only the small pool has segments of this size. */
const SMALL_SEGMENT = 2 * 1024 * 1024
/** The page an expandable segment of the large pool maps (kLargeBuffer). */
const LARGE_PAGE = 20 * 1024 * 1024

export interface WindowOpenState {
  state: ReplayInitialState
  segments: number
  /** Bytes the segments hold (reserved when the window opened). */
  bytes: number
  blocks: number
  /** Blocks freed by the program before the window and still waiting for their streams: seeded as free space. */
  pendingAsFree: number
  /** The segments are mapped runs of expandable segments (all of them are, or none). */
  expandable: boolean
  /** Expandable: the most address space the runs of one pool and stream span (what one segment must reserve). */
  span: number
}

export type WindowOpen = { kind: 'empty' } | { kind: 'state'; open: WindowOpenState } | { kind: 'unusable'; reason: string }

/**
 * The window-open state of a trace, from its recorded PyTorch layout: `empty` where the recording
 * began before its first allocation, `unusable` (with the reason) where the trace does not let
 * vramscope rebuild it (several devices, stand-ins that do not pair up, segments of both kinds).
 */
export function windowOpenState(trace: RequestTrace, strategies: readonly StrategyResult[]): WindowOpen {
  const rowsText = trace.meta.properties[STAND_IN_ROWS]
  const eventsText = trace.meta.properties[STAND_IN_EVENTS]
  if (rowsText === undefined || eventsText === undefined) return { kind: 'empty' }
  const rowCounts = rowsText.split(',').map(Number)
  const standInEvents = Number(eventsText)
  if (rowCounts.every((n) => n === 0)) return { kind: 'empty' }
  const recorded = strategies.filter((s) => s.strategy === 'pytorch' && s.layout !== undefined)
  if (rowCounts.length !== 1 || recorded.length !== 1 || recorded[0]!.name !== RECORDED_LAYOUT_NAME)
    return { kind: 'unusable', reason: 'the trace holds several devices: the recorded state is rebuilt for a single-device trace only' }
  const layout = recorded[0]!.layout!
  const rows = rowCounts[0]!
  const events = trace.events
  if (
    !Number.isSafeInteger(rows) ||
    rows < 0 ||
    rows > layout.op.length ||
    !Number.isSafeInteger(standInEvents) ||
    standInEvents < 0 ||
    standInEvents > events.kind.length
  )
    return {
      kind: 'unusable',
      reason: `the trace's ${STAND_IN_ROWS} (${rowsText}) or ${STAND_IN_EVENTS} (${eventsText}) does not fit its recorded layout and events`,
    }
  return buildState(trace, layout, rows, standInEvents)
}

function buildState(trace: RequestTrace, layout: LayoutTrace, rows: number, standInEvents: number): WindowOpen {
  const streamIndex = new Map<number, number>()
  trace.tables.streams.forEach((name, i) => {
    const v = Number(name)
    streamIndex.set(Number.isFinite(v) ? v : i, i)
  })
  const unknownStream = trace.tables.streams.length
  const segAddress: bigint[] = []
  const segSize: number[] = []
  const segStream: number[] = []
  const segPool: number[] = []
  const segFlags: number[] = []
  const segStreamKnown: boolean[] = []
  const blockAddress: bigint[] = []
  const blockSize: number[] = []
  const blockEvent: number[] = []
  let pendingAsFree = 0
  let nextEvent = 0
  const events = trace.events
  for (let k = 0; k < rows; k++) {
    const op = layout.op[k]!
    if (op === LayoutOp.regionReserve || op === LayoutOp.map) {
      const size = layout.size[k]!
      const aux = layout.aux?.[k] ?? 0
      const stream = streamIndex.get(layout.stream[k]!)
      segAddress.push(layout.address[k]!)
      segSize.push(size)
      segStream.push(stream ?? unknownStream)
      segStreamKnown.push(stream !== undefined)
      segPool.push(0)
      // aux: 1 small pool, 2 large, 0 unknown (freed or unmapped before the end): by its size, as
      // only the small pool has 2 MiB segments and maps 2 MiB pages (the large pool 20 MiB ones).
      const small = aux === 1 || (aux === 0 && (op === LayoutOp.map ? size % LARGE_PAGE !== 0 : size === SMALL_SEGMENT))
      segFlags.push((small ? 1 : 0) | (op === LayoutOp.map ? 2 : 0))
      continue
    }
    if (op !== LayoutOp.alloc) continue
    if (k + 1 < rows && layout.op[k + 1] === LayoutOp.freePending && layout.address[k + 1] === layout.address[k]) {
      pendingAsFree++
      k++
      continue
    }
    // The next stand-in alloc of the request trace is this block's (the importer pushes both in one order).
    while (nextEvent < standInEvents && events.kind[nextEvent] !== EventKind.alloc) nextEvent++
    if (nextEvent >= standInEvents || events.size[nextEvent] !== layout.requested[k])
      return {
        kind: 'unusable',
        reason: `the recorded layout's stand-in block ${blockAddress.length} has no matching stand-in allocation in the request trace`,
      }
    blockAddress.push(layout.address[k]!)
    blockSize.push(layout.size[k]!)
    blockEvent.push(nextEvent++)
  }
  if (segAddress.length === 0)
    return blockAddress.length === 0
      ? { kind: 'empty' }
      : { kind: 'unusable', reason: 'blocks were live when recording started, but no segment then in use holds them' }
  const expandable = (segFlags[0]! & 2) !== 0
  if (segFlags.some((f) => ((f & 2) !== 0) !== expandable))
    return { kind: 'unusable', reason: 'segments of both kinds (expandable and not) were in use when recording started' }
  // A segment's pool and (where the layout's stream is not in the trace's table) its stream are its blocks'.
  const order = segAddress.map((_, i) => i).sort((a, b) => (segAddress[a]! < segAddress[b]! ? -1 : segAddress[a]! > segAddress[b]! ? 1 : 0))
  const pools = events.pool
  for (let b = 0; b < blockAddress.length; b++) {
    const s = containing(order, segAddress, segSize, blockAddress[b]!)
    if (s < 0)
      return { kind: 'unusable', reason: `the recorded stand-in block at 0x${blockAddress[b]!.toString(16)} lies in no segment in use when recording started` }
    const e = blockEvent[b]!
    if (pools !== undefined) segPool[s] = pools[e]!
    if (!segStreamKnown[s]) {
      segStream[s] = events.stream[e]!
      segStreamKnown[s] = true
    }
  }
  // Mapped runs of one expandable segment lie whole pages apart (what a hostile file may break).
  let span = 0
  if (expandable) {
    const lowest = new Map<string, bigint>()
    for (const i of order) {
      const key = `${segFlags[i]! & 1}:${segStream[i]}:${segPool[i]}`
      if (!lowest.has(key)) lowest.set(key, segAddress[i]!)
      span = Math.max(span, Number(segAddress[i]! - lowest.get(key)!) + segSize[i]!)
      const page = BigInt((segFlags[i]! & 1) !== 0 ? SMALL_SEGMENT : LARGE_PAGE)
      if ((segAddress[i]! - lowest.get(key)!) % page !== 0n || BigInt(segSize[i]!) % page !== 0n)
        return {
          kind: 'unusable',
          reason: `the mapped range at 0x${segAddress[i]!.toString(16)} is not whole ${page >> 20n} MiB pages of its expandable segment`,
        }
    }
  }
  const state: ReplayInitialState = {
    segmentAddress: BigUint64Array.from(segAddress),
    segmentSize: Float64Array.from(segSize),
    segmentStream: Uint32Array.from(segStream),
    segmentPool: Uint32Array.from(segPool),
    segmentFlags: Uint8Array.from(segFlags),
    blockAddress: BigUint64Array.from(blockAddress),
    blockSize: Float64Array.from(blockSize),
    blockEvent: Uint32Array.from(blockEvent),
  }
  // What replay would refuse (segments that overlap, blocks across their ends) leaves the state unused.
  try {
    checkInitialState('the recorded state', state)
  } catch (error) {
    return { kind: 'unusable', reason: (error as Error).message }
  }
  const bytes = segSize.reduce((sum, n) => sum + n, 0)
  return { kind: 'state', open: { state, segments: segAddress.length, bytes, blocks: blockAddress.length, pendingAsFree, expandable, span } }
}

/** The segment (index) whose range holds `address`, by binary search over `order` (ascending addresses); -1 if none. */
function containing(order: number[], address: bigint[], size: number[], at: bigint): number {
  let lo = 0
  let hi = order.length - 1
  let found = -1
  while (lo <= hi) {
    const mid = (lo + hi) >> 1
    if (address[order[mid]!]! <= at) {
      found = order[mid]!
      lo = mid + 1
    } else hi = mid - 1
  }
  return found >= 0 && at < address[found]! + BigInt(size[found]!) ? found : -1
}

/** A target's initialState checked: its columns' types and lengths, segments that do not overlap, blocks inside them. */
export function checkInitialState(at: string, value: unknown): ReplayInitialState {
  if (!isPlainObject(value)) throw badArgument('type', `${at} must be an object of typed arrays, got ${describe(value)}`)
  const column = <T>(name: string, type: new (n: number) => T, typeName: string): T => {
    const v = value[name]
    if (!(v instanceof type)) throw badArgument('type', `${at}.${name} must be a ${typeName}, got ${describe(v)}`)
    return v
  }
  const s: ReplayInitialState = {
    segmentAddress: column('segmentAddress', BigUint64Array, 'BigUint64Array'),
    segmentSize: column('segmentSize', Float64Array, 'Float64Array'),
    segmentStream: column('segmentStream', Uint32Array, 'Uint32Array'),
    segmentPool: column('segmentPool', Uint32Array, 'Uint32Array'),
    segmentFlags: column('segmentFlags', Uint8Array, 'Uint8Array'),
    blockAddress: column('blockAddress', BigUint64Array, 'BigUint64Array'),
    blockSize: column('blockSize', Float64Array, 'Float64Array'),
    blockEvent: column('blockEvent', Uint32Array, 'Uint32Array'),
  }
  const n = s.segmentAddress.length
  for (const name of ['segmentSize', 'segmentStream', 'segmentPool', 'segmentFlags'] as const)
    if (s[name].length !== n) throw badArgument('range', `${at}.${name} has ${s[name].length} entries, segmentAddress ${n}`)
  const m = s.blockAddress.length
  for (const name of ['blockSize', 'blockEvent'] as const)
    if (s[name].length !== m) throw badArgument('range', `${at}.${name} has ${s[name].length} entries, blockAddress ${m}`)
  const bytes = (name: string, i: number, v: number): void => {
    if (!(Number.isSafeInteger(v) && v > 0)) throw badArgument('range', `${at}.${name}[${i}] must be a whole number of bytes from 1 to 2^53 - 1, got ${v}`)
  }
  s.segmentSize.forEach((v, i) => bytes('segmentSize', i, v))
  s.blockSize.forEach((v, i) => bytes('blockSize', i, v))
  const addresses = Array.from(s.segmentAddress)
  const sizes = Array.from(s.segmentSize)
  const order = addresses.map((_, i) => i).sort((a, b) => (addresses[a]! < addresses[b]! ? -1 : addresses[a]! > addresses[b]! ? 1 : 0))
  for (let k = 1; k < order.length; k++) {
    const prev = order[k - 1]!
    if (addresses[prev]! + BigInt(sizes[prev]!) > addresses[order[k]!]!)
      throw badArgument('range', `${at}: segments ${prev} and ${order[k]} overlap (at 0x${addresses[order[k]!]!.toString(16)})`)
  }
  for (let b = 0; b < m; b++) {
    const g = containing(order, addresses, sizes, s.blockAddress[b]!)
    if (g < 0 || s.blockAddress[b]! + BigInt(s.blockSize[b]!) > addresses[g]! + BigInt(sizes[g]!))
      throw badArgument('range', `${at}: block ${b} at 0x${s.blockAddress[b]!.toString(16)} (${s.blockSize[b]} B) lies in no one segment`)
  }
  return s
}
