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

/** Live segment pieces sorted by start: [start, end) and the segment each belongs to. */
class LiveSegments {
  private starts: number[] = []
  private ends: number[] = []
  private segs: number[] = []

  /** The last piece starting at or before `address`, or -1. */
  private index(address: number): number {
    let lo = 0
    let hi = this.starts.length
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      if (this.starts[mid]! <= address) lo = mid + 1
      else hi = mid
    }
    return lo - 1
  }

  /** The segment whose piece holds `address`, or -1. */
  find(address: number): number {
    const i = this.index(address)
    return i >= 0 && address < this.ends[i]! ? this.segs[i]! : -1
  }

  add(start: number, end: number, seg: number): void {
    const i = this.index(start)
    if (i >= 0 && this.starts[i] === start) {
      // A segment at an address already live (a damaged trace): the new one replaces it.
      this.ends[i] = end
      this.segs[i] = seg
      return
    }
    this.starts.splice(i + 1, 0, start)
    this.ends.splice(i + 1, 0, end)
    this.segs.splice(i + 1, 0, seg)
  }

  /** Removes the piece starting at `start`: its segment, or -1 where none does. */
  release(start: number): number {
    const i = this.index(start)
    if (i < 0 || this.starts[i] !== start) return -1
    const seg = this.segs[i]!
    this.starts.splice(i, 1)
    this.ends.splice(i, 1)
    this.segs.splice(i, 1)
    return seg
  }

  /** Removes [start, end) from the pieces it overlaps (splitting them); whether it overlapped any. */
  unmap(start: number, end: number): boolean {
    let i = Math.max(0, this.index(start))
    let hit = false
    while (i < this.starts.length && this.starts[i]! < end) {
      const s = this.starts[i]!
      const e = this.ends[i]!
      if (e <= start) {
        i++
        continue
      }
      hit = true
      const seg = this.segs[i]!
      this.starts.splice(i, 1)
      this.ends.splice(i, 1)
      this.segs.splice(i, 1)
      if (s < start) {
        this.starts.splice(i, 0, s)
        this.ends.splice(i, 0, start)
        this.segs.splice(i, 0, seg)
        i++
      }
      if (e > end) {
        this.starts.splice(i, 0, end)
        this.ends.splice(i, 0, e)
        this.segs.splice(i, 0, seg)
        i++
      }
    }
    return hit
  }

  /** Every piece: start, end, segment. */
  *pieces(): Generator<[number, number, number]> {
    for (let i = 0; i < this.starts.length; i++) yield [this.starts[i]!, this.ends[i]!, this.segs[i]!]
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
  const atEnd = [...live.pieces()].sort((a, b) => a[0] - b[0])
  for (const seg of listed) {
    let matched = false
    for (const [start, , s] of atEnd) {
      if (start >= seg.address && start < seg.address + seg.size) {
        segPool[s] = seg.pool
        matched = true
      }
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
