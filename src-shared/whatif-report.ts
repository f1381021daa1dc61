// The what-if lab's result as the app's API sends it (`whatif:start`, `whatif:result` in
// contract.ts): each configuration's figures under the device limit, ranked, with what it takes to
// replay that configuration in the compare view. The lab itself runs on the host
// (src-main/services/whatif/whatif.ts); this is the JSON a page reads, with no NaN in it (a figure
// the replay could not measure is null).
import { deviceWords, type Device } from './device.ts'

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
  /** An allocator PyTorch does not ship (GMLake's stitching): where it comes from. Absent for PyTorch's settings and vramscope's own models. */
  notInPytorch?: string
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

/**
 * The least any allocator could reserve for the trace: the peak of live bytes, as requested and with
 * each block rounded as PyTorch rounds it (512 B); and what a static plan of every block's lifetime
 * (the `planned` strategy, a bound rather than an allocator) reserves, and the milliseconds its
 * replay took, planning included. Whole numbers; plannedBytes is 0 where the plan would pass 2^52 B.
 * A recorded out-of-memory's request counts, as the rows replay it.
 */
export interface WhatifFloor {
  peakLiveBytes: number
  peakLiveRoundedBytes: number
  plannedBytes: number
  plannedMs: number
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
    /** The most the run reached without a failure, as PyTorch's cap check counts it: reserved memory before a request plus its whole allocation size. */
    lowBytes: number
    /** Reserved memory at the out-of-memory, after PyTorch released what it could. */
    reservedBytes: number
    highBytes: number
    size: number
    stream: string
    event: number
    deviceFree?: number
    source: 'device' | 'fraction'
  }
  /** The device's memory (device.bytes): what a fraction is of, and what no row exceeds without failing. */
  deviceBytes: number
  /**
   * Where the device's memory came from: given (`option`); implied by the file, at least the free
   * memory plus reserved at a recorded out-of-memory (`oom`) or the recorded peak reserved
   * (`recorded-peak`); else `assumed`: an H100 80GB, the file naming no GPU.
   */
  device: Device
  /** The recording ended at its out-of-memory: later, larger steps were never recorded, so each smallest fitting limit is a lower bound. */
  endsAtOom: boolean
  rows: WhatifReportRow[]
  /** The floor of the trace the rows replay, and the static plan held to it (docs/architecture.md#the-floor). */
  floor: WhatifFloor
  /** vramscope's strategies the trace's sizes leave out of the rows (no pool holds them), each with why. */
  leftOut?: { strategy: string; label: string; reason: string }[]
  /**
   * A late or overflowed recording: the state its window opened on, and the rows (labels) that
   * replayed from it: PyTorch configurations whose segments are of the recorded kind. The other
   * rows started empty, with the blocks then live allocated at t = 0.
   */
  recordedState?: { segments: number; blocks: number; expandable: boolean; rows: string[] }
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

// --- the report in words: one text for the CLI and the app ---------------------------------------

export { ASSUMED_DEVICE } from './device.ts'
/** The smallest-limit search's precision, relative to the limit found (the lab's SEARCH_TOLERANCE). */
export const SEARCH_PRECISION = 0.01

/** What the report says in words, each a sentence; `bytes` formats a byte count (both sides print "1.70 GiB"). */
export interface WhatifWords {
  /** The recommendation: the best row's line, or why there is none. */
  best: string
  /** The device's memory and where it came from. */
  device: string
  /** A smallest fitting limit as a cell shows it: "at least 1.70 GiB" where the recording ended at its out-of-memory. */
  smallest: (row: Pick<WhatifReportRow, 'smallestFittingBytes'>) => string
  /** Further findings: the lower bound, ties within the search's precision, what the recorded settings cost. */
  notes: string[]
  /** The floor said first: what the recorded (else default) settings reserve against it, and the best setting's distance to it; absent where the report has no floor. */
  floor?: string
}

function percent(r: number): string {
  return `${r > 0 ? '+' : ''}${(r * 100).toFixed(0)} %`
}

/** What the words read of a report: the host's result and the page's report both have it. */
export type WordsOf = Pick<WhatifReport, 'endsAtOom' | 'limit' | 'deviceBytes' | 'device'> &
  Partial<Pick<WhatifReport, 'implied' | 'floor'>> & {
    rows: readonly Pick<WhatifReportRow, 'rank' | 'failures' | 'smallestFittingBytes' | 'line' | 'label' | 'kind' | 'conf' | 'peakReserved'>[]
  }

/**
 * The report's recommendation and findings in words, the same on every side; `deviceArgument`
 * names where the device's memory is given (the CLI's --gpu, the app's field).
 */
export function whatifWords(report: WordsOf, bytes: (n: number) => string, deviceArgument = '--gpu'): WhatifWords {
  const atLeast = report.endsAtOom ? 'at least ' : ''
  const smallest = (row: Pick<WhatifReportRow, 'smallestFittingBytes'>): string =>
    row.smallestFittingBytes === null ? 'none' : `${atLeast}${bytes(row.smallestFittingBytes)}`
  const limitText = report.limit.bytes === null ? `the device's ${bytes(report.deviceBytes)}` : `the ${bytes(report.limit.bytes)} limit`
  const ranked = report.rows.filter((r) => r.rank > 0).sort((a, b) => a.rank - b.rank)
  const first = ranked[0]
  let best: string
  if (first === undefined) best = 'best: none (no configuration was ranked)'
  else if (first.failures === 0) best = `best: ${first.line ?? first.label}`
  else {
    // Nothing runs the trace under the limit: no setting is "best", only more memory helps.
    const fitting = ranked.filter((r) => r.smallestFittingBytes !== null).sort((a, b) => a.smallestFittingBytes! - b.smallestFittingBytes!)[0]
    best =
      `best: none: every configuration fails under ${limitText}, so no setting helps, only more memory` +
      (fitting ? `: the least that runs it is ${smallest(fitting)} (${fitting.line ?? fitting.label})` : ' (none runs it within the device)')
  }
  const device = deviceWords(report.device, bytes, deviceArgument)
  const notes: string[] = []
  if (report.limit.bytes !== null && report.limit.bytes > report.deviceBytes)
    notes.push(`the ${bytes(report.limit.bytes)} limit is more than the device's ${bytes(report.deviceBytes)}: no row uses more than the device has`)
  const i = report.implied
  // The limit is never silently below what the run reached (whatif.ts, impliedLimitBytes).
  if (report.limit.source === 'implied' && i?.source === 'device' && i.deviceFree !== undefined && i.reservedBytes + i.deviceFree < i.lowBytes)
    notes.push(
      `the out-of-memory's free memory plus reserved at it, ${bytes(i.reservedBytes + i.deviceFree)}, is less than the run reached before it, ${bytes(i.lowBytes)} (reserved plus a request's whole allocation size, as PyTorch's check counts it): the limit is ${bytes(i.lowBytes)}`,
    )
  if (report.endsAtOom)
    notes.push(
      'the recording ended at its out-of-memory: later, larger steps were never recorded, so each smallest fitting limit is a lower bound (at least that much)',
    )
  // A tie the ranking broke by peak reserved: the best and a row whose smallest fitting is within the search's precision.
  if (first && first.failures === 0 && first.smallestFittingBytes !== null) {
    const tied = ranked.filter(
      (r) =>
        r !== first &&
        r.failures === 0 &&
        r.smallestFittingBytes !== null &&
        Math.abs(r.smallestFittingBytes - first.smallestFittingBytes!) <= SEARCH_PRECISION * Math.max(r.smallestFittingBytes, first.smallestFittingBytes!),
    )
    if (tied.length > 0)
      notes.push(
        `${tied.length + 1} configurations fit within ${(SEARCH_PRECISION * 100).toFixed(0)} % of each other (the search's precision): ranked among them by peak reserved`,
      )
  }
  const recorded = report.rows.find((r) => r.kind === 'recorded')
  const defaults = report.rows.find((r) => r.kind === 'pytorch' && r.conf === '')
  if (recorded && defaults && recorded.conf !== '' && defaults.peakReserved > 0) {
    const by = (a: number, b: number): string => (a === b ? 'the same as' : `${percent((a - b) / b)} against`)
    let text = `the recorded settings (${recorded.conf}) reserve ${bytes(recorded.peakReserved)} at the peak, ${by(recorded.peakReserved, defaults.peakReserved)} PyTorch's defaults (${bytes(defaults.peakReserved)})`
    if (recorded.smallestFittingBytes !== null && defaults.smallestFittingBytes !== null)
      text +=
        Math.abs(recorded.smallestFittingBytes - defaults.smallestFittingBytes) <= SEARCH_PRECISION * defaults.smallestFittingBytes
          ? `; both fit in ${smallest(defaults)}`
          : `; they fit in ${smallest(recorded)}, the defaults in ${smallest(defaults)}`
    if (recorded.failures !== defaults.failures) text += `; ${recorded.failures} failures against ${defaults.failures} under ${limitText}`
    notes.push(text)
  }
  return { best, device, smallest, notes, ...(report.floor && { floor: floorWords(report.floor, report.rows, first, bytes, smallest) }) }
}

/** Of `of`, as a whole percent ("10 %"). */
function share(part: number, of: number): string {
  return `${of > 0 ? Math.round((part / of) * 100) : 0} %`
}

/**
 * The floor in words: "56.9 GiB reserved; 51.0 GiB live at the peak: 5.9 GiB, 10 %, lost to
 * fragmentation and caching", for the recorded settings (else PyTorch's defaults); where they fail
 * under the limit, the same of the least memory they run the trace in. Then the best setting's
 * distance to the floor, and the static plan's.
 */
function floorWords(
  f: WhatifFloor,
  rows: WordsOf['rows'],
  best: WordsOf['rows'][number] | undefined,
  bytes: (n: number) => string,
  smallest: WhatifWords['smallest'],
): string {
  const live = f.peakLiveRoundedBytes
  const parts: string[] = []
  // PyTorch's defaults where they are ranked: beside RMM's allocators on an RMM log they are a
  // comparison, not what the program ran with.
  const reference = rows.find((r) => r.kind === 'recorded') ?? rows.find((r) => r.kind === 'pytorch' && r.conf === '' && r.rank > 0)
  const whose = reference?.kind === 'recorded' ? 'the recorded settings' : "PyTorch's defaults"
  const lostOf = (total: number): string => `${bytes(total - live)}, ${share(total - live, total)}, lost to fragmentation and caching`
  if (reference && reference.failures === 0 && reference.peakReserved >= live)
    parts.push(`${bytes(reference.peakReserved)} reserved (${whose}); ${bytes(live)} live at the peak: ${lostOf(reference.peakReserved)}`)
  else if (reference && reference.smallestFittingBytes !== null && reference.smallestFittingBytes >= live)
    parts.push(`${bytes(live)} live at the peak; ${whose} run it in ${smallest(reference)}: ${lostOf(reference.smallestFittingBytes)}`)
  else parts.push(`${bytes(live)} live at the peak: no allocator runs it in less`)
  if (best && best !== reference) {
    // A ranked strategy row is one of RMM's allocators on an RMM log, sized to the whole device as
    // REPLAY_BENCH -s sizes it: the device it runs on is its figure, not what it reserves.
    if (best.kind === 'strategy' && best.failures === 0 && best.smallestFittingBytes !== null && best.smallestFittingBytes >= live)
      parts.push(`the best allocator (${best.label}) runs it in ${smallest(best)}, ${share(best.smallestFittingBytes - live, live)} above the floor`)
    // Ranked by the least memory it runs the trace in: where a limit makes it reserve less than it
    // does on the whole device (it frees cached blocks and retries), that is its distance.
    else if (best.failures === 0 && best.smallestFittingBytes !== null && best.smallestFittingBytes >= live && best.smallestFittingBytes < best.peakReserved)
      parts.push(
        `the best configuration (${best.line ?? best.label}) runs it in ${smallest(best)}, ${share(best.smallestFittingBytes - live, live)} above the floor (on the whole device it reserves ${bytes(best.peakReserved)})`,
      )
    else if (best.failures === 0 && best.peakReserved >= live)
      parts.push(
        `the best configuration (${best.line ?? best.label}) reserves ${bytes(best.peakReserved)}, ${share(best.peakReserved - live, live)} above the floor`,
      )
    else if (best.smallestFittingBytes !== null && best.smallestFittingBytes >= live)
      parts.push(
        `the best configuration (${best.line ?? best.label}) runs it in ${smallest(best)}, ${share(best.smallestFittingBytes - live, live)} above the floor`,
      )
  }
  if (f.plannedBytes > 0)
    parts.push(`a static plan of every block's lifetime reserves ${bytes(f.plannedBytes)}, ${share(f.plannedBytes - live, live)} above it`)
  return parts.join('; ')
}
