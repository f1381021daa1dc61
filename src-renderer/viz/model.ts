// The data model of one strategy's memory over a trace: every block, region and mapping it ever
// had, as an interval of request events [from, to) during which it existed. Built once from the
// layout events (in the decode worker), it answers "what was in memory after event e" for any e by
// one pass over typed arrays: no replay from the start, so scrubbing to any event costs the same.
// Pure functions over typed arrays; no DOM, so it runs in a worker and in Node's unit tests.
import { LayoutOp as Op, type ReuseKind } from '../../src-shared/layout.ts'
// Where a strategy's reuse of freed memory is read (the host cuts layouts by it too).
export { reuseKindOf, type ReuseKind } from '../../src-shared/layout.ts'
import { AddressTable, hashOf, hashOfWord } from '../../src-shared/address-table.ts'
import { OpenMappings } from '../../src-shared/open-mappings.ts'
import { changesReserved, ReservedSteps, reservedAt, type Steps } from '../../src-shared/layout-accounting.ts'
import { carriesSize, sentLayout, type AddressWords, type LayoutOnEvents, type LayoutSent } from '../../src-shared/wire.ts'
import { aliveAt, bucketScratch, buildIntervalIndex, endedWithin, fewForTheirRange, sortedOrder, upperBound, type IntervalIndex } from './interval-index.ts'

/** Layout op codes: the trace file's and the native tracer's (src-shared/layout.ts). */
export { Op }

/** A strategy's layout with every column for every event, as replays and recordings make it (tests build these). */
export type LayoutColumns = LayoutOnEvents & { aux?: Uint32Array }

export const NO_STREAM = 0xffffffff
/** An interval that never ends within the trace. */
export const NEVER = 0xffffffff

/** Blocks handed out, one row per alloc. Addresses as numbers (exact below 2^53). */
export interface BlockRecords {
  count: number
  address: Float64Array
  /** Rounded size: what the strategy set aside. */
  size: Float64Array
  requested: Float64Array
  stream: Uint32Array
  /** Event after which the block exists. */
  from: Uint32Array
  /** Event after which it was freed on another stream and waits (NEVER if it never waited). */
  pendingFrom: Uint32Array
  /**
   * Event after which a bump allocator's freed block is dead space: freed, but not reusable until
   * the pointer falls back below it or a reset (NEVER for other strategies).
   */
  deadFrom: Uint32Array
  /** Event after which the memory is reusable again (NEVER: live at the end). */
  to: Uint32Array
}

export const RegionKind = { memory: 0, addressSpace: 1, mapping: 2 } as const

/** Memory obtained from the device (memory), VA reserved (addressSpace) and granules mapped in it (mapping). */
export interface RegionRecords {
  count: number
  kind: Uint8Array
  address: Float64Array
  size: Float64Array
  from: Uint32Array
  to: Uint32Array
}

export interface StrategyModel {
  blocks: BlockRecords
  regions: RegionRecords
  /** Request events at which a request failed (out of memory under the cap). */
  failures: Uint32Array
  /** Request events at which the strategy reset (arena step boundaries). */
  resets: Uint32Array
  /**
   * Reserved bytes and address space after each request event, as steps, by the one accounting of
   * a layout (src-shared/layout-accounting.ts: regions, mappings, trims), the same figures as the
   * host's peak, `top`, the out-of-memory summary and the native replay's counters.
   */
  reserved: Steps
  /** Checkpointed state of the blocks and regions (null: records out of event order, scan all). */
  blockIndex?: IntervalIndex | null
  regionIndex?: IntervalIndex | null
  /**
   * The blocks that turn pending or dead while present, in event order, made with the model in
   * the decode worker: on the page's thread they held its first scrub forward.
   */
  stateChanges: StateChanges
}

function growF64(a: Float64Array, n: number): Float64Array {
  const b = new Float64Array(n)
  b.set(a)
  return b
}
function growU32(a: Uint32Array, n: number, fill = 0): Uint32Array {
  const b = new Uint32Array(n)
  b.set(a)
  if (fill !== 0) b.fill(fill, a.length)
  return b
}

class RecordBuilder {
  blocks: BlockRecords
  regions: RegionRecords
  constructor(blockCapacity: number, regionCapacity: number) {
    this.blocks = {
      count: 0,
      address: new Float64Array(blockCapacity),
      size: new Float64Array(blockCapacity),
      requested: new Float64Array(blockCapacity),
      stream: new Uint32Array(blockCapacity),
      from: new Uint32Array(blockCapacity),
      pendingFrom: new Uint32Array(blockCapacity).fill(NEVER),
      deadFrom: new Uint32Array(blockCapacity).fill(NEVER),
      to: new Uint32Array(blockCapacity).fill(NEVER),
    }
    this.regions = {
      count: 0,
      kind: new Uint8Array(regionCapacity),
      address: new Float64Array(regionCapacity),
      size: new Float64Array(regionCapacity),
      from: new Uint32Array(regionCapacity),
      to: new Uint32Array(regionCapacity).fill(NEVER),
    }
  }

  /** Doubles the block records' room (a layout that arrives in pieces has no count ahead). */
  growBlocks(): BlockRecords {
    const b = this.blocks
    const n = Math.max(1024, b.from.length * 2)
    b.address = growF64(b.address, n)
    b.size = growF64(b.size, n)
    b.requested = growF64(b.requested, n)
    b.stream = growU32(b.stream, n)
    b.from = growU32(b.from, n)
    b.pendingFrom = growU32(b.pendingFrom, n, NEVER)
    b.deadFrom = growU32(b.deadFrom, n, NEVER)
    b.to = growU32(b.to, n, NEVER)
    return b
  }

  addRegion(kind: number, address: number, size: number, from: number): number {
    const r = this.regions
    if (r.count === r.kind.length) {
      const n = Math.max(16, r.count * 2)
      const k = new Uint8Array(n)
      k.set(r.kind)
      r.kind = k
      r.address = growF64(r.address, n)
      r.size = growF64(r.size, n)
      r.from = growU32(r.from, n)
      r.to = growU32(r.to, n, NEVER)
    }
    const i = r.count++
    r.kind[i] = kind
    r.address[i] = address
    r.size[i] = size
    r.from[i] = from
    return i
  }
}

/** Builds the interval records of one strategy from its layout events (one pass). */
export function buildStrategyModel(layout: LayoutColumns, reuse: ReuseKind = 'any'): StrategyModel {
  const sent = sentLayout(layout, Infinity)
  const builder = new StrategyModelBuilder(reuse, sent.layout.requested.length, sent.regionEvents)
  builder.add(sent.layout)
  return builder.finish()
}

/**
 * The same records built from a layout that arrives in pieces, in order, as it travels (a replay's
 * bundle as it streams in, src-shared/wire.ts LayoutSent): add() each piece, then finish(). The model equals buildStrategyModel's over the
 * pieces joined. Capacities are hints (the counts of allocs and of region events, when known);
 * the records grow past them.
 */
export class StrategyModelBuilder {
  private readonly builder: RecordBuilder
  // Open intervals by address. A block address is unique among live blocks; a region's too.
  private readonly openBlocks = new AddressTable()
  private readonly openRegions = new AddressTable(16) // memory and address space
  /** Open mappings: each its region record. */
  private readonly openMappings = new OpenMappings<number>((k) => this.builder.regions.size[k]!)
  private readonly failures: number[] = []
  private readonly resets: number[] = []
  private readonly reserved = new ReservedSteps()
  /** Pieces added, and how the first read its addresses (every later one must read them alike). */
  private pieces = 0
  private words: AddressWords | undefined
  /** Bump allocators: the blocks since the last reset, in allocation (= address) order. */
  private readonly bumpStack: number[] = []

  constructor(
    private readonly reuse: ReuseKind = 'any',
    allocs = 1024,
    regionEvents = 16,
  ) {
    this.builder = new RecordBuilder(allocs, regionEvents)
  }

  private closeFreed(k: number, event: number): void {
    const b = this.builder.blocks
    if (this.reuse === 'any') {
      b.to[k] = event
      return
    }
    b.deadFrom[k] = event
    const stack = this.bumpStack
    if (this.reuse === 'bump-lifo' && stack.at(-1) === k) while (stack.length > 0 && b.deadFrom[stack.at(-1)!] !== NEVER) b.to[stack.pop()!] = event
  }

  /** The next piece of the layout, in order. */
  add(layout: LayoutSent): void {
    // Hashes come from u64 halves or from u32 words: every piece must read its addresses alike.
    const words0 = this.pieces++ === 0 ? (this.words = layout.words) : this.words
    if (layout.words?.base !== words0?.base || layout.words?.shift !== words0?.shift || (layout.words === undefined) !== (words0 === undefined))
      throw new Error("StrategyModelBuilder: a piece's addresses read unlike the first piece's (add takes one sent layout's pieces, in order)")
    const n = layout.op.length
    const builder = this.builder
    let b = builder.blocks
    const openBlocks = this.openBlocks
    // The piece's sizes and its allocs' columns are read in order (LayoutSent).
    let sizes = 0
    let allocs = 0
    // Addresses as numbers (exact below 2^53), no BigInt each: from the u64 column's 32-bit halves,
    // or from u32 words above a base (src-shared/wire.ts, AddressWords).
    const addresses = layout.address
    const halves = addresses instanceof BigUint64Array ? new Uint32Array(addresses.buffer, addresses.byteOffset, n * 2) : undefined
    const words = addresses instanceof Uint32Array ? addresses : new Uint32Array(0)
    const base = layout.words?.base ?? 0
    const unit = 2 ** (layout.words?.shift ?? 0)
    const addressAt = halves ? (i: number) => halves[2 * i]! + halves[2 * i + 1]! * 4294967296 : (i: number) => base + words[i]! * unit
    const hashAt = halves ? (i: number) => hashOf(halves[2 * i]!, halves[2 * i + 1]!) : (i: number) => hashOfWord(words[i]!)
    // Request events as they are, or u16 steps from the piece's base.
    const steps = layout.event instanceof Uint16Array
    let event = layout.eventBase ?? 0
    for (let i = 0; i < n; i++) {
      const op = layout.op[i]!
      event = steps ? event + layout.event[i]! : layout.event[i]!
      const size = carriesSize(op) ? layout.size[sizes++]! : 0
      if (changesReserved(op)) this.reserved.add(op, addressAt(i), size, event)
      switch (op) {
        case Op.alloc: {
          if (b.count === b.from.length) b = builder.growBlocks()
          const address = addressAt(i)
          const k = b.count++
          b.address[k] = address
          b.size[k] = size
          b.requested[k] = layout.requested[allocs]!
          b.stream[k] = layout.stream[allocs++]!
          b.from[k] = event
          openBlocks.set(address, hashAt(i), k)
          if (this.reuse !== 'any') this.bumpStack.push(k)
          break
        }
        case Op.free:
        case Op.freeCompleted: {
          const address = addressAt(i)
          const hash = hashAt(i)
          const k = openBlocks.get(address, hash)
          if (k >= 0) {
            this.closeFreed(k, event)
            openBlocks.delete(address, hash)
          }
          break
        }
        case Op.freePending: {
          const k = openBlocks.get(addressAt(i), hashAt(i))
          if (k >= 0 && b.pendingFrom[k] === NEVER) b.pendingFrom[k] = event
          break
        }
        case Op.regionReserve:
        case Op.vaReserve: {
          const address = addressAt(i)
          this.openRegions.set(address, hashAt(i), builder.addRegion(op === Op.vaReserve ? RegionKind.addressSpace : RegionKind.memory, address, size, event))
          break
        }
        case Op.regionRelease:
        case Op.vaRelease: {
          const address = addressAt(i)
          const hash = hashAt(i)
          const k = this.openRegions.get(address, hash)
          if (k >= 0) {
            builder.regions.to[k] = event
            this.openRegions.delete(address, hash)
          }
          break
        }
        case Op.map: {
          const address = addressAt(i)
          this.openMappings.open(address, builder.addRegion(RegionKind.mapping, address, size, event))
          break
        }
        case Op.unmap: {
          // An unmap may cover several mappings made granule by granule, or part of one: what stays
          // mapped of a mapping it cuts continues as a new record from this event.
          const start = addressAt(i)
          const end = start + size
          const mappings = this.openMappings
          mappings.unmap(start, end, (address, k, mappingEnd) => {
            builder.regions.to[k] = event
            if (address < start) mappings.open(address, builder.addRegion(RegionKind.mapping, address, start - address, event))
            if (mappingEnd > end) mappings.open(end, builder.addRegion(RegionKind.mapping, end, mappingEnd - end, event))
          })
          break
        }
        case Op.reset: {
          openBlocks.forEachValue((k) => (b.to[k] = event))
          for (const k of this.bumpStack) if (b.to[k] === NEVER) b.to[k] = event
          this.bumpStack.length = 0
          openBlocks.clear()
          this.resets.push(event)
          break
        }
        case Op.failure:
          this.failures.push(event)
          break
      }
    }
  }

  /** The records of everything added, with their checkpoint indexes. */
  finish(): StrategyModel {
    const b = this.builder.blocks
    const regions = this.builder.regions
    return {
      blocks: b,
      regions,
      failures: Uint32Array.from(this.failures),
      resets: Uint32Array.from(this.resets),
      reserved: this.reserved.finish(),
      blockIndex: buildIntervalIndex(b.from, b.to, b.count),
      regionIndex: buildIntervalIndex(regions.from, regions.to, regions.count),
      stateChanges: blockStateChanges(b),
    }
  }
}

/**
 * One output buffer per record set, holding the answer for the last event asked: the map and the
 * figures of one frame ask for the same event, and the second asks for free.
 */
const presentScratch = new WeakMap<object, { buffer: Uint32Array; event: number; result: Uint32Array }>()

function present(index: IntervalIndex | null | undefined, from: Uint32Array, to: Uint32Array, count: number, e: number, key: object): Uint32Array {
  let scratch = presentScratch.get(key)
  if (scratch && scratch.event === e) return scratch.result
  const needed = index ? index.maxAlive : count
  if (!scratch || scratch.buffer.length < needed)
    presentScratch.set(key, (scratch = { buffer: new Uint32Array(needed), event: -1, result: new Uint32Array(0) }))
  const out = scratch.buffer
  let n = 0
  if (index) n = aliveAt(index, from, to, count, e, out)
  else for (let k = 0; k < count; k++) if (from[k]! <= e && e < to[k]!) out[n++] = k
  scratch.event = e
  scratch.result = out.subarray(0, n)
  return scratch.result
}

/**
 * Indices of the blocks present after event `e` (from <= e < to: live, pending or dead space).
 * A view into a buffer the next call for this model reuses: read it before asking again.
 */
export function blocksPresentAt(model: StrategyModel, e: number): Uint32Array {
  const b = model.blocks
  return present(model.blockIndex, b.from, b.to, b.count, e, b)
}

/** Indices of the regions present after event `e`; the same reuse as blocksPresentAt. */
export function regionsPresentAt(model: StrategyModel, e: number): Uint32Array {
  const r = model.regions
  return present(model.regionIndex, r.from, r.to, r.count, e, r)
}

/** Whether an interval [from, to) contains the state after event `e`. */
export function isLive(from: number, to: number, e: number): boolean {
  return from <= e && e < to
}

/** Bytes in memory after event `e`: what the metrics table shows as the playhead moves. */
/** The byte figures after an event, as docs/architecture.md#metrics defines them (waste = rounded - requested). */
export interface StateFigures {
  liveBlocks: number
  requested: number
  rounded: number
  pendingBytes: number
  /** Dead space of bump allocators: freed blocks not reusable yet. */
  deadBytes: number
  /** Memory obtained from the device (regions of kind memory plus mapped granules). */
  reserved: number
  /** Address space reserved (VMM), mapped or not. */
  addressSpace: number
}

/** The last figures asked of each model: a map's header and the metrics table ask for the same. */
const lastFigures = new WeakMap<StrategyModel, { event: number; figures: StateFigures }>()

export function figuresAt(model: StrategyModel, e: number): StateFigures {
  const last = lastFigures.get(model)
  if (last && last.event === e) return { ...last.figures }
  const figures = (last && last.event < e && advanceFigures(model, last.figures, last.event, e)) || computeFiguresAt(model, e)
  lastFigures.set(model, { event: e, figures })
  return { ...figures }
}

/** Blocks whose state changes while present (pending, then dead space), by the event it changes at. */
export interface StateChanges {
  event: Uint32Array
  block: Uint32Array
}
/** The blocks that turn pending or dead while present, in event order (blocks ascending within an event). */
function blockStateChanges(b: BlockRecords): StateChanges {
  const { from, to, pendingFrom, deadFrom } = b
  const changing = (at: number, k: number) => at !== NEVER && at > from[k]! && at < to[k]!
  // Most strategies never pend or die: one pass finds none. Where they do (a 1 M-event trace's
  // 400k pending frees), a counting sort by event, blocks ascending within each (a comparison sort
  // of those took ~0.8 s for five such maps, docs/benchmarks.md); where they are few for the events
  // they span (a preview's), a comparison sort of them alone.
  let n = 0
  let last = 0
  const count = (at: number, k: number) => {
    if (!changing(at, k)) return
    n++
    if (at > last) last = at
  }
  for (let k = 0; k < b.count; k++) {
    count(pendingFrom[k]!, k)
    count(deadFrom[k]!, k)
  }
  const event = new Uint32Array(n)
  const block = new Uint32Array(n)
  if (n > 0 && fewForTheirRange(n, last)) {
    // Few for the events they span (a preview's): sorted, not counted.
    const at = new Uint32Array(n)
    const of = new Uint32Array(n)
    let i = 0
    const put = (e: number, k: number) => {
      if (!changing(e, k)) return
      at[i] = e
      of[i++] = k
    }
    for (let k = 0; k < b.count; k++) {
      put(pendingFrom[k]!, k)
      put(deadFrom[k]!, k)
    }
    const order = sortedOrder(at, n)
    for (let j = 0; j < n; j++) {
      event[j] = at[order[j]!]!
      block[j] = of[order[j]!]!
    }
  } else if (n > 0) {
    // starts[e]: where event e's entries begin (zeroed scratch, as the interval index's buckets).
    const starts = bucketScratch(last + 2)
    const place = (at: number, k: number) => {
      const i = starts[at]!++
      event[i] = at
      block[i] = k
    }
    for (let k = 0; k < b.count; k++) {
      if (changing(pendingFrom[k]!, k)) starts[pendingFrom[k]! + 1]!++
      if (changing(deadFrom[k]!, k)) starts[deadFrom[k]! + 1]!++
    }
    for (let e = 1; e < starts.length; e++) starts[e]! += starts[e - 1]!
    for (let k = 0; k < b.count; k++) {
      if (changing(pendingFrom[k]!, k)) place(pendingFrom[k]!, k)
      if (changing(deadFrom[k]!, k)) place(deadFrom[k]!, k)
    }
  }
  return { event, block }
}

/**
 * Past this many blocks changed between two events, stepping from one to the other (a map's
 * raster, its figures) costs more than starting over at the second.
 */
export const MAX_STEPPED_CHANGES = 20_000

/** The blocks that changed between events e1 and e2 (e1 < e2), as ranges of the model's indexes. */
export interface BlockChanges {
  /** Ended (freed, or reusable again) in (e1, e2]: blockIndex.endedOrder[ended[0] .. ended[1]). */
  ended: [number, number]
  /** Placed in (e1, e2]: blocks placed[0] .. placed[1] (indexed records are in `from` order). */
  placed: [number, number]
  /** Turned pending or dead in (e1, e2]: entries states[0] .. states[1] of model.stateChanges. */
  states: [number, number]
  /** How many entries the three ranges hold. */
  count: number
}

/** What changed between e1 and e2, or null where the blocks are not indexed (then nothing can step). */
export function changesBetween(model: StrategyModel, e1: number, e2: number): BlockChanges | null {
  const index = model.blockIndex
  if (!index) return null
  const b = model.blocks
  const changes = model.stateChanges
  const ended = endedWithin(index, e1, e2)
  const placed: [number, number] = [upperBound(b.from, b.count, e1), upperBound(b.from, b.count, e2)]
  const states: [number, number] = [upperBound(changes.event, changes.event.length, e1), upperBound(changes.event, changes.event.length, e2)]
  return { ended, placed, states, count: ended[1] - ended[0] + placed[1] - placed[0] + states[1] - states[0] }
}

/**
 * The figures after event e from those after an earlier event e1, by the blocks placed, freed or
 * changed between (byte counts are integers, so the sums are exact); null where the records are
 * not indexed or too much changed.
 */
function advanceFigures(model: StrategyModel, before: StateFigures, e1: number, e: number): StateFigures | null {
  const c = changesBetween(model, e1, e)
  if (!c || c.count > MAX_STEPPED_CHANGES) return null
  const b = model.blocks
  const f = { ...before }
  const add = (k: number, at: number, sign: number) => {
    if (at >= b.deadFrom[k]!) {
      f.deadBytes += sign * b.size[k]!
      return
    }
    f.liveBlocks += sign
    if (at >= b.pendingFrom[k]!) f.pendingBytes += sign * b.size[k]!
    else {
      f.requested += sign * b.requested[k]!
      f.rounded += sign * b.size[k]!
    }
  }
  const endedOrder = model.blockIndex!.endedOrder
  for (let i = c.ended[0]; i < c.ended[1]; i++) {
    const k = endedOrder[i]!
    if (b.from[k]! <= e1) add(k, e1, -1)
  }
  for (let k = c.placed[0]; k < c.placed[1]; k++) if (b.to[k]! > e) add(k, e, 1)
  // A block that changed state twice in the step is counted once.
  const changed = model.stateChanges.block
  const seen = new Set<number>()
  for (let i = c.states[0]; i < c.states[1]; i++) {
    const k = changed[i]!
    if (b.from[k]! > e1 || b.to[k]! <= e || seen.has(k)) continue
    seen.add(k)
    add(k, e1, -1)
    add(k, e, 1)
  }
  const regions = computeRegionFigures(model, e)
  f.reserved = regions.reserved
  f.addressSpace = regions.addressSpace
  return f
}

/** The figures after event e summed over every present block (figuresAt steps from its last answer instead where it can). */
export function computeFiguresAt(model: StrategyModel, e: number): StateFigures {
  const b = model.blocks
  let liveBlocks = 0
  let requested = 0
  let rounded = 0
  let pendingBytes = 0
  let deadBytes = 0
  for (const k of blocksPresentAt(model, e)) {
    if (e >= b.deadFrom[k]!) {
      deadBytes += b.size[k]!
      continue
    }
    liveBlocks++
    // A pending block was freed by the program: it counts as neither requested nor handed out,
    // only as memory the strategy cannot reuse yet (as the native counters do).
    if (e >= b.pendingFrom[k]!) pendingBytes += b.size[k]!
    else {
      requested += b.requested[k]!
      rounded += b.size[k]!
    }
  }
  return { liveBlocks, requested, rounded, pendingBytes, deadBytes, ...computeRegionFigures(model, e) }
}

/** Memory reserved and address space reserved after event e (the one accounting's steps). */
function computeRegionFigures(model: StrategyModel, e: number): { reserved: number; addressSpace: number } {
  return reservedAt(model.reserved, e)
}

/**
 * The block the alloc of request event `event` made, or -1 (the request failed, or is not an
 * alloc): blocks are recorded in the order of their allocs, so `from` ascends. The same request's
 * block in every strategy's model, so a block selected in one map is shown in the others too.
 */
export function blockAllocatedAt(model: StrategyModel, event: number): number {
  const b = model.blocks
  let lo = 0
  let hi = b.count
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if (b.from[mid]! < event) lo = mid + 1
    else hi = mid
  }
  return lo < b.count && b.from[lo] === event ? lo : -1
}

/** Indices of the blocks live after event `e` (not dead space), largest rounded size first. */
export function liveBlocksAt(model: StrategyModel, e: number): Uint32Array {
  const b = model.blocks
  const out: number[] = []
  for (const k of blocksPresentAt(model, e)) if (e < b.deadFrom[k]!) out.push(k)
  out.sort((x, y) => b.size[y]! - b.size[x]! || b.address[x]! - b.address[y]!)
  return Uint32Array.from(out)
}

/**
 * External fragmentation after event `e`, exactly, as docs/architecture.md#external-fragmentation
 * defines it (1 - largest free block / free bytes inside reserved memory; 0 when nothing is free),
 * with the free bytes and largest free block.
 * Dead space of bump allocators is not free (it is not reusable). Sorts the blocks: meant for a
 * paused playhead, not every frame of playback.
 */
export function fragmentationAt(model: StrategyModel, e: number): { fragmentation: number; freeBytes: number; largestFree: number } {
  const r = model.regions
  const spans: [number, number][] = []
  for (const k of regionsPresentAt(model, e)) if (r.kind[k] !== RegionKind.addressSpace) spans.push([r.address[k]!, r.address[k]! + r.size[k]!])
  spans.sort((x, y) => x[0] - y[0])
  // Adjacent mappings (granules) form one contiguous range of memory.
  const memory: [number, number][] = []
  for (const s of spans) {
    const last = memory.at(-1)
    if (last && s[0] <= last[1]) last[1] = Math.max(last[1], s[1])
    else memory.push([s[0], s[1]])
  }
  const b = model.blocks
  const live = blocksPresentAt(model, e)
    .slice()
    .sort((x, y) => b.address[x]! - b.address[y]!)
  let freeBytes = 0
  let largestFree = 0
  let j = 0
  for (const [start, end] of memory) {
    let cursor = start
    while (j < live.length && b.address[live[j]!]! < end) {
      const a = b.address[live[j]!]!
      if (a >= start) {
        const gap = a - cursor
        if (gap > 0) {
          freeBytes += gap
          largestFree = Math.max(largestFree, gap)
        }
        cursor = Math.max(cursor, a + b.size[live[j]!]!)
      }
      j++
    }
    const tail = end - cursor
    if (tail > 0) {
      freeBytes += tail
      largestFree = Math.max(largestFree, tail)
    }
  }
  return { fragmentation: freeBytes > 0 ? 1 - largestFree / freeBytes : 0, freeBytes, largestFree }
}
