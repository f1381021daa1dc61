// The program's requested bytes over a trace, from the request columns alone (no allocator): what
// the timeline draws before any strategy's replay lands. The host computes it as it opens a trace
// and sends it in the trace's summary (a few thousand buckets), so the timeline is drawn before
// the columns arrive; the decode worker computes it again from the columns. Pure, so unit tests
// check it against a plain walk.

/** Buckets of the series a trace's summary carries (TraceSummary.requested): about two per pixel of a wide timeline. */
export const SUMMARY_BUCKETS = 2048

/** Bucketed series, as the strategies' metrics are: per bucket its exclusive end event, max and min. */
export interface RequestedSeries {
  end: Uint32Array
  max: Float64Array
  min: Float64Array
  /** Largest requested bytes over the whole trace. */
  peak: number
}

const ALLOC = 0
const FREE = 1

/**
 * Requested bytes after each event, bucketed to at most `buckets` buckets (max and min within
 * each, so no peak hides in a bucket). A free subtracts the size its id was allocated with; a free
 * of an id that is not live (a double free, a block allocated before the trace) changes nothing,
 * as the replay's bookkeeping does.
 */
export function requestedSeries(kind: Uint8Array, id: Uint32Array, size: Float64Array, buckets = 4096): RequestedSeries {
  const n = kind.length
  let maxId = -1
  for (let i = 0; i < n; i++) if (kind[i] === ALLOC && id[i]! > maxId) maxId = id[i]!
  // Ids are dense from 0 (trace/model.ts): a size per id, NaN while not live.
  const liveSize = new Float64Array(maxId + 1).fill(Number.NaN)
  const count = Math.max(1, Math.min(buckets, n))
  const per = Math.max(1, Math.ceil(n / count))
  const used = n === 0 ? 0 : Math.ceil(n / per)
  const end = new Uint32Array(used)
  const max = new Float64Array(used)
  const min = new Float64Array(used)
  let requested = 0
  let peak = 0
  for (let b = 0; b < used; b++) {
    const last = Math.min(n, (b + 1) * per)
    let hi = -Infinity
    let lo = Infinity
    for (let i = b * per; i < last; i++) {
      const k = kind[i]
      if (k === ALLOC) {
        const s = size[i]!
        const prior = liveSize[id[i]!]!
        // An id allocated again while live replaces its block (a trace that lost the free).
        if (prior === prior) requested -= prior
        liveSize[id[i]!] = s
        requested += s
      } else if (k === FREE) {
        const j = id[i]!
        const s = j <= maxId ? liveSize[j]! : Number.NaN
        if (s === s) {
          requested -= s
          liveSize[j] = Number.NaN
        }
      }
      if (requested > hi) hi = requested
      if (requested < lo) lo = requested
    }
    end[b] = last
    max[b] = hi
    min[b] = lo
    if (hi > peak) peak = hi
  }
  return { end, max, min, peak }
}

/**
 * A step curve recorded over a trace's events (from event index[k] on it is bytes[k]: the
 * allocator's own reserved bytes a profiler trace carries, trace/model.ts RecordedSeries),
 * bucketed as requestedSeries buckets `n` events: per bucket its exclusive end event and the
 * largest value within it (NaN before the curve's first point). Cost grows with the points and
 * the buckets, never the events.
 */
export function bucketStepSeries(
  index: ArrayLike<number>,
  bytes: ArrayLike<number>,
  n: number,
  buckets = 4096,
): { end: Uint32Array; max: Float64Array; peak: number } {
  const count = Math.max(1, Math.min(buckets, n))
  const per = Math.max(1, Math.ceil(n / count))
  const used = n === 0 ? 0 : Math.ceil(n / per)
  const end = new Uint32Array(used)
  const max = new Float64Array(used)
  let p = -1
  let peak = 0
  for (let b = 0; b < used; b++) {
    const last = Math.min(n, (b + 1) * per)
    // The value holding at the bucket's first event, then every point inside it.
    while (p + 1 < index.length && index[p + 1]! <= b * per) p++
    let hi = p < 0 ? Number.NaN : bytes[p]!
    while (p + 1 < index.length && index[p + 1]! < last) {
      p++
      const v = bytes[p]!
      if (!(v <= hi)) hi = v
    }
    end[b] = last
    max[b] = hi
    if (hi > peak) peak = hi
  }
  return { end, max, peak }
}
