// The what-if lab (docs/architecture.md#what-if-lab): one request trace replayed through many
// PyTorch allocator configurations (PYTORCH_ALLOC_CONF strings, src-shared/pytorch-conf.ts) and
// other strategies, each under a device limit, with the smallest limit that runs the whole trace
// searched to within 1 %. Configurations run side by side, one native replay each at a time, as
// many at once as the machine has cores (each on a thread of the engine's one pool of replay threads,
// which every replay of the process shares: docs/architecture.md#one-pool-of-replay-threads).
//
// An out-of-memory the program saw when it was recorded is replayed as that request (an alloc of
// its size, freed at once if it fits): a configuration under the limit either fails there too,
// reproducing the recording, or shows that the request would have fitted.
import { availableParallelism } from 'node:os'

import { LayoutOp } from '../../../src-shared/layout.ts'
import type { StrategyResult } from '../../../src-shared/results.ts'
import { ConfError, confLine, formatPytorchConf, parsePytorchConf, shownValue, type PytorchConf } from '../../../src-shared/pytorch-conf.ts'
import { isRecorded } from '../../../src-shared/compare.ts'
import { strategySpecText, type WhatifReport, type WhatifReportRow } from '../../../src-shared/whatif-report.ts'
import { floorOf } from '../analysis/floor.ts'
import type { OpenedInput } from '../import/open-input.ts'
import { deviceOf, impliedLimit, impliedLimitBytes } from '../replay/device.ts'
import { buildModel, placementFor, recordedConf, startFor, withOomRequests } from '../replay/replay-input.ts'
import { windowOpenState, type WindowOpen } from '../replay/initial-state.ts'
import { cancelledError, replayTrace, type ReplayResult, type ReplayTarget } from '../replay/replay.ts'
import { sizedForTrace } from '../replay/sized-defaults.ts'
import { EventKind, type RequestTrace } from '../trace/model.ts'

/** The smallest-limit search stops when the bracket is this narrow, relative to its top. */
const SEARCH_TOLERANCE = 0.01
/** Steps of a quarter the search takes above a top that does not fit before it tries the whole device. */
const GROWTH_STEPS = 4

export interface WhatifOptions {
  /** PYTORCH_ALLOC_CONF strings ('recorded': the trace's own settings). None: the grid. */
  confs?: readonly string[]
  /** The device limit, as set_per_process_memory_fraction sets it (bytes, more than 0). Default: the limit an out-of-memory in the trace implies, else none. */
  capBytes?: number
  /** The device limit as a fraction of the device's memory (set_per_process_memory_fraction's argument), in place of capBytes. */
  capFraction?: number
  /**
   * The device's memory: what a per_process_memory_fraction is a fraction of, and what no row may
   * exceed. Default: what the file implies (an out-of-memory's free memory plus reserved, or a
   * recorded peak above an H100's), else an H100 80GB (85,017,493,504 B), said so in `device`.
   */
  deviceBytes?: number
  /** Search each configuration's smallest fitting limit (default true). */
  search?: boolean
  /** With the grid: other strategies as further rows (default true). */
  strategies?: boolean
  /** Replays at once (default: the machine's cores). */
  concurrency?: number
  onProgress?: (progress: WhatifProgress) => void
  signal?: AbortSignal
}

export interface WhatifProgress {
  /** Replays finished, and an estimate of all there will be. */
  done: number
  total: number
  fraction: number
  /** The configuration that just finished a replay. */
  label: string
}

// The row, the implied limit and the fidelity are declared once, as the app receives them
// (src-shared/whatif-report.ts); here a row's fragmentation is a number (NaN where not measured)
// and it counts its replays.
export type RowKind = WhatifReportRow['kind']
export type WhatifRow = Omit<WhatifReportRow, 'replay' | 'fragmentationAtPeak'> & { fragmentationAtPeak: number; replays: number }
export type WhatifFidelity = NonNullable<WhatifReport['fidelity']>
export type ImpliedLimit = NonNullable<WhatifReport['implied']>

export type WhatifResult = Omit<WhatifReport, 'rows'> & {
  rows: WhatifRow[]
  /** Strategy rows the trace's sizes leave out, each with its reason. */
  leftOut: LeftOutRow[]
  eventsReplayed: number
  eventsPerSecondPerCore: number
}

/** A bad argument of the lab: `argument` names it (--conf, --cap), and the message starts with it. */
export class WhatifError extends Error {
  override name = 'WhatifError'
  readonly code = 'INVALID_ARGUMENT'
  constructor(
    message: string,
    readonly argument = '--conf',
  ) {
    super(message)
  }
}

// --- the configurations ----------------------------------------------------------------------------

interface Config {
  conf: string
  kind: RowKind
  label: string
  /** A PyTorch configuration; undefined for a strategy row. */
  parsed?: PytorchConf
  strategy: string
  params: Record<string, string>
  notModelled: string[]
  line?: string
  /** Where an allocator PyTorch does not ship comes from (the row's notInPytorch). */
  notInPytorch?: string
  /** A strategy row ranked with the settings (RMM's allocators on an RMM log). */
  ranked?: boolean
  /** Why a settings row stands beside the ranking (PyTorch's defaults on an RMM log). */
  comparison?: string
}

/** The grid: the recorded settings, the defaults, each option alone at several values, sensible combinations. */
export const GRID_CONFS: readonly string[] = [
  '',
  'expandable_segments:True',
  'max_split_size_mb:64',
  'max_split_size_mb:128',
  'max_split_size_mb:256',
  'max_split_size_mb:512',
  'roundup_power2_divisions:2',
  'roundup_power2_divisions:4',
  'roundup_power2_divisions:8',
  'roundup_power2_divisions:16',
  'roundup_power2_divisions:[256:1,512:2,1024:4,>:8]',
  'garbage_collection_threshold:0.6',
  'garbage_collection_threshold:0.8',
  'max_split_size_mb:128,roundup_power2_divisions:4',
  'max_split_size_mb:256,garbage_collection_threshold:0.6',
  'max_split_size_mb:64,max_non_split_rounding_mb:256',
  'expandable_segments:True,roundup_power2_divisions:4',
  'expandable_segments:True,garbage_collection_threshold:0.8',
  'expandable_segments:True,max_split_size_mb:256',
  'backend:cudaMallocAsync',
]

/** A strategy row the trace's sizes leave out, and why (sized-defaults.ts). */
export interface LeftOutRow {
  strategy: string
  label: string
  reason: string
}

/**
 * Further rows: vramscope's other strategies, which PyTorch cannot be told to use, sized from the
 * trace by the one rule the app and the CLI use (sizedForTrace). A row no size holds is left out
 * with its reason, never failing the run.
 */
function strategyRows(trace: RequestTrace): { configs: Config[]; leftOut: LeftOutRow[] } {
  const rows: [string, Record<string, string>, string][] = [
    ['cuda_malloc', {}, 'cudaMalloc per request (PYTORCH_NO_CUDA_MEMORY_CACHING=1)'],
    ['vmm_growable', {}, 'one growing virtual-memory region'],
    ['buddy', {}, 'buddy allocator'],
    ['caching', { preset: 'pow2' }, 'caching, power-of-two classes'],
    [STITCHING, {}, 'stitching of free VMM chunks (GMLake)'],
    [PLANNED, {}, 'static plan (every lifetime known ahead)'],
  ]
  const configs: Config[] = []
  const leftOut: LeftOutRow[] = []
  for (const [strategy, written, label] of rows) {
    const sizing = sizedForTrace({ label, strategy, params: written }, trace)
    if (sizing.unsized !== undefined) {
      leftOut.push({ strategy, label, reason: sizing.unsized })
      continue
    }
    const params = sizing.spec.params
    configs.push({
      conf: strategySpecText(strategy, params),
      kind: 'strategy',
      label,
      strategy,
      params,
      notModelled: [],
      ...(strategy === STITCHING && { notInPytorch: STITCHING_SOURCE }),
      ...(strategy === 'cuda_malloc' && { line: 'PYTORCH_NO_CUDA_MEMORY_CACHING=1' }),
    })
  }
  return { configs, leftOut }
}

/** The static plan (docs/strategies.md#planned): a bound, not an allocator. */
const PLANNED = 'planned'

/** GMLake's stitching allocator (docs/strategies.md#stitching): an allocator beside PyTorch's, which PyTorch does not ship. */
const STITCHING = 'stitching'
const STITCHING_SOURCE = "GMLake's virtual memory stitching (ASPLOS 2024), as a patched PyTorch build; PyTorch does not ship it"

/**
 * RMM's own allocators, the grid of an RMM log (docs/strategies.md#rmms-allocators): ranked, each
 * as RMM's replay benchmark (REPLAY_BENCH) builds it, and the pool also as it starts without a
 * simulated size and as rmm.reinitialize(pool_allocator=True) makes it. Sizes are percentages of
 * the device's free memory, so that the smallest-limit search sizes them with the device it tries,
 * as REPLAY_BENCH's -s does.
 */
const RMM_ROWS: readonly [string, Record<string, string>, string][] = [
  ['rmm_pool', { initial_pool_percent: '100', maximum_pool_percent: '100' }, 'RMM pool of the whole device (REPLAY_BENCH -r pool -s)'],
  ['rmm_pool', {}, 'RMM pool growing from empty (REPLAY_BENCH -r pool)'],
  ['rmm_pool', { initial_pool_percent: '50' }, 'RMM pool of half the free memory, growing (rmm.reinitialize(pool_allocator=True))'],
  ['rmm_arena', { arena_percent: '100' }, 'RMM arena of the whole device (REPLAY_BENCH -r arena -s)'],
  [
    'rmm_binning',
    { initial_pool_percent: '100', maximum_pool_percent: '100' },
    'RMM binning, bins of 256 KiB to 4 MiB over a pool of the whole device (REPLAY_BENCH -r binning -s)',
  ],
]
/** PyTorch's defaults beside RMM's allocators on an RMM log. */
const RMM_LOG_PYTORCH = "PyTorch's caching allocator, for comparison: the program allocated through RMM"

function rmmRows(): Config[] {
  return RMM_ROWS.map(([strategy, params, label]) => ({
    conf: strategySpecText(strategy, params),
    kind: 'strategy',
    label,
    strategy,
    params: { ...params },
    notModelled: [],
    ranked: true,
  }))
}

/** Why a strategy row stands beside the ranking rather than in it. */
function strategyNote(c: Config): string {
  if (c.notInPytorch !== undefined) return 'an allocator PyTorch does not ship: for comparison'
  if (c.strategy === PLANNED) return "a bound, not an allocator: every block placed ahead, knowing every block's lifetime"
  return c.strategy === 'cuda_malloc'
    ? 'no caching: a cudaMalloc and cudaFree per request, each synchronizing the device'
    : 'not a PyTorch allocator setting: for comparison'
}

function pytorchConfig(text: string, kind: RowKind, deviceBytes: number): Config {
  let parsed: PytorchConf
  let model: ReturnType<typeof buildModel>
  try {
    parsed = parsePytorchConf(text)
    // A setting this build's model lacks is named, and the row left unranked, not guessed.
    model = buildModel(parsed, 0, deviceBytes)
  } catch (e) {
    if (e instanceof ConfError) throw new WhatifError(`--conf '${shownValue(text)}': ${e.message}`)
    throw e
  }
  const conf = formatPytorchConf(parsed)
  return {
    conf,
    kind,
    label: kind === 'recorded' ? `recorded (${conf || 'defaults'})` : conf || 'defaults',
    parsed,
    strategy: model.strategy,
    params: model.params,
    notModelled: model.notModelled,
    line: confLine(conf),
  }
}

// --- replays ---------------------------------------------------------------------------------------

interface RunOptions {
  /** The per-process limit (null: none); every run is on a device of the lab's device memory. */
  limit: number | null
  stopAtFailure: boolean
  fragmentation: boolean
  signal?: AbortSignal
}

/**
 * A configuration's replay target under a limit, on a device of `deviceBytes`. PyTorch's limit is
 * the per-process memory fraction: the model's max_reserved (what garbage collection is a fraction
 * of). Other strategies get a device of the limit's size. PyTorch-policy targets replay at the
 * recorded segment addresses. Nothing replays on more memory than the device has.
 */
function targetFor(
  config: Config,
  limit: number | null,
  stored: readonly StrategyResult[],
  deviceBytes: number,
  open: WindowOpen = { kind: 'empty' },
): { target: ReplayTarget; cap: number } {
  const params = { ...config.params }
  let cap = deviceBytes
  if (limit !== null) {
    if (config.parsed && config.strategy === 'caching') {
      const existing = params['max_reserved']
      params['max_reserved'] = String(existing ? Math.min(Number(existing), limit) : limit)
    } else cap = Math.min(limit, deviceBytes)
  }
  const target: ReplayTarget = { strategy: config.strategy, params, label: config.label }
  const placement = placementFor(stored, { strategy: config.strategy, params })
  if (placement.length > 0) target.regionPlacement = placement
  // A late or overflowed recording: from its state when the window opened, where that state's
  // segments are of the kind this configuration makes (replay-input.ts, startFor).
  if (open.kind === 'state' && startFor(open, { strategy: config.strategy, params, label: config.label }, true, cap)?.seeded)
    target.initialState = open.open.state
  return { target, cap }
}

class Runner {
  replays = 0
  eventsReplayed = 0
  constructor(
    private readonly trace: RequestTrace,
    private readonly stored: readonly StrategyResult[],
    private readonly deviceBytes: number,
    readonly open: WindowOpen = windowOpenState(trace, stored),
  ) {}

  async run(config: Config, o: RunOptions): Promise<ReplayResult> {
    const { target, cap } = targetFor(config, o.limit, this.stored, this.deviceBytes, this.open)
    const [result] = await replayTrace(this.trace, [target], {
      layout: false,
      buckets: 256,
      cap,
      ...(o.stopAtFailure && { stopAtFailure: true }),
      ...(!o.fragmentation && { fragmentation: false }),
      ...(o.signal && { signal: o.signal }),
    })
    this.replays++
    this.eventsReplayed += result!.summary.events
    return result!
  }
}

/** Reserved keeps growing while allocated does not: over the second half, reserved rises by 10 % or more while allocated's peak does not rise by 1 %. */
function isGrowing(r: ReplayResult): boolean {
  const b = r.buckets
  const n = b.end.length
  if (n < 8) return false
  const half = n >> 1
  let reservedMid = 0
  let allocatedMid = 0
  for (let k = 0; k < half; k++) {
    reservedMid = Math.max(reservedMid, b.reservedMax[k]!)
    allocatedMid = Math.max(allocatedMid, b.roundedMax[k]!)
  }
  let reservedEnd = 0
  let allocatedEnd = 0
  for (let k = half; k < n; k++) {
    reservedEnd = Math.max(reservedEnd, b.reservedMax[k]!)
    allocatedEnd = Math.max(allocatedEnd, b.roundedMax[k]!)
  }
  return reservedMid > 0 && reservedEnd >= reservedMid * 1.1 && allocatedEnd <= allocatedMid * 1.01
}

/** Segments obtained with cudaMalloc, as PyTorch's segment.all.allocated counts them (expandable segments' pages are maps). */
function segmentsOf(r: ReplayResult): number {
  return (r.summary.deviceCallDetail as unknown as Record<string, number>)['regionAlloc'] ?? 0
}

/** Pages mapped into expandable segments (cuMemMap), as PyTorch's num_device_alloc counts them there. */
function mapsOf(r: ReplayResult): number {
  return (r.summary.deviceCallDetail as unknown as Record<string, number>)['map'] ?? 0
}

async function evaluate(
  config: Config,
  runner: Runner,
  limit: number | null,
  deviceBytes: number,
  search: boolean,
  ooms: readonly number[],
  tick: (label: string) => void,
  signal?: AbortSignal,
): Promise<Omit<WhatifRow, 'rank'>> {
  let replays = 0
  const counted = (label: string): void => {
    replays++
    tick(label)
  }
  const base = await runner.run(config, { limit, stopAtFailure: false, fragmentation: true, ...(signal && { signal }) })
  counted(config.label)
  const s = base.summary
  const failureSet = new Set<number>()
  let failedEvent = -1
  for (const f of s.firstFailures) {
    failureSet.add(f)
    if (failedEvent < 0) failedEvent = f
  }
  // Figures with no limit but the device: the search starts from them.
  let unlimited = base
  if (limit !== null) {
    unlimited = await runner.run(config, { limit: null, stopAtFailure: false, fragmentation: false, ...(signal && { signal }) })
    counted(config.label)
  }
  let smallest: number | null = null
  // A plan runs whole on a device of its own size and on none smaller: no search needed.
  if (config.strategy === PLANNED) smallest = unlimited.summary.failures === 0 ? unlimited.summary.peakReserved : null
  else if (search && unlimited.summary.failures === 0) {
    // Any limit below peak allocated fails; the unlimited peak reserved fits (for garbage
    // collection, whose threshold is a fraction of the limit, it is checked).
    let lo = Math.max(unlimited.summary.peakRounded - 1, 0)
    let hi = unlimited.summary.peakReserved
    const fits = async (bytes: number): Promise<boolean> => {
      const r = await runner.run(config, { limit: bytes, stopAtFailure: true, fragmentation: false, ...(signal && { signal }) })
      counted(config.label)
      return r.summary.failures === 0
    }
    // A few steps of a quarter up (each at least 2 MiB, so a top of 0 B moves), then the whole
    // device: at most GROWTH_STEPS + 1 probes to bracket, and the halving below then takes at most
    // log2(1 / SEARCH_TOLERANCE) + 1 more, since the bracket is never wider than its top. Bounded at
    // any size up to 2^53, each probe one replay.
    let growth = 0
    while (!(await fits(hi))) {
      lo = hi
      if (hi >= deviceBytes) {
        hi = -1
        break
      }
      hi = ++growth < GROWTH_STEPS ? Math.min(deviceBytes, Math.max(Math.ceil(hi * 1.25), hi + (2 << 20))) : deviceBytes
    }
    if (hi > 0) {
      while (hi - lo > Math.max(SEARCH_TOLERANCE * hi, 2 << 20)) {
        const mid = lo + Math.floor((hi - lo) / 2)
        if (await fits(mid)) hi = mid
        else lo = mid
      }
      smallest = hi
    }
  }
  let oomReproduced = 0
  for (const o of ooms) if (failureSet.has(o)) oomReproduced++
  return {
    conf: config.conf,
    kind: config.kind,
    label: config.label,
    ...(config.line !== undefined && { line: config.line }),
    strategy: config.strategy,
    params: config.params,
    peakReserved: s.peakReserved,
    peakAllocated: s.peakRounded,
    peakRequested: s.peakRequested,
    segments: segmentsOf(base),
    maps: mapsOf(base),
    deviceCalls: s.deviceCalls,
    fragmentationAtPeak: s.externalFragmentationAtPeak,
    failures: s.failures,
    firstFailureEvent: failedEvent,
    oomReproduced,
    smallestFittingBytes: smallest,
    growing: isGrowing(unlimited),
    replays,
    ...(config.notModelled.length > 0 && { notRanked: `not modelled: ${config.notModelled.join(', ')}` }),
    ...(config.comparison !== undefined && { notRanked: config.comparison }),
    ...(config.kind === 'strategy' && !config.ranked && { notRanked: strategyNote(config) }),
    ...(config.notInPytorch !== undefined && { notInPytorch: config.notInPytorch }),
  }
}

/**
 * Ranks the PyTorch configurations in place: no failures first, then the smallest fitting limit,
 * then fewer failures (where nothing fits the device, that is what tells rows apart), then peak
 * reserved. Smallest fitting limits within the search's own precision (1 %) of the
 * first of a run of them are a tie, ranked by peak reserved: a row that fits in 0.5 % less is not
 * better than one that reserves 40 % less. Strategy rows (but RMM's on an RMM log, which are its
 * grid) and settings the model leaves out follow, unranked.
 */
export function rank(rows: WhatifRow[]): void {
  const ranked = rows.filter((r) => r.notRanked === undefined)
  const key = (r: WhatifRow): [number, number, number, number] => [r.failures > 0 ? 1 : 0, r.smallestFittingBytes ?? Infinity, r.failures, r.peakReserved]
  ranked.sort((a, b) => {
    const ka = key(a)
    const kb = key(b)
    return ka[0] - kb[0] || ka[1] - kb[1] || ka[2] - kb[2] || ka[3] - kb[3]
  })
  // Runs of ties, each anchored at its first (smallest) fitting limit, re-sorted by peak reserved.
  for (let start = 0; start < ranked.length;) {
    const first = ranked[start]!
    const anchor = first.smallestFittingBytes
    let end = start + 1
    if (anchor !== null)
      while (end < ranked.length) {
        const r = ranked[end]!
        if (r.failures > 0 !== first.failures > 0 || r.smallestFittingBytes === null || r.smallestFittingBytes > anchor * (1 + SEARCH_TOLERANCE)) break
        end++
      }
    const tied = ranked
      .slice(start, end)
      .sort((a, b) => a.failures - b.failures || a.peakReserved - b.peakReserved || a.smallestFittingBytes! - b.smallestFittingBytes!)
    ranked.splice(start, tied.length, ...tied)
    start = end
  }
  ranked.forEach((r, i) => (r.rank = i + 1))
  rows.sort((a, b) => (a.rank || Infinity) - (b.rank || Infinity) || (a.smallestFittingBytes ?? Infinity) - (b.smallestFittingBytes ?? Infinity))
}

/** The recording ended at an out-of-memory: no request follows its last one (frees may, as the exception unwinds). */
export function endsAtOom(trace: RequestTrace): boolean {
  const e = trace.events
  for (let i = e.kind.length - 1; i >= 0; i--) {
    if (e.kind[i] === EventKind.oom) return true
    if (e.kind[i] === EventKind.alloc) return false
  }
  return false
}

/** Compares the recorded layout's segment events with a replay's (layout kept). */
async function fidelityOf(
  config: Config,
  trace: RequestTrace,
  stored: readonly StrategyResult[],
  limit: number | null,
  deviceBytes: number,
  signal?: AbortSignal,
): Promise<WhatifFidelity | undefined> {
  const recorded = stored.find(isRecorded)
  const layout = recorded?.layout
  if (!recorded || !layout || config.notModelled.length > 0) return undefined
  const { target, cap } = targetFor(config, limit, stored, deviceBytes, windowOpenState(trace, stored))
  const [r] = await replayTrace(trace, [target], { layout: true, buckets: 64, cap, ...(signal && { signal }) })
  const segmentOps = (op: ArrayLike<number>, size: ArrayLike<number>): string[] => {
    const out: string[] = []
    for (let k = 0; k < op.length; k++) {
      const o = op[k]
      if (o === LayoutOp.regionReserve || o === LayoutOp.map) out.push(`+${size[k]}`)
      else if (o === LayoutOp.regionRelease || o === LayoutOp.unmap) out.push(`-${size[k]}`)
    }
    return out
  }
  const a = segmentOps(layout.op, layout.size)
  const b = segmentOps(r!.layout.op, r!.layout.size)
  let first = -1
  for (let k = 0; k < Math.max(a.length, b.length); k++)
    if (a[k] !== b[k]) {
      first = k
      break
    }
  const recordedPeak = recorded.summary?.['peakReserved'] ?? 0
  return {
    conf: config.conf,
    recordedPeakReserved: recordedPeak,
    replayedPeakReserved: r!.summary.peakReserved,
    peakReservedError: recordedPeak > 0 ? (r!.summary.peakReserved - recordedPeak) / recordedPeak : 0,
    recordedSegments: a.filter((x) => x.startsWith('+')).length,
    replayedSegments: b.filter((x) => x.startsWith('+')).length,
    firstSegmentDifference: first,
    segmentEvents: a.length,
  }
}

/**
 * The static plan of the trace the rows replay, for the floor's figures: on a device no plan
 * outgrows (2^52 B), whatever the lab's device, without layout or fragmentation.
 */
async function plannedRun(trace: RequestTrace, signal?: AbortSignal): Promise<ReplayResult> {
  const [r] = await replayTrace(trace, [{ strategy: PLANNED, params: {}, label: 'floor: planned' }], {
    layout: false,
    buckets: 1,
    cap: 2 ** 52,
    fragmentation: false,
    ...(signal && { signal }),
  })
  return r!
}

/** Runs the lab on an opened input. */
export async function runWhatif(input: Pick<OpenedInput, 'trace' | 'strategies'>, options: WhatifOptions = {}): Promise<WhatifResult> {
  const started = performance.now()
  const recordedLayout = input.strategies.find(isRecorded)
  const implied = impliedLimit(input.trace, recordedLayout)
  const device = deviceOf(options.deviceBytes, implied, recordedLayout, input.trace)
  const deviceBytes = device.bytes
  const signal = options.signal
  const cores = Math.max(1, options.concurrency ?? availableParallelism())
  const recordedText = recordedConf(input.trace)
  const { trace, ooms } = withOomRequests(input.trace)

  const configs: Config[] = []
  const leftOut: LeftOutRow[] = []
  const seen = new Set<string>()
  const add = (c: Config): void => {
    const key = c.kind === 'strategy' ? `${c.strategy}|${JSON.stringify(c.params)}` : c.conf
    if (seen.has(key)) return
    seen.add(key)
    configs.push(c)
  }
  if (options.confs && options.confs.length > 0) {
    for (const text of options.confs) {
      if (text === 'recorded') {
        if (recordedText === undefined)
          throw new WhatifError('--conf recorded: this trace carries no allocator settings (only PyTorch snapshots do); give the configuration it ran with')
        add(pytorchConfig(recordedText, 'recorded', deviceBytes))
      } else add(pytorchConfig(text, 'pytorch', deviceBytes))
    }
  } else {
    if (recordedText !== undefined) add(pytorchConfig(recordedText, 'recorded', deviceBytes))
    // An RMM log's program allocates through RMM: RMM's allocators are its grid, PyTorch's
    // defaults a comparison; PyTorch's settings would tune an allocator it does not use.
    if (input.trace.meta.source === 'rmm-log') {
      for (const c of rmmRows()) add(c)
      add({ ...pytorchConfig('', 'pytorch', deviceBytes), comparison: RMM_LOG_PYTORCH })
    } else for (const text of GRID_CONFS) add(pytorchConfig(text, 'pytorch', deviceBytes))
    if (options.strategies !== false) {
      // Sized from the recorded requests: a recorded out-of-memory's request is not one a pool
      // must hold (each row fails it, or shows that it would have fitted).
      const strategies = strategyRows(input.trace)
      for (const c of strategies.configs) add(c)
      leftOut.push(...strategies.leftOut)
    }
  }

  let limit: WhatifResult['limit'] = { bytes: null, source: 'none' }
  // A limit is never 0 B: to the model that is no limit at all, to PyTorch no room for anything.
  if (options.capFraction !== undefined) {
    const bytes = Math.floor(options.capFraction * deviceBytes)
    if (!(options.capFraction > 0 && options.capFraction <= 1) || bytes < 1)
      throw new WhatifError(`--cap: ${options.capFraction} of the device's ${deviceBytes} bytes is 0 bytes, which leaves no room for anything`, '--cap')
    limit = { bytes, source: 'option' }
  } else if (options.capBytes !== undefined) {
    if (!Number.isSafeInteger(options.capBytes) || options.capBytes < 1)
      throw new WhatifError(`--cap: ${options.capBytes} bytes: a limit must be a whole number of bytes from 1 to 2^53 - 1`, '--cap')
    limit = { bytes: options.capBytes, source: 'option' }
  }
  // The limit the recording implies: the full device's, else the least the recording allows.
  else if (implied) limit = { bytes: impliedLimitBytes(implied), source: 'implied' }

  const runner = new Runner(trace, input.strategies, deviceBytes)
  const search = options.search !== false
  // An estimate for progress: a base run, an unlimited run under a limit, about eight searches.
  const perConfig = 1 + (limit.bytes !== null ? 1 : 0) + (search ? 8 : 0)
  let done = 0
  let total = configs.length * perConfig + (recordedText !== undefined ? 1 : 0)
  const tick = (label: string): void => {
    done++
    if (done > total) total = done + 1
    options.onProgress?.({ done, total, fraction: done / total, label })
  }

  const rows: WhatifRow[] = new Array(configs.length)
  let next = 0
  const worker = async (): Promise<void> => {
    while (next < configs.length) {
      if (signal?.aborted) throw cancelledError(signal.reason)
      const i = next++
      rows[i] = { ...(await evaluate(configs[i]!, runner, limit.bytes, deviceBytes, search, ooms, tick, signal)), rank: 0 }
    }
  }
  const fidelityConfig = configs.find((c) => c.kind === 'recorded')
  const [fidelity, planned] = await Promise.all([
    // The recorded settings under the recording's own limit (the one an out-of-memory implies), never the limit asked for.
    fidelityConfig
      ? fidelityOf(fidelityConfig, trace, input.strategies, implied ? impliedLimitBytes(implied) : null, deviceBytes, signal).finally(() => tick('fidelity'))
      : Promise.resolve(undefined),
    plannedRun(trace, signal),
    ...Array.from({ length: Math.min(cores, configs.length) }, worker),
  ])
  const floor = floorOf(trace)
  rank(rows)
  const elapsedMs = performance.now() - started
  const open = runner.open
  const recordedState =
    open.kind === 'state'
      ? {
          segments: open.open.segments,
          blocks: open.open.blocks,
          expandable: open.open.expandable,
          rows: rows.filter((r) => startFor(open, { strategy: r.strategy, params: r.params, label: r.label })?.seeded).map((r) => r.label),
        }
      : undefined
  return {
    events: input.trace.events.kind.length,
    ...(recordedText !== undefined && { recordedConf: recordedText }),
    limit,
    ...(implied && { implied }),
    deviceBytes,
    device,
    endsAtOom: endsAtOom(input.trace),
    rows,
    floor: {
      peakLiveBytes: floor.peakLiveBytes,
      peakLiveRoundedBytes: floor.peakLiveRoundedBytes,
      // 0 where the plan passes 2^52 B (its blocks past that failed).
      plannedBytes: planned.summary.failures === 0 ? planned.summary.peakReserved : 0,
      plannedMs: Math.round(planned.summary.wallNs / 1e6),
    },
    leftOut,
    ...(recordedState && { recordedState }),
    ...(fidelity && { fidelity }),
    elapsedMs,
    replays: runner.replays,
    eventsReplayed: runner.eventsReplayed,
    cores,
    eventsPerSecondPerCore: runner.eventsReplayed / (elapsedMs / 1000) / cores,
  }
}
