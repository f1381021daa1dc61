// The PyTorch snapshot import's public types: its options and what it returns (the entry,
// index.ts, and the mapper share them).
import type { RequestTrace } from '../../trace/model.ts'
import type { StrategyResult } from '../../../../src-shared/results.ts'

export const RECORDED_LAYOUT_NAME = 'pytorch (recorded)'

/**
 * Trace properties that mark the window-open state of a late or overflowed recording (read back by
 * services/replay/initial-state.ts): how many leading request events stand in for blocks live
 * before the window (every device's), and how many leading rows of each recorded layout, in order,
 * comma-separated, are the state rebuilt from the final `segments`.
 */
export const STAND_IN_EVENTS = 'pytorch.window.stand_in_events'
export const STAND_IN_ROWS = 'pytorch.window.stand_in_rows'

export interface PytorchImportOptions {
  /** The device to import (an index of device_traces), or 'all'. Default: 0, or the first device with data. */
  device?: number | 'all'
  /** What meta.origin says (default: the file's base name). */
  origin?: string
  /** Bytes read at a time (default 4 MiB). */
  chunkBytes?: number
  /**
   * Pickles at least this large get the memo pre-pass that bounds memory (default 4 MiB) when the
   * general lane reads them; a file this large is read in chunks, never whole.
   */
  boundedAbove?: number
  /** Files smaller than this are read whole and decoded by the fast lane (default 256 MiB). */
  wholeBelow?: number
  /** parsePytorchSnapshot without the fast lane (tests and benchmarks compare the two). */
  generalPathOnly?: boolean
  /** Most nested containers in the pickle (default 200). */
  maxDepth?: number
  /**
   * Most values the snapshot's generic parts (settings, segments, frames looked up again) may expand
   * to, a value shared by reference counted at each use (default: 2^20 + 4 per byte of the file,
   * or VRAMSCOPE_MAX_EXPANDED_VALUES).
   */
  maxExpandedValues?: number
  /** Called after each chunk; bytesTotal counts every pass over the file, so bytesDone only grows. */
  onProgress?: (progress: { bytesDone: number; bytesTotal: number; phase: 'scan' | 'parse' }) => void
  signal?: AbortSignal
}

export interface PytorchImport {
  trace: RequestTrace
  /** PyTorch's own layout of each imported device, named "pytorch (recorded)" (", cuda:N" with several). */
  recorded: StrategyResult[]
  /** Devices the snapshot has events or segments for. */
  devices: number[]
  format: 'pickle' | 'json'
  /** What the trace's ring buffer lost and what stands in for it, over the imported devices. */
  overflow: OverflowCounts
}

export interface OverflowCounts {
  /** Frees, releases and completions of blocks or segments the trace never saw created. */
  orphanEvents: number
  /** Allocations added at t = 0 (request trace). */
  synthesizedAllocs: number
  /** Blocks added at t = 0 to the recorded layout (allocs of orphans and of live blocks). */
  synthesizedBlocks: number
  /** Segment reservations (or mappings) added at t = 0 to the recorded layout. */
  synthesizedSegments: number
}
