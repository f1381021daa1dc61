// The what-if lab's result as the app's API sends it (`whatif:start`, `whatif:result` in
// contract.ts): each configuration's figures under the device limit, ranked, with what it takes to
// replay that configuration in the compare view. The lab itself runs on the host
// (src-main/services/whatif/whatif.ts); this is the JSON a page reads, with no NaN in it (a figure
// the replay could not measure is null).

/** One configuration's row. Byte counts are whole numbers. */
export interface WhatifReportRow {
  /** 1 = best; 0: not ranked (`notRanked` says why). */
  rank: number
  notRanked?: string
  /** The configuration as PYTORCH_ALLOC_CONF ('' for PyTorch's defaults); a strategy row's spec otherwise. */
  conf: string
  /** 'recorded': the settings the snapshot was taken with. */
  kind: 'recorded' | 'pytorch' | 'strategy'
  label: string
  /** The line to paste into a shell; absent for strategies PyTorch cannot be told to use. */
  line?: string
  /** The model it ran on: a strategy and its parameters (the limit not included). */
  strategy: string
  params: Record<string, string>
  peakReserved: number
  /** PyTorch's allocated bytes: blocks as rounded. */
  peakAllocated: number
  peakRequested: number
  /** Segments obtained with cudaMalloc (PyTorch's segment.all.allocated). */
  segments: number
  /** Pages mapped into expandable segments. */
  maps: number
  deviceCalls: number
  /** 0 to 1; null where the replay did not measure it. */
  fragmentationAtPeak: number | null
  /** Requests that did not fit under the limit, and the first one's event (-1: none). */
  failures: number
  firstFailureEvent: number
  /** Of the recording's out-of-memory requests, how many failed again. */
  oomReproduced: number
  /** The smallest limit that runs the whole trace with no failure (to within 1 %); null: none up to the device. */
  smallestFittingBytes: number | null
  /** Reserved memory keeps growing over the trace while allocated memory does not. */
  growing: boolean
  /** This row as a `replay:start` request replays it, the limit included. */
  replay: WhatifReplay
}

/** What replays one row (`replay:start`'s strategies, cap and a label for its map). */
export interface WhatifReplay {
  /** One strategy in the CLI's syntax. */
  strategies: string
  /** A device cap in bytes, for a row whose limit is not a parameter of its strategy. */
  cap?: string
  label: string
}

export interface WhatifReport {
  events: number
  /** The configuration the snapshot was recorded with, when it carries one. */
  recordedConf?: string
  /** The limit the rows ran under: given, implied by a recorded out-of-memory, or none (the whole device). */
  limit: { bytes: number | null; source: 'option' | 'implied' | 'none' }
  /** What a recorded out-of-memory says of the limit the program ran under. */
  implied?: {
    lowBytes: number
    highBytes: number
    size: number
    stream: string
    event: number
    deviceFree?: number
    source: 'device' | 'fraction'
  }
  deviceBytes: number
  rows: WhatifReportRow[]
  /** The recorded settings replayed against the recorded layout. */
  fidelity?: {
    conf: string
    recordedPeakReserved: number
    replayedPeakReserved: number
    peakReservedError: number
    recordedSegments: number
    replayedSegments: number
    /** The first segment event (reserve or release, with its size) where the two differ; -1: none. */
    firstSegmentDifference: number
    segmentEvents: number
  }
  elapsedMs: number
  replays: number
  cores: number
}

/** A parameter value as the CLI's strategy syntax reads it back: bracketed where it holds a comma or colon. */
function specValue(value: string): string {
  return /[,:]/.test(value) && !value.startsWith('[') ? `[${value}]` : value
}

/** `strategy:key=value:…` in the CLI's syntax (src-main/services/replay/strategy-spec.ts reads it). */
export function strategySpecText(strategy: string, params: Record<string, string>): string {
  return [strategy, ...Object.entries(params).map(([k, v]) => `${k}=${specValue(v)}`)].join(':')
}

/**
 * How to replay a row as the lab ran it: a PyTorch configuration on the caching model takes the
 * limit as its max_reserved (set_per_process_memory_fraction: what garbage collection is a fraction
 * of), any other strategy a device of that size.
 */
export function rowReplay(row: Pick<WhatifReportRow, 'kind' | 'strategy' | 'params' | 'label'> & { conf?: string }, limit: number | null): WhatifReplay {
  const params = { ...row.params }
  let cap: string | undefined
  if (limit !== null) {
    if (row.kind !== 'strategy' && row.strategy === 'caching') {
      const existing = params['max_reserved']
      params['max_reserved'] = String(existing ? Math.min(Number(existing), limit) : limit)
    } else cap = String(limit)
  }
  // A PyTorch configuration is shown in PyTorch's syntax: pytorch:[conf], the limit after it.
  const strategies =
    row.kind !== 'strategy' && row.strategy === 'caching' && row.conf !== undefined
      ? `pytorch:[${row.conf}]${params['max_reserved'] !== undefined ? `:max_reserved=${params['max_reserved']}` : ''}`
      : strategySpecText(row.strategy, params)
  return { strategies, ...(cap !== undefined && { cap }), label: `what-if: ${row.label}` }
}
