// PyTorch's size policy (c10/cuda/CUDACachingAllocator.cpp, the native caching allocator) in one
// place for the TypeScript side: how a request is rounded (round_size, roundup_power2_divisions),
// which pool serves it (get_pool: small up to kSmallSize), how large a new segment is
// (get_allocation_size), when a cached block may serve a request (get_free_block's max_split_size
// and max_non_split_rounding_size rules), when a block is split (should_split), and the pages an
// expandable segment maps. The caching strategy's `pytorch` preset does the same in C++
// (native/core/strategies/caching_policy.hpp); test/unit/services/pytorch-size-policy.test.ts holds
// the two equal. Sizes are whole numbers of bytes below 2^53, so every step here is exact in a
// double (no 32-bit bit operations).
import type { PytorchConf } from '../../src-shared/pytorch-conf.ts'
import { ROUNDUP_INTERVALS } from '../../src-shared/pytorch-conf.ts'

const MiB = 1024 * 1024

/** kMinBlockSize: every request is at least this, and a multiple of it. */
export const MIN_BLOCK_SIZE = 512
/** kSmallSize: the largest request the small pool serves. */
export const SMALL_SIZE = 1 * MiB
/** kSmallBuffer: a small-pool segment, and an expandable small-pool segment's page. */
export const SMALL_BUFFER = 2 * MiB
/** kLargeBuffer: the segment for a request from kSmallSize to kMinLargeAlloc, and an expandable large-pool segment's page. */
export const LARGE_BUFFER = 20 * MiB
/** kMinLargeAlloc: requests from this size get a segment of their own size, rounded to kRoundLarge. */
export const MIN_LARGE_ALLOC = 10 * MiB
/** kRoundLarge: what a large request's own segment is rounded to. */
export const ROUND_LARGE = 2 * MiB
/** roundup_power2_divisions' first interval starts at 1 MiB (2^20; smaller sizes fall in it too). */
const ROUNDUP_FIRST_LOG2 = 20

export type Pool = 'small' | 'large'

/** The settings of PYTORCH_ALLOC_CONF that decide sizes, as the allocator holds them. */
export interface SizePolicy {
  /** roundup_power2_divisions per interval: [k] for sizes from 2^(20+k) B (k = 0 also below 1 MiB, the last also above); 0 or 1: 512 B steps. */
  readonly roundupDivisions: readonly number[]
  /** max_split_size in bytes (Infinity: unlimited, PyTorch's SIZE_MAX). */
  readonly maxSplitSize: number
  /** max_non_split_rounding_size in bytes (default kLargeBuffer). */
  readonly maxNonSplitRoundingSize: number
  readonly expandableSegments: boolean
}

/** PyTorch's defaults: no divisions, max_split_size unlimited, max_non_split_rounding 20 MiB, no expandable segments. */
export const DEFAULT_SIZE_POLICY: SizePolicy = Object.freeze({
  roundupDivisions: Object.freeze(new Array<number>(ROUNDUP_INTERVALS).fill(0)),
  maxSplitSize: Infinity,
  maxNonSplitRoundingSize: LARGE_BUFFER,
  expandableSegments: false,
})

/**
 * The size policy of a parsed configuration (parsePytorchConf). roundup_power2_divisions' list
 * form is expanded as PyTorch's parser does: each entry sets the interval its boundary (MiB)
 * names, the first entry also every interval below it, and '>' every interval after the last
 * entry named before it.
 */
export function sizePolicyOf(conf: PytorchConf): SizePolicy {
  return {
    roundupDivisions: divisionsByInterval(conf.roundupPower2Divisions),
    maxSplitSize: conf.maxSplitSizeMb === undefined ? Infinity : conf.maxSplitSizeMb * MiB,
    maxNonSplitRoundingSize: conf.maxNonSplitRoundingMb === undefined ? LARGE_BUFFER : conf.maxNonSplitRoundingMb * MiB,
    expandableSegments: conf.expandableSegments === true,
  }
}

function divisionsByInterval(d: PytorchConf['roundupPower2Divisions']): number[] {
  const out = new Array<number>(ROUNDUP_INTERVALS).fill(0)
  if (d === undefined) return out
  if (typeof d === 'number') return out.fill(d)
  let first = true
  let last = 0
  for (const { boundary, divisions } of d) {
    if (boundary === '>') {
      for (let i = first ? 0 : last + 1; i < ROUNDUP_INTERVALS; i++) out[i] = divisions
      continue
    }
    const index = Math.min(log2Floor(boundary), ROUNDUP_INTERVALS - 1)
    if (first) for (let i = 0; i < index; i++) out[i] = divisions
    first = false
    out[index] = divisions
    last = index
  }
  return out
}

/** The largest power of two at most `n` (n >= 1), exact for any n below 2^53 (Math.log2 alone may round up near a power of two). */
function powerOfTwoFloor(n: number): number {
  let p = 2 ** Math.floor(Math.log2(n))
  if (p > n) p /= 2
  else if (p * 2 <= n) p *= 2
  return p
}

function log2Floor(n: number): number {
  return Math.round(Math.log2(powerOfTwoFloor(n)))
}

function alignUp(n: number, to: number): number {
  return Math.ceil(n / to) * to
}

/** roundup_power2_divisions' value for a size: its interval is log2(size) - 20, within 0..15. */
export function divisionsFor(size: number, policy: SizePolicy): number {
  const index = Math.max(0, Math.min(log2Floor(size) - ROUNDUP_FIRST_LOG2, ROUNDUP_INTERVALS - 1))
  return policy.roundupDivisions[index] ?? 0
}

/**
 * PyTorch roundup_power2_next_division: the interval from the power of two at or below `size` to
 * the next one is cut into `divisions` equal steps, and the size rounds up to the next step
 * (1200 B in 4 divisions of 1024..2048 -> 1280 B). A power of two stays as it is.
 */
export function roundupPower2NextDivision(size: number, divisions: number): number {
  const floor = powerOfTwoFloor(size)
  if (floor === size) return size
  const step = floor / powerOfTwoFloor(divisions)
  if (step < 1) return floor * 2
  return alignUp(size, step)
}

/**
 * PyTorch round_size: the block size a request of `bytes` is served with. At least
 * kMinBlockSize (512 B); where roundup_power2_divisions gives this size more than one division
 * and the size is above 512 B times them, the next division (roundupPower2NextDivision); else the
 * next multiple of 512 B.
 */
export function roundSize(bytes: number, policy: SizePolicy = DEFAULT_SIZE_POLICY): number {
  if (bytes < MIN_BLOCK_SIZE) return MIN_BLOCK_SIZE
  const divisions = divisionsFor(bytes, policy)
  if (divisions > 1 && bytes > MIN_BLOCK_SIZE * divisions) return roundupPower2NextDivision(bytes, divisions)
  return alignUp(bytes, MIN_BLOCK_SIZE)
}

/** PyTorch get_pool: a rounded size up to kSmallSize (1 MiB) is served by the small pool. */
export function poolOf(size: number): Pool {
  return size <= SMALL_SIZE ? 'small' : 'large'
}

/**
 * PyTorch get_allocation_size: the segment obtained from the device for a rounded size no cached
 * block serves. A small-pool size gets kSmallBuffer (2 MiB), a size below kMinLargeAlloc (10 MiB)
 * kLargeBuffer (20 MiB), a larger one its own size rounded up to kRoundLarge (2 MiB). With
 * expandable segments this is still the size the cap is checked against, though only pages are
 * mapped.
 */
export function segmentAllocationSize(size: number): number {
  if (size <= SMALL_SIZE) return SMALL_BUFFER
  if (size < MIN_LARGE_ALLOC) return LARGE_BUFFER
  return alignUp(size, ROUND_LARGE)
}

/** round_size, then get_allocation_size: the least a request of `bytes` asks of the device when no cached block serves it. */
export function allocationSize(bytes: number, policy: SizePolicy = DEFAULT_SIZE_POLICY): number {
  return segmentAllocationSize(roundSize(bytes, policy))
}

/**
 * get_free_block's oversize rules for the best-fitting cached block of `blockSize` found for a
 * rounded `size`: a request below max_split_size never takes a block of max_split_size or more,
 * and a request of max_split_size or more takes one only when it is less than
 * max_non_split_rounding_size larger.
 */
export function mayServe(blockSize: number, size: number, policy: SizePolicy = DEFAULT_SIZE_POLICY): boolean {
  if (size < policy.maxSplitSize && blockSize >= policy.maxSplitSize) return false
  if (size >= policy.maxSplitSize && blockSize >= size + policy.maxNonSplitRoundingSize) return false
  return true
}

/**
 * PyTorch should_split: whether a block of `blockSize` serving a rounded `size` is split. In the
 * small pool, or anywhere with expandable segments, a remainder of 512 B or more is split off; in
 * the large pool only a remainder above kSmallSize (1 MiB), and never for a request of
 * max_split_size or more.
 */
export function shouldSplit(blockSize: number, size: number, pool: Pool, policy: SizePolicy = DEFAULT_SIZE_POLICY): boolean {
  const remaining = blockSize - size
  if (pool === 'small' || policy.expandableSegments) return remaining >= MIN_BLOCK_SIZE
  return size < policy.maxSplitSize && remaining > SMALL_SIZE
}

/** The page an expandable segment maps: kSmallBuffer (2 MiB) in the small pool, kLargeBuffer (20 MiB) in the large one. */
export function expandablePageSize(pool: Pool): number {
  return pool === 'small' ? SMALL_BUFFER : LARGE_BUFFER
}
