// The one rule that sizes strategies from a trace, used by the app, the CLI and the what-if lab:
// pool strategies named without a size get pools sized from the trace, so that none fails for lack
// of a pool the library's fixed defaults would have given it (a 1 GiB buddy pool, a 256 MiB block
// pool of 1 MiB blocks, a 64 GiB vmm_growable reservation) on a trace that needs more. Sizes given
// on the command line are kept as given. Reserved memory is what a strategy obtains, not what it
// may obtain: extra regions or pools are taken only when needed, so a generous limit costs nothing
// in the compared figures. A trace whose sizes no pool can hold (past what an address space ending
// at 2^53 can place) gets a reason instead of parameters, and the caller leaves that row out.
import { EventKind, type RequestTrace } from '../trace/model.ts'
import type { StrategySpec } from './strategy-spec.ts'

/** What sizing needs from a trace: its peak of requested bytes, its largest request, its most live blocks. */
export interface TraceSizes {
  peakRequested: number
  largestRequest: number
  peakLiveBlocks: number
}

const sizesOf = new WeakMap<RequestTrace, TraceSizes>()

/** Strategies this rule sizes (each when named without parameters). */
const SIZED_STRATEGIES = new Set(['buddy', 'block_pool', 'vmm_growable'])

/** Whether the spec would be sized (a pool strategy named without parameters): only then is the trace read. */
export function needsSizing(spec: StrategySpec): boolean {
  return Object.keys(spec.params).length === 0 && SIZED_STRATEGIES.has(spec.strategy)
}

/** traceSizes, read once per trace. */
export function traceSizesCached(trace: RequestTrace): TraceSizes {
  let sizes = sizesOf.get(trace)
  if (!sizes) sizesOf.set(trace, (sizes = traceSizes(trace)))
  return sizes
}

export function traceSizes(trace: RequestTrace): TraceSizes {
  const { kind, id, size } = trace.events
  // Each live block's size plus one, by id (ids are dense below the event count; 0: not live):
  // typed, where a Map of a million ids took most of the pass.
  const live = new Float64Array(kind.length)
  let liveBlocks = 0
  let requested = 0
  let peakRequested = 0
  let largestRequest = 0
  let peakLiveBlocks = 0
  for (let i = 0; i < kind.length; i++) {
    if (kind[i] === EventKind.alloc) {
      const s = size[i]!
      const b = id[i]!
      const prior = live[b]!
      if (prior > 0) requested -= prior - 1
      else liveBlocks++
      live[b] = s + 1
      requested += s
      if (s > largestRequest) largestRequest = s
      if (requested > peakRequested) peakRequested = requested
      if (liveBlocks > peakLiveBlocks) peakLiveBlocks = liveBlocks
    } else if (kind[i] === EventKind.free) {
      const b = id[i]!
      const prior = live[b]!
      if (prior > 0) {
        requested -= prior - 1
        live[b] = 0
        liveBlocks--
      }
    }
  }
  return { peakRequested, largestRequest, peakLiveBlocks }
}

const MiB = 1024 * 1024
const GiB = 1024 * MiB
/** Regions a sized block_pool holds the most live blocks in (it obtains them one at a time, as it needs them). */
export const SIZED_REGIONS = 64
/**
 * The largest pool, region or reservation this rule gives: the simulated device's address space
 * ends at 2^53 (where a double stops holding every address), and one of 2^52 B fits below it.
 */
export const MAX_SIZED_BYTES = 2 ** 52
/** block_pool refuses regions of more than 2^20 blocks (each is state of its own and a block of every walk). */
const MAX_BLOCKS_PER_REGION = 2 ** 20
/** vmm_growable's own reservation, kept while twice the peak fits in it. */
const VMM_DEFAULT_RESERVE = 64 * GiB

/** The least power of two at or above n (n up to 2^53): by exponent, never a loop over sizes. */
function powerOfTwoAtLeast(n: number): number {
  if (!(n > 1)) return 1
  const p = 2 ** Math.ceil(Math.log2(n))
  // log2 rounds: step once either way to the exact power.
  return p / 2 >= n ? p / 2 : p < n ? p * 2 : p
}

/** What sizing chose: parameters, or the reason no size holds the trace. */
export type Sizing = { params: Record<string, string> } | { unsized: string }

/**
 * The parameters that size a strategy for a trace, a reason where none can, or undefined for a
 * strategy that has nothing to size (slab grows by slabs and serves large requests from their own
 * regions; arena reserves 64 GiB of address space and maps as it goes).
 *  - buddy: pools of a power of two that holds the largest request and a quarter of the peak
 *    requested bytes, as many as twice the peak needs (a buddy rounds every request up to a power
 *    of two, so live blocks may take up to twice their bytes) and two more for fragmentation.
 *  - block_pool: blocks as large as the largest request (a multiple of 256 B, at least 1 MiB), in
 *    regions of a 64th of the most blocks ever live (small enough to fit under a cap; at most
 *    2^20 blocks and 2^52 B), one more region than those hold them.
 *  - vmm_growable: a reservation of the power of two at or above twice the peak requested bytes,
 *    where that is more than its own 64 GiB (otherwise left as it is).
 * Nothing larger than 2^52 B is given: a trace that needs more gets the reason.
 */
export function sizeStrategy(strategy: string, sizes: TraceSizes): Sizing | undefined {
  const { peakRequested, largestRequest, peakLiveBlocks } = sizes
  switch (strategy) {
    case 'buddy': {
      const pool = Math.max(MiB, powerOfTwoAtLeast(Math.max(largestRequest, peakRequested / 4)))
      if (pool > MAX_SIZED_BYTES)
        return {
          unsized: `a pool that holds the largest request (${largestRequest} B) would be ${pool} B, more than the ${MAX_SIZED_BYTES} B (2^52) a pool can be`,
        }
      return { params: { pool_size: String(pool), max_pools: String(Math.ceil((2 * peakRequested) / pool) + 2) } }
    }
    case 'block_pool': {
      const block = Math.max(MiB, Math.ceil(largestRequest / 256) * 256)
      if (block > MAX_SIZED_BYTES)
        return {
          unsized: `a block that holds the largest request (${largestRequest} B) would be ${block} B, more than the ${MAX_SIZED_BYTES} B (2^52) a region can be`,
        }
      const perRegion = Math.max(1, Math.min(Math.ceil(peakLiveBlocks / SIZED_REGIONS), MAX_BLOCKS_PER_REGION, Math.floor(MAX_SIZED_BYTES / block)))
      return { params: { block_size: String(block), pool_size: String(block * perRegion), max_regions: String(Math.ceil(peakLiveBlocks / perRegion) + 1) } }
    }
    case 'vmm_growable': {
      if (2 * peakRequested <= VMM_DEFAULT_RESERVE) return undefined
      if (peakRequested > MAX_SIZED_BYTES)
        return { unsized: `the peak requested (${peakRequested} B) is more than the ${MAX_SIZED_BYTES} B (2^52) a reservation can be` }
      return { params: { reserve: String(Math.min(powerOfTwoAtLeast(2 * peakRequested), MAX_SIZED_BYTES)) } }
    }
    default:
      return undefined
  }
}

/** sizeStrategy's parameters, or undefined where it has none to give (no sizing, or none possible). */
export function sizedParams(strategy: string, sizes: TraceSizes): Record<string, string> | undefined {
  const sizing = sizeStrategy(strategy, sizes)
  return sizing && 'params' in sizing ? sizing.params : undefined
}

/**
 * The spec with its pools sized from the trace when it names none of its own parameters; as it is
 * otherwise. `sized` says what was chosen ("pool_size=2GiB, max_pools=4"), for the CLI's output;
 * `unsized` why no size holds the trace (the spec is then returned as written: its replay fails
 * the requests it cannot hold, and a caller that compares rows leaves it out with the reason).
 */
export function sizedForTrace(spec: StrategySpec, trace: RequestTrace | TraceSizes): { spec: StrategySpec; sized?: string; unsized?: string } {
  if (!needsSizing(spec)) return { spec }
  const sizes = 'events' in trace ? traceSizesCached(trace) : trace
  const sizing = sizeStrategy(spec.strategy, sizes)
  if (!sizing) return { spec }
  if ('unsized' in sizing) return { spec, unsized: sizing.unsized }
  const params = sizing.params
  return {
    spec: { ...spec, params },
    sized: Object.entries(params)
      .map(([k, v]) => `${k}=${sizeText(k, Number(v))}`)
      .join(', '),
  }
}

function sizeText(key: string, v: number): string {
  if (key.startsWith('max_')) return String(v)
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB']
  let u = 0
  while (u < units.length - 1 && v % 1024 === 0 && v >= 1024) {
    v /= 1024
    u++
  }
  return `${v}${units[u]}`
}
