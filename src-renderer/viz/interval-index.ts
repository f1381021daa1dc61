// Checkpointed state for interval records (blocks, regions): which records exist after event e,
// found without a pass over every record. A record exists over [from, to); records are created in
// event order, so the records with from <= e are a prefix. Checkpoints store the records alive
// after their event; the state after e is the last checkpoint's list (dropping those that ended
// by e) plus the records created since. A checkpoint is taken when the records created since the
// last one reach the size of its list (and at least MIN_SPACING), so the lists together hold no
// more than about twice the records, and a query reads about twice what is alive plus a spacing:
// scrubbing a million-event trace, or playing one, costs what is on screen, not the trace's length.
// Pure typed-array code (no DOM), built in the decode worker.

export interface IntervalIndex {
  /** Event of each checkpoint, ascending. */
  checkpointEvent: Uint32Array
  /** Records created up to the checkpoint's event (those with from <= its event). */
  checkpointCreated: Uint32Array
  /** Checkpoint c's alive records: alive[aliveStart[c] .. aliveStart[c + 1]). */
  aliveStart: Uint32Array
  alive: Uint32Array
  /** Records that end within the trace, by the event they end at (ascending). */
  endedOrder: Uint32Array
  endedAt: Uint32Array
  /** Most records alive after any one event: the size a query's output needs. */
  maxAlive: number
}

const MIN_SPACING = 1024
const NEVER = 0xffffffff

/** How many of the ascending `sorted[0 .. length)` are <= value (their upper bound). */
export function upperBound(sorted: Uint32Array, length: number, value: number): number {
  let lo = 0
  let hi = length
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if (sorted[mid]! <= value) lo = mid + 1
    else hi = mid
  }
  return lo
}

/**
 * A counting sort's buckets, one per event, zeroed: kept from one sort to the next (the index's,
 * a model's state changes), since a first touch of new memory costs far more than the sort itself
 * (docs/benchmarks.md). Valid until the next call.
 */
let buckets = new Uint32Array(0)
export function bucketScratch(n: number): Uint32Array {
  if (buckets.length < n) buckets = new Uint32Array(Math.max(n, buckets.length * 2))
  const out = buckets.subarray(0, n)
  out.fill(0)
  return out
}

/**
 * Whether `n` keys over `range` values are better sorted than counted: a preview's few thousand
 * blocks over a million events would touch, zero and sum a bucket per event for them (the first
 * map's cold decode 66 → 37 ms in Node, docs/benchmarks.md).
 */
export function fewForTheirRange(n: number, range: number): boolean {
  return n * 32 < range
}

/** The order of `keys[0 .. n)` ascending, stable (equal keys keep their order), by comparison: for fewForTheirRange keys. */
export function sortedOrder(keys: Uint32Array, n: number): Uint32Array {
  const order = new Uint32Array(n)
  for (let i = 0; i < n; i++) order[i] = i
  return order.sort((a, b) => keys[a]! - keys[b]! || a - b)
}

/** Builds the index; null when records are not in `from` order (callers then scan every record). */
export function buildIntervalIndex(from: Uint32Array, to: Uint32Array, count: number): IntervalIndex | null {
  for (let k = 1; k < count; k++) if (from[k]! < from[k - 1]!) return null
  const events: number[] = []
  const created: number[] = []
  const starts: number[] = [0]
  let alive = new Uint32Array(Math.max(16, count >> 2))
  let aliveLength = 0
  let previous = new Uint32Array(0)
  let sinceCheckpoint = 0
  let lastCreated = 0
  let maxAlive = 0
  let k = 0
  while (k < count) {
    // All records created at this event join together: a checkpoint never splits an event.
    const event = from[k]!
    let end = k
    while (end < count && from[end] === event) end++
    sinceCheckpoint += end - k
    k = end
    if (sinceCheckpoint < Math.max(MIN_SPACING, previous.length) && k < count) continue
    // Checkpoint after `event`: the previous list and the records created since, still alive.
    const list: number[] = []
    for (let i = 0; i < previous.length; i++) if (to[previous[i]!]! > event) list.push(previous[i]!)
    for (let r = lastCreated; r < k; r++) if (to[r]! > event) list.push(r)
    if (aliveLength + list.length > alive.length) {
      const grown = new Uint32Array(Math.max(alive.length * 2, aliveLength + list.length))
      grown.set(alive.subarray(0, aliveLength))
      alive = grown
    }
    alive.set(list, aliveLength)
    previous = alive.slice(aliveLength, aliveLength + list.length)
    aliveLength += list.length
    events.push(event)
    created.push(k)
    starts.push(aliveLength)
    maxAlive = Math.max(maxAlive, list.length + sinceCheckpoint)
    lastCreated = k
    sinceCheckpoint = 0
  }
  // Between checkpoints a query can see the checkpoint's list plus everything created since.
  let largestGap = 0
  for (let c = 0; c <= events.length; c++) {
    const base = c === 0 ? 0 : created[c - 1]!
    const next = c < events.length ? created[c]! : count
    const listed = c === 0 ? 0 : starts[c]! - starts[c - 1]!
    largestGap = Math.max(largestGap, listed + next - base)
  }
  maxAlive = Math.max(maxAlive, largestGap)

  const checkpoints = () => ({
    checkpointEvent: Uint32Array.from(events),
    checkpointCreated: Uint32Array.from(created),
    aliveStart: Uint32Array.from(starts),
    alive: alive.slice(0, aliveLength),
  })
  // The records that end, by their end event (records ascending within one): counted, or sorted
  // where they are few for the events they span.
  let lastEvent = 0
  let ended = 0
  for (let r = 0; r < count; r++) {
    const t = to[r]!
    if (t !== NEVER) {
      ended++
      if (t > lastEvent) lastEvent = t
    }
  }
  if (fewForTheirRange(ended, lastEvent)) {
    const records = new Uint32Array(ended)
    const ends = new Uint32Array(ended)
    for (let r = 0, i = 0; r < count; r++)
      if (to[r]! !== NEVER) {
        records[i] = r
        ends[i++] = to[r]!
      }
    const order = sortedOrder(ends, ended)
    const endedOrder = new Uint32Array(ended)
    const endedAt = new Uint32Array(ended)
    for (let i = 0; i < ended; i++) {
      endedOrder[i] = records[order[i]!]!
      endedAt[i] = ends[order[i]!]!
    }
    return { ...checkpoints(), endedOrder, endedAt, maxAlive }
  }
  const bucket = bucketScratch(lastEvent + 2)
  for (let r = 0; r < count; r++) if (to[r]! !== NEVER) bucket[to[r]! + 1]!++
  for (let i = 1; i < bucket.length; i++) bucket[i]! += bucket[i - 1]!
  const endedOrder = new Uint32Array(ended)
  const endedAt = new Uint32Array(ended)
  for (let r = 0; r < count; r++) {
    const t = to[r]!
    if (t === NEVER) continue
    const at = bucket[t]!++
    endedOrder[at] = r
    endedAt[at] = t
  }
  return { ...checkpoints(), endedOrder, endedAt, maxAlive }
}

/**
 * Writes the records alive after event e (from <= e < to) into `out` (at least index.maxAlive
 * long) and returns how many. Order: the checkpoint's survivors, then newer records by creation.
 */
export function aliveAt(index: IntervalIndex, from: Uint32Array, to: Uint32Array, count: number, e: number, out: Uint32Array): number {
  const c = upperBound(index.checkpointEvent, index.checkpointEvent.length, e) - 1
  let n = 0
  let next = 0
  if (c >= 0) {
    for (let i = index.aliveStart[c]!; i < index.aliveStart[c + 1]!; i++) {
      const r = index.alive[i]!
      if (to[r]! > e) out[n++] = r
    }
    next = index.checkpointCreated[c]!
  }
  const created = upperBound(from, count, e)
  for (let r = next; r < created; r++) if (to[r]! > e) out[n++] = r
  return n
}

/** The range of index.endedOrder holding the records that ended at an event in (lo, hi]. */
export function endedWithin(index: IntervalIndex, lo: number, hi: number): [number, number] {
  return [upperBound(index.endedAt, index.endedAt.length, lo), upperBound(index.endedAt, index.endedAt.length, hi)]
}
