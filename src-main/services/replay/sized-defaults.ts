// Pool strategies named without a size get pools sized from the trace, so that none fails for lack
// of a pool the library's fixed defaults would have given it (a 1 GiB buddy pool, a 256 MiB block
// pool of 1 MiB blocks) on a trace that needs more. Sizes given on the command line are kept as
// given. Reserved memory is what a strategy obtains, not what it may obtain: extra regions or pools
// are taken only when needed, so a generous limit costs nothing in the compared figures.
import { EventKind, type RequestTrace } from '../trace/model.ts'
import type { StrategySpec } from './strategy-spec.ts'

/** What sizing needs from a trace: its peak of requested bytes, its largest request, its most live blocks. */
export interface TraceSizes {
  peakRequested: number
  largestRequest: number
  peakLiveBlocks: number
}

const sizesOf = new WeakMap<RequestTrace, TraceSizes>()

/** Whether the spec would be sized (a pool strategy named without parameters): only then is the trace read. */
export function needsSizing(spec: StrategySpec): boolean {
  return Object.keys(spec.params).length === 0 && (spec.strategy === 'buddy' || spec.strategy === 'block_pool')
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
/** Regions a sized block_pool holds the most live blocks in (it obtains them one at a time, as it needs them). */
export const SIZED_REGIONS = 64

function powerOfTwoAtLeast(n: number): number {
  let p = 1
  while (p < n) p *= 2
  return p
}

/**
 * The parameters that size a pool strategy's pools for a trace, or undefined for a strategy that
 * has none to size (slab grows by slabs and serves large requests from their own regions; arena
 * and vmm_growable reserve 64 GiB of address space and map as they go).
 *  - buddy: pools of a power of two that holds the largest request and a quarter of the peak
 *    requested bytes, as many as twice the peak needs (a buddy rounds every request up to a power
 *    of two, so live blocks may take up to twice their bytes) and two more for fragmentation.
 *  - block_pool: blocks as large as the largest request (a multiple of 256 B, at least 1 MiB), in
 *    regions of a 64th of the most blocks ever live (small enough to fit under a cap), one more region than those hold them.
 */
export function sizedParams(strategy: string, sizes: TraceSizes): Record<string, string> | undefined {
  switch (strategy) {
    case 'buddy': {
      const pool = Math.max(MiB, powerOfTwoAtLeast(Math.max(sizes.largestRequest, sizes.peakRequested / 4)))
      return { pool_size: String(pool), max_pools: String(Math.ceil((2 * sizes.peakRequested) / pool) + 2) }
    }
    case 'block_pool': {
      const block = Math.max(MiB, Math.ceil(sizes.largestRequest / 256) * 256)
      const perRegion = Math.max(1, Math.ceil(sizes.peakLiveBlocks / SIZED_REGIONS))
      return { block_size: String(block), pool_size: String(block * perRegion), max_regions: String(Math.ceil(sizes.peakLiveBlocks / perRegion) + 1) }
    }
    default:
      return undefined
  }
}

/**
 * The spec with its pools sized from the trace when it names none of its own parameters; as it is
 * otherwise. `sized` says what was chosen ("pool_size=2GiB, max_pools=4"), for the CLI's output.
 */
export function sizedForTrace(spec: StrategySpec, trace: RequestTrace | TraceSizes): { spec: StrategySpec; sized?: string } {
  if (!needsSizing(spec)) return { spec }
  const sizes = 'events' in trace ? traceSizesCached(trace) : trace
  const params = sizedParams(spec.strategy, sizes)
  if (!params) return { spec }
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
