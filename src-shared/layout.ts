// The layout trace in memory: what one strategy did with a request trace's requests
// (docs/architecture.md#layout-trace). Columns of typed arrays mirroring the native tracer's
// trace_event (native/core/include/vramscope/tracer.hpp) plus the time of each event, one row per
// event.
// Replay and real recordings produce it; the trace file stores it beside the request trace.

/** trace_op codes of native/core/include/vramscope/tracer.hpp, same numbers. */
export const LayoutOp = {
  alloc: 0,
  free: 1,
  freePending: 2,
  freeCompleted: 3,
  regionReserve: 4,
  regionRelease: 5,
  vaReserve: 6,
  vaRelease: 7,
  map: 8,
  unmap: 9,
  split: 10,
  merge: 11,
  failure: 12,
  reset: 13,
  trim: 14,
} as const
export type LayoutOp = (typeof LayoutOp)[keyof typeof LayoutOp]

/**
 * How a strategy reuses freed memory. 'any': a freed block is reusable at once. Bump allocators
 * (arena, device_bump) reuse nothing below their pointer until a reset; 'bump-lifo' (arena's
 * lifo_reclaim) pops the pointer back over the topmost freed blocks.
 */
export type ReuseKind = 'any' | 'bump' | 'bump-lifo'

export function reuseKindOf(strategy: string, params: Record<string, unknown>): ReuseKind {
  if (strategy === 'device_bump') return 'bump'
  if (strategy === 'arena') return String(params['lifo_reclaim'] ?? 'true') === 'false' ? 'bump' : 'bump-lifo'
  return 'any'
}

export interface LayoutTrace {
  op: Uint8Array
  /** Device (or simulated) address; all 64 bits may be used. */
  address: BigUint64Array
  /** Bytes: the rounded block size, region size... per op (tracer.hpp). Exact below 2^53. */
  size: Float64Array
  /** Bytes the caller asked for (alloc/free). */
  requested: Float64Array
  /** cudaStream_t value as a number. */
  stream: Float64Array
  /** Nanoseconds since the trace's start. */
  time: Float64Array
  /** Strategy-specific: size class, buddy order, segment pool... */
  aux: Uint32Array
  /**
   * A recorded layout's: the request event (index into the trace's events) each row belongs to, as
   * its importer knew it (docs/architecture.md, "Recorded layouts on the request events"). Absent
   * where the source did not say (a replay's layout, a recording's, a file of 1.1 or before): the
   * rows are then placed by time.
   */
  event?: Uint32Array
}

/** Zeroed columns for `n` layout events (importers, the trace file reader and tests fill them). */
export function allocateLayout(n: number): LayoutTrace {
  return {
    op: new Uint8Array(n),
    address: new BigUint64Array(n),
    size: new Float64Array(n),
    requested: new Float64Array(n),
    stream: new Float64Array(n),
    time: new Float64Array(n),
    aux: new Uint32Array(n),
  }
}
