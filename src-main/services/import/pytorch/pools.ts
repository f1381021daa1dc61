// CUDA-graph private pools of a PyTorch snapshot import: which pool each block was allocated in.
// PyTorch's trace entries name no pool; only the final `segments` list does (segment_pool_id, (0, 0)
// for the default pools), for the segments live at the end. So the mapper logs each device's segment
// events (SegmentLog) and each block's address as they arrive, and, only where some segment is in a
// private pool, the finish walks that log twice: once to learn the pool of every segment (a segment
// live at the end takes the pool of the listed segment that holds its start; one freed before the
// end stays unknown), once to give each block the pool of the segment holding its address when it was
// allocated. Block ids are dense and given in event order, so "when" is the id: a segment event
// logged while the next id was k comes before block k.

/** Segment events as the log records them. */
export const SegmentOp = {
  /** segment_alloc */
  reserve: 0,
  /** segment_free */
  release: 1,
  /** segment_map (expandable segments) */
  map: 2,
  /** segment_unmap */
  unmap: 3,
} as const

/** One device's segment events: [next block id, SegmentOp, address, size] per event, flat. */
export type SegmentLog = number[]

/** A segment listed at the end: its range and its pool (0 default, k >= 1 the k-th private pool). */
export interface ListedSegment {
  address: number
  size: number
  pool: number
}

/** What segmentPools found for a device. */
export interface BlockPools {
  /** Pool of each block id (0 default). */
  poolById: Uint32Array
  /** Segments (or mapped ranges of expandable segments) freed before the end: pool unknown. */
  unknownSegments: number
  /** Blocks allocated in them, counted in the default pools. */
  unknownBlocks: number
}

/**
 * The name of a segment_pool_id as Python prints the tuple, "(1, 0)"; '' for the default pools
 * ((0, 0)) and for anything that is not a pair of integers (a list in the JSON form is one).
 */
export function poolName(value: unknown): string {
  if (!Array.isArray(value) || value.length !== 2) return ''
  const [a, b] = value as unknown[]
  const whole = (v: unknown) => (typeof v === 'number' && Number.isInteger(v)) || typeof v === 'bigint'
  if (!whole(a) || !whole(b)) return ''
  if (Number(a) === 0 && Number(b) === 0) return ''
  return `(${String(a)}, ${String(b)})`
}

/** Private pool names in a stable order: by the pair's numbers. */
export function sortPoolNames(names: Iterable<string>): string[] {
  const key = (n: string) => n.slice(1, -1).split(', ').map(Number) as [number, number]
  return [...new Set(names)].sort((x, y) => {
    const [a, b] = key(x)
    const [c, d] = key(y)
    return a - c || b - d || (x < y ? -1 : x > y ? 1 : 0)
  })
}

/**
 * Live segment pieces ordered by start: [start, end) and the segment each belongs to. A treap (a
 * search tree kept balanced by random priorities), so each add, release, find and piece of an unmap
 * costs O(log n) whatever order the addresses come in: a sorted array's splices made descending
 * addresses quadratic.
 */
class LiveSegments {
  // Node 0 is the empty tree; a node's fields are at its index in each array.
  private readonly starts: number[] = [0]
  private readonly ends: number[] = [0]
  private readonly segs: number[] = [0]
  private readonly priorities: number[] = [0]
  private readonly lefts: number[] = [0]
  private readonly rights: number[] = [0]
  private readonly unused: number[] = []
  private root = 0
  private seed = 0x9e3779b9

  /** The node of the last piece starting at or before `address`, or 0. */
  private floor(address: number): number {
    let best = 0
    for (let n = this.root; n !== 0;)
      if (this.starts[n]! <= address) {
        best = n
        n = this.rights[n]!
      } else n = this.lefts[n]!
    return best
  }

  /** The node of the first piece starting after `address`, or 0. */
  private after(address: number): number {
    let best = 0
    for (let n = this.root; n !== 0;)
      if (this.starts[n]! > address) {
        best = n
        n = this.lefts[n]!
      } else n = this.rights[n]!
    return best
  }

  /** Splits the tree at `n` into pieces starting before `key` and the rest. */
  private split(n: number, key: number): [number, number] {
    if (n === 0) return [0, 0]
    if (this.starts[n]! < key) {
      const [l, r] = this.split(this.rights[n]!, key)
      this.rights[n] = l
      return [n, r]
    }
    const [l, r] = this.split(this.lefts[n]!, key)
    this.lefts[n] = r
    return [l, n]
  }

  /** Joins two trees, every start in `a` before every start in `b`. */
  private merge(a: number, b: number): number {
    if (a === 0) return b
    if (b === 0) return a
    if (this.priorities[a]! > this.priorities[b]!) {
      this.rights[a] = this.merge(this.rights[a]!, b)
      return a
    }
    this.lefts[b] = this.merge(a, this.lefts[b]!)
    return b
  }

  private node(start: number, end: number, seg: number): number {
    this.seed ^= this.seed << 13
    this.seed ^= this.seed >>> 17
    this.seed ^= this.seed << 5
    const n = this.unused.pop() ?? this.starts.length
    this.starts[n] = start
    this.ends[n] = end
    this.segs[n] = seg
    this.priorities[n] = this.seed >>> 0
    this.lefts[n] = 0
    this.rights[n] = 0
    return n
  }

  /** Removes the piece at node `n` (found by its start). */
  private remove(n: number): void {
    const start = this.starts[n]!
    const [below, rest] = this.split(this.root, start)
    const [, above] = this.split(rest, start + 1)
    this.root = this.merge(below, above)
    this.unused.push(n)
  }

  /** The segment whose piece holds `address`, or -1. */
  find(address: number): number {
    const n = this.floor(address)
    return n !== 0 && address < this.ends[n]! ? this.segs[n]! : -1
  }

  add(start: number, end: number, seg: number): void {
    const n = this.floor(start)
    if (n !== 0 && this.starts[n] === start) {
      // A segment at an address already live (a damaged trace): the new one replaces it.
      this.ends[n] = end
      this.segs[n] = seg
      return
    }
    const [below, above] = this.split(this.root, start)
    this.root = this.merge(this.merge(below, this.node(start, end, seg)), above)
  }

  /** Removes the piece starting at `start`: its segment, or -1 where none does. */
  release(start: number): number {
    const n = this.floor(start)
    if (n === 0 || this.starts[n] !== start) return -1
    const seg = this.segs[n]!
    this.remove(n)
    return seg
  }

  /** Removes [start, end) from the pieces it overlaps (splitting them); whether it overlapped any. */
  unmap(start: number, end: number): boolean {
    let hit = false
    let n = this.floor(start)
    if (n === 0 || this.ends[n]! <= start) n = this.after(start)
    while (n !== 0 && this.starts[n]! < end) {
      const s = this.starts[n]!
      const e = this.ends[n]!
      const seg = this.segs[n]!
      hit = true
      this.remove(n)
      if (s < start) this.add(s, start, seg)
      if (e > end) this.add(end, e, seg)
      n = this.after(s)
    }
    return hit
  }

  /** Every piece in order of start: start, end, segment. */
  *pieces(): Generator<[number, number, number]> {
    const stack: number[] = []
    for (let n = this.root; n !== 0 || stack.length > 0;) {
      if (n !== 0) {
        stack.push(n)
        n = this.lefts[n]!
        continue
      }
      n = stack.pop()!
      yield [this.starts[n]!, this.ends[n]!, this.segs[n]!]
      n = this.rights[n]!
    }
  }
}

/**
 * The pool of each of a device's blocks 0 .. blocks - 1 (addresses in addressById), from its segment
 * log and the segments listed at the end.
 */
export function segmentPools(log: SegmentLog, blocks: number, addressById: Float64Array, listed: ListedSegment[]): BlockPools {
  // Pass 1: the segments, which of them are live at the end, and those live from before the first event.
  const segPool: number[] = []
  const entrySeg = new Int32Array(log.length / 4).fill(-1)
  const initial: [number, number, number][] = []
  const live = new LiveSegments()
  for (let i = 0; i < log.length; i += 4) {
    const op = log[i + 1]!
    const address = log[i + 2]!
    const end = address + log[i + 3]!
    if (op === SegmentOp.reserve || op === SegmentOp.map) {
      const seg = segPool.push(-1) - 1
      entrySeg[i / 4] = seg
      live.add(address, end, seg)
    } else if (op === SegmentOp.release ? live.release(address) < 0 : !live.unmap(address, end)) {
      // Reserved (or mapped) before the first event the trace kept: live from the start.
      initial.push([address, end, segPool.push(-1) - 1])
    }
  }
  // In order of start: each listed segment finds the pieces starting inside it by binary search.
  const atEnd = [...live.pieces()]
  for (const seg of listed) {
    let matched = false
    let lo = 0
    let hi = atEnd.length
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      if (atEnd[mid]![0] < seg.address) lo = mid + 1
      else hi = mid
    }
    for (let k = lo; k < atEnd.length && atEnd[k]![0] < seg.address + seg.size; k++) {
      segPool[atEnd[k]![2]] = seg.pool
      matched = true
    }
    // Listed but never seen reserved: live from the start.
    if (!matched) initial.push([seg.address, seg.address + seg.size, segPool.push(seg.pool) - 1])
  }
  let unknownSegments = 0
  for (const p of segPool) if (p < 0) unknownSegments++

  // Pass 2: each block's segment when it was allocated.
  const poolById = new Uint32Array(blocks)
  let unknownBlocks = 0
  const walk = new LiveSegments()
  for (const [start, end, seg] of initial) walk.add(start, end, seg)
  let id = 0
  const resolve = (upTo: number) => {
    for (; id < upTo && id < blocks; id++) {
      const seg = walk.find(addressById[id]!)
      const pool = seg < 0 ? -1 : segPool[seg]!
      if (pool < 0) unknownBlocks++
      else poolById[id] = pool
    }
  }
  for (let i = 0; i < log.length; i += 4) {
    resolve(log[i]!)
    const op = log[i + 1]!
    const address = log[i + 2]!
    const end = address + log[i + 3]!
    if (op === SegmentOp.reserve || op === SegmentOp.map) walk.add(address, end, entrySeg[i / 4]!)
    else if (op === SegmentOp.release) walk.release(address)
    else walk.unmap(address, end)
  }
  resolve(blocks)
  return { poolById, unknownSegments, unknownBlocks }
}
