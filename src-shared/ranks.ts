// A job of many ranks as the app opens it (docs/architecture.md, "A job of many ranks"): each
// rank's file read once on the host, a few figures and its reserved bytes over time kept, the file
// itself let go before the next is read, so a job of 64 ranks costs what one rank costs. The page
// draws the strip of every rank (views/JobView.svelte), opens one rank's maps, sets another's
// beside them at the same moment (besideEvent), and ranks the what-if settings over every rank.
import type { OomSummary } from './oom.ts'

/** Buckets of a rank's reserved-over-time series: enough for a strip a screen wide. */
export const RANK_SERIES_BUCKETS = 400

/** Where a rank's number came from (services/whatif/job.ts, rankFiles): never guessed silently. */
export type RankFrom = 'stats' | 'name' | 'order'

/**
 * A rank's memory over its own time: `max[i]` is the highest bytes held during the i-th of
 * `max.length` equal slices of [startNs, endNs] (the trace's first and last event). `of` says
 * which bytes: the recorded layout's reserved (a snapshot's segments) or the allocator's own
 * recorded reserved (a profiler trace's Total Reserved), else the bytes the program held live (a
 * trace with neither: its allocated bytes, the least any allocator reserves).
 */
export interface RankSeries {
  of: 'reserved' | 'allocated'
  startNs: number
  endNs: number
  max: number[]
}

export interface RankSummary {
  rank: number
  rankFrom: RankFrom
  /** The file as the user knows it (no directories). */
  name: string
  kind: string
  events: number
  durationNs: number
  /** The peak of `series.of`: the recorded reserved peak (exact, from the whole layout), else the peak of live bytes. */
  peakBytes: number
  series: RankSeries
  /** The GPU the rank recorded on, where the file says. */
  gpu?: string
  /** The rank's first out-of-memory, where it had one, and its time (ns, as the series'). */
  oom?: OomSummary
  oomNs?: number
  /** The floor (services/analysis/floor.ts): live bytes at the rank's peak, rounded as PyTorch rounds. */
  floorBytes: number
}

/**
 * A job opened in the app: its ranks in rank order and the worst of them. `from`: 'files', each
 * rank's snapshot or trace read; 'results', each rank's `whatif FILE --json` output (a cluster's
 * tasks wrote them): no maps and no series, the lab's report over every rank already in `report`.
 */
export interface RanksSummary {
  from: 'files' | 'results'
  report?: RanksWhatifReport
  /** Names the job in later calls (ranks:openRank, ranks:whatif). */
  ranksId: string
  ranks: RankSummary[]
  /** The rank with the highest peak (of reserved where every rank has a recorded layout). */
  worstRank: number
  /** The ranks that ran out of memory, in rank order. */
  oomRanks: number[]
}

/** The rank whose peak is highest (the first such, in rank order); undefined for no ranks. */
export function worstRankOf(ranks: readonly Pick<RankSummary, 'rank' | 'peakBytes'>[]): number | undefined {
  let worst: (typeof ranks)[number] | undefined
  for (const r of ranks) if (!worst || r.peakBytes > worst.peakBytes) worst = r
  return worst?.rank
}

/**
 * Each rank's bytes over time, bucketed: `at(e)` is the bytes held after request event e of
 * `times` (ns, ascending); the series keeps each bucket's highest. Cost: one pass over the events.
 */
export function bucketSeries(times: ArrayLike<number>, at: (e: number) => number, buckets = RANK_SERIES_BUCKETS): Omit<RankSeries, 'of'> {
  const n = times.length
  if (n === 0) return { startNs: 0, endNs: 0, max: [] }
  const startNs = times[0]!
  const endNs = times[n - 1]!
  const span = endNs - startNs
  const count = span > 0 ? buckets : 1
  const max = new Array<number>(count).fill(0)
  let carried = 0
  let last = -1
  for (let e = 0; e < n; e++) {
    const b = span > 0 ? Math.min(count - 1, Math.floor(((times[e]! - startNs) / span) * count)) : 0
    // A bucket no event falls in holds what the last event before it left.
    for (let k = last + 1; k < b; k++) max[k] = carried
    if (b !== last) max[b] = Math.max(max[b]!, carried)
    carried = at(e)
    if (carried > max[b]!) max[b] = carried
    last = b
  }
  for (let k = last + 1; k < count; k++) max[k] = carried
  return { startNs, endNs, max }
}

/**
 * The event of another rank at the same moment as event `event` of this one, so two ranks' maps
 * show one instant of the job: by wall-clock time where both traces have times that overlap (the
 * ranks of one job run together), else at the same fraction of each trace's events. `times` are
 * each trace's event times (ns, ascending).
 */
export function besideEvent(event: number, times: ArrayLike<number>, otherTimes: ArrayLike<number>): number {
  const n = times.length
  const m = otherTimes.length
  if (m === 0) return 0
  if (n === 0) return 0
  const e = Math.max(0, Math.min(n - 1, event))
  const overlap = Math.min(times[n - 1]!, otherTimes[m - 1]!) - Math.max(times[0]!, otherTimes[0]!)
  const timed = times[n - 1]! > times[0]! && otherTimes[m - 1]! > otherTimes[0]! && overlap > 0
  if (!timed) return n <= 1 ? 0 : Math.round((e / (n - 1)) * (m - 1))
  // The last event of the other at or before this one's time (its first, before it begins).
  const t = times[e]!
  let lo = 0
  let hi = m
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if (otherTimes[mid]! <= t) lo = mid + 1
    else hi = mid
  }
  return Math.max(0, lo - 1)
}

/** One configuration of the what-if lab over every rank (services/whatif/job.ts, jobReport). */
export interface RanksWhatifConfig {
  /** 1 = best for the job: fitting every rank first, then the smallest device that fits them all; 0: not ranked on some rank. */
  rank: number
  conf: string
  kind: 'recorded' | 'pytorch' | 'strategy'
  label: string
  line: string | null
  fitsEveryRank: boolean
  /** The smallest limit that runs every rank with no failure (the largest of theirs); null where one has none. */
  smallestFittingBytes: number | null
  /** The rank that needs the most under it. */
  worstRank: number
  perRank: { rank: number; peakReserved: number; failures: number; smallestFittingBytes: number | null; notRanked: string | null }[]
}

/** The what-if lab over every rank of a job, as `ranks:whatifResult` sends it. */
export interface RanksWhatifReport {
  ranks: { rank: number; name: string; limit: { bytes: number | null; source: 'option' | 'implied' | 'none' }; recordedConf: string | null }[]
  /** The rank whose recorded run reserved the most. */
  worstRank: number
  configs: RanksWhatifConfig[]
  replays: number
  elapsedMs: number
}
