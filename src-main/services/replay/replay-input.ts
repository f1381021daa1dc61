// Replays an opened input (trace file, snapshot, log) through strategies given as specs, the way
// the CLI and the app both want it: PyTorch-policy targets get the recorded segment placement
// when the input has one, so they reproduce PyTorch's own choices, and the results come back as
// the trace file stores them, ready to print, export or save. Recorded layouts and replays meet
// on the request events here too (recordedOnEvents), for the app's replay bundle.
import { isRecorded } from '../../../src-shared/compare.ts'
import {
  confModel,
  confOfSnapshotSettings,
  parsePytorchConf,
  settingsOfProperties,
  type ConfModel,
  type PytorchConf,
} from '../../../src-shared/pytorch-conf.ts'
import type { Bundle } from '../../../src-shared/contract.ts'
import { LayoutOp, type LayoutTrace } from '../../../src-shared/layout.ts'
import type { StrategyResult } from '../../../src-shared/results.ts'
import { LAYOUT_PIECE, packReplay, type MetricsSent, type StrategyToSend } from '../../../src-shared/wire.ts'
import { recordedRegionPlacement, regionAddresses, type OpenedInput } from '../import/open-input.ts'
import { allocateEvents, copyEventRow, EventKind, type RequestTrace } from '../trace/model.ts'
import { NO_STREAM, replayTrace, toStrategyResult, type ReplayProgressInfo, type ReplayResult, type ReplayTarget } from './replay.ts'
import { findStrategy } from './allocators.ts'
import { sizedForTrace } from './sized-defaults.ts'
import { formatBytes } from '../units.ts'
import { windowOpenState, type WindowOpen } from './initial-state.ts'
import { RECORDED_LAYOUT_NAME, STAND_IN_ROWS } from '../import/pytorch/types.ts'
import type { StrategySpec } from './strategy-spec.ts'
import { DEFAULT_DEVICE_BYTES, deviceOfInput } from './device.ts'
import type { Device } from '../../../src-shared/device.ts'

export interface ReplayInputOptions {
  /** Device memory cap in bytes for every strategy: it replaces the device's memory. */
  cap?: number
  /** The device's memory in bytes (--gpu); default: what the file implies, else an assumed H100 80GB (device.ts, deviceOf). */
  deviceBytes?: number
  /** Keep the layout events (to store them); off is faster when only figures are wanted. */
  layout?: boolean
  /** Give PyTorch-policy targets the recorded segment addresses (default true). */
  recordedPlacement?: boolean
  /** Reset strategies that support it (arena) at the trace's markers (default true). */
  resetAtMarkers?: boolean
  /** PyTorch-policy targets given no settings replay under the snapshot's recorded ones (default true). */
  recordedSettings?: boolean
  /**
   * PyTorch-policy targets start from the allocator's state when a late or overflowed recording's
   * window opened (default true); false, or another strategy: from empty, with the blocks then live
   * allocated at t = 0.
   */
  recordedState?: boolean
  onProgress?: (progress: ReplayProgressInfo) => void
  signal?: AbortSignal
}

export interface ReplayedInput {
  results: StrategyResult[]
  /** Labels of PyTorch-policy targets that replayed under the snapshot's recorded settings, and those settings. */
  recordedSettings: { label: string; conf: string; notModelled: string[] }[]
  /** Labels of the targets that ran with the recorded placement, and how many regions it held. */
  placed: { label: string; regions: number }[]
  /** Labels of pool strategies named without sizes, and the pool sizes chosen from the trace (sized-defaults.ts). */
  sized: { label: string; params: string }[]
  /** Labels of pool strategies named without sizes that no size holds the trace in, and why: they replay with their own defaults. */
  unsized: { label: string; reason: string }[]
  /**
   * Where the trace began with memory in use (a late or overflowed recording): which targets
   * started from the recorded state at the window's opening, and which from empty and why.
   */
  start: ReplayStart[]
  /** Recorded out-of-memory requests replayed as requests (under a cap; withOomRequests), as the what-if lab replays them. */
  oomRequests: number
  /** The replays as the native replay returned them (layouts placed on request events). */
  replays: ReplayResult[]
  /** The device every target ran on without a cap (deviceOf), and where its memory came from. */
  device: Device
}

/** How one target started a trace that began with memory in use (ReplayedInput.start). */
export interface ReplayStart {
  label: string
  /** true: from the recorded segments, blocks and free space at the window's opening. */
  seeded: boolean
  segments: number
  /** The segments are mapped ranges of expandable segments. */
  expandable: boolean
  blocks: number
  /** Blocks pending at the opening (freed, waiting for their streams), seeded as free space. */
  pendingAsFree: number
  /** Why a target started from empty instead (every strategy but PyTorch's policy does). */
  reason?: string
}

/**
 * How a target starts a trace whose window opened on memory in use: PyTorch's policy from the
 * recorded state when the state's segments are of the kind the target's settings make (a state
 * recorded without expandable segments cannot stand in an expandable-segments replay, nor the
 * other way round: PyTorch's allocator never turns one kind into the other); every other strategy
 * from empty, with the blocks then live allocated at t = 0. Undefined where the window opened empty.
 */
export function startFor(
  open: WindowOpen,
  spec: Pick<StrategySpec, 'strategy' | 'params' | 'label'>,
  recordedState = true,
  capBytes?: number,
  deviceBytes = DEFAULT_DEVICE_BYTES,
): ReplayStart | undefined {
  if (open.kind === 'empty') return undefined
  const known = open.kind === 'state' ? open.open : undefined
  const base = {
    label: spec.label,
    seeded: false,
    segments: known?.segments ?? 0,
    expandable: known?.expandable ?? false,
    blocks: known?.blocks ?? 0,
    pendingAsFree: known?.pendingAsFree ?? 0,
  }
  if (!usesPytorchPolicy(spec)) return { ...base, reason: 'only the PyTorch policy replays from the recorded segments' }
  if (!recordedState) return { ...base, reason: 'the recorded state was not asked for' }
  if (open.kind === 'unusable') return { ...base, reason: open.reason }
  // A device smaller than what was in use then could never have held that state; nor could an
  // expandable segment span more than the address space PyTorch reserves for one (1 1/8 of the
  // device's memory; the replay's device is the one deviceOf gives unless capped).
  const device = capBytes ?? deviceBytes
  if (open.open.bytes > device)
    return { ...base, reason: `the ${formatBytes(open.open.bytes)} in use when recording began exceed the device's ${formatBytes(device)}` }
  if (open.open.expandable && open.open.span > device + device / 8)
    return {
      ...base,
      reason: `an expandable segment's mapped ranges spanned ${formatBytes(open.open.span)}, more than one reserves on a ${formatBytes(device)} device`,
    }
  const expandable = String(spec.params['expandable_segments'] ?? 'false') === 'true'
  if (expandable !== open.open.expandable)
    return {
      ...base,
      reason: `the recorded segments are ${open.open.expandable ? '' : 'not '}expandable and this setting's are ${expandable ? '' : 'not'}`.trimEnd(),
    }
  return { ...base, seeded: true }
}

/** The allocator settings a snapshot recorded, from the trace's properties (pytorch.allocator.*). */
export function recordedSettings(trace: RequestTrace): Record<string, unknown> | undefined {
  return settingsOfProperties(trace.meta.properties)
}

/**
 * The PYTORCH_ALLOC_CONF a snapshot was recorded with ('' for the defaults), or undefined when the
 * trace does not say; recorded items PyTorch would refuse are left out (opening the file warned of them).
 */
export function recordedConf(trace: RequestTrace): string | undefined {
  return confOfSnapshotSettings(recordedSettings(trace))
}

/** Parameters that say nothing about PyTorch's configuration. */
const NEUTRAL_PARAMS = new Set(['preset', 'thread_safe'])

/**
 * A PyTorch-policy spec given no settings of its own, on a snapshot recorded under non-default
 * settings, replays under those settings (what the recording ran with); `conf` says which. Any
 * setting given explicitly (max_split_size=...), or a configuration in PyTorch's syntax (--conf,
 * pytorch:[...], even one that only restates a default), keeps the spec as written. Settings this build's
 * model lacks are left out and listed in `notModelled`.
 */
export function withRecordedSettings(
  spec: StrategySpec,
  trace: RequestTrace,
  deviceBytes = DEFAULT_DEVICE_BYTES,
): { spec: StrategySpec; conf?: string; notModelled?: string[] } {
  if (!usesPytorchPolicy(spec) || spec.conf !== undefined || Object.keys(spec.params).some((k) => !NEUTRAL_PARAMS.has(k))) return { spec }
  const conf = recordedConf(trace)
  if (!conf) return { spec }
  // garbage_collection_threshold is a fraction of the limit, which a snapshot does not record:
  // here of the device the replay runs on (deviceOf), unless the spec gives max_reserved.
  const model = buildModel(parsePytorchConf(conf), 0, deviceBytes)
  const notModelled = model.notModelled
  return {
    spec: { ...spec, params: { ...spec.params, ...model.params }, label: `${spec.label} [${conf}]` },
    conf,
    ...(notModelled.length > 0 && { notModelled }),
  }
}

/** confModel on this build's model: a parameter its strategy lacks is left out and named in notModelled, not guessed. */
export function buildModel(conf: PytorchConf, limitBytes: number, deviceBytes: number): ConfModel {
  const model = confModel(conf, limitBytes, deviceBytes)
  const known = new Set(findStrategy(model.strategy).params.map((p) => p.name))
  for (const key of Object.keys(model.params))
    if (!known.has(key)) {
      model.notModelled.push(key)
      delete model.params[key]
    }
  return model
}

/** The caching strategy with PyTorch's policy: the one the recorded placement is meant for. */
export function usesPytorchPolicy(spec: Pick<StrategySpec, 'strategy' | 'params'>): boolean {
  return spec.strategy === 'caching' && spec.params['preset'] === 'pytorch'
}

function sameParams(a: Record<string, unknown>, b: Record<string, unknown>): boolean {
  const keys = new Set([...Object.keys(a), ...Object.keys(b)])
  for (const k of keys) if (String(a[k] ?? '') !== String(b[k] ?? '')) return false
  return true
}

/**
 * The recorded region addresses a target should replay at, so that a modelled strategy stands
 * beside its own recording with the same choices: PyTorch's segments for the PyTorch policy (a
 * snapshot's `pytorch (recorded)`), and a vramscope recording's regions for the same strategy with
 * the same parameters (`caching (recorded)` made with caching:preset=pytorch). Empty when none.
 */
export function placementFor(stored: readonly StrategyResult[], spec: Pick<StrategySpec, 'strategy' | 'params'>): bigint[] {
  if (usesPytorchPolicy(spec)) {
    const pytorch = recordedRegionPlacement(stored)
    if (pytorch.length > 0) return pytorch
  }
  const own = stored.find((s) => isRecorded(s) && s.strategy === spec.strategy && sameParams(s.params, spec.params))
  return regionAddresses(own)
}

/**
 * sizedForTrace, except for a spec that stands for a recording the input holds (the same strategy
 * and parameters as its recorded layout): that replays as it was recorded, to be compared with it.
 */
export function sizedUnlessRecorded(spec: StrategySpec, input: Pick<OpenedInput, 'trace' | 'strategies'>): ReturnType<typeof sizedForTrace> {
  const recorded = input.strategies.some((s) => isRecorded(s) && s.strategy === spec.strategy && sameParams(s.params, spec.params))
  return recorded ? { spec } : sizedForTrace(spec, input.trace)
}

export async function replayInput(input: OpenedInput, specs: readonly StrategySpec[], options: ReplayInputOptions = {}): Promise<ReplayedInput> {
  const placed: ReplayedInput['placed'] = []
  const recordedSettings: ReplayedInput['recordedSettings'] = []
  const sized: ReplayedInput['sized'] = []
  const unsized: ReplayedInput['unsized'] = []
  const start: ReplayStart[] = []
  const open = windowOpenState(input.trace, input.strategies)
  // One rule for the device (device.ts): with no cap every target runs on its memory, never on a
  // size guessed silently; a cap replaces it.
  const device = deviceOfInput(input, options.deviceBytes)
  const deviceBytes = options.cap ?? device.bytes
  const targets = specs.map((written): ReplayTarget => {
    const pooled = sizedUnlessRecorded(written, input)
    if (pooled.sized !== undefined) sized.push({ label: written.label, params: pooled.sized })
    if (pooled.unsized !== undefined) unsized.push({ label: written.label, reason: pooled.unsized })
    const given = pooled.spec
    const settled = options.recordedSettings === false ? { spec: given } : withRecordedSettings(given, input.trace, deviceBytes)
    const spec = settled.spec
    if (settled.conf !== undefined) recordedSettings.push({ label: spec.label, conf: settled.conf, notModelled: settled.notModelled ?? [] })
    const target: ReplayTarget = { label: spec.label, strategy: spec.strategy, params: spec.params, device: { capacity: device.bytes } }
    const placement = options.recordedPlacement === false ? [] : placementFor(input.strategies, spec)
    if (placement.length > 0) {
      target.regionPlacement = placement
      placed.push({ label: spec.label, regions: placement.length })
    }
    const began = startFor(open, spec, options.recordedState ?? true, options.cap, device.bytes)
    if (began !== undefined) {
      start.push(began)
      if (began.seeded && open.kind === 'state') target.initialState = open.open.state
    }
    return target
  })
  const replayOptions = {
    ...(options.cap !== undefined && { cap: options.cap }),
    layout: options.layout ?? false,
    ...(options.resetAtMarkers !== undefined && { resetAtMarkers: options.resetAtMarkers }),
    ...(options.onProgress && { onProgress: options.onProgress }),
    ...(options.signal && { signal: options.signal }),
  }
  const serving = servesOomRequests(input.trace, targets, options.cap, device)
  const replayed = serving > 0 ? await replayServingOoms(input.trace, targets, replayOptions) : await replayTrace(input.trace, targets, replayOptions)
  return {
    results: replayed.map((r) => toStrategyResult(r, input.trace)),
    placed,
    recordedSettings,
    sized,
    unsized,
    start,
    oomRequests: serving,
    replays: replayed,
    device,
  }
}

/**
 * How many recorded out-of-memories a replay serves as requests: all of them under a limit (a
 * cap, or a target's max_reserved, as a what-if row's replay carries it) or on a device whose
 * memory is known (given, the free memory plus reserved at the recorded out-of-memory, or the GPU
 * the stats beside a snapshot name: deviceOf), where the question is whether the program's requests fit, the one that failed when
 * it was recorded included, as in the what-if lab; none on an assumed device, where each stays
 * the recorded failure it was.
 */
export function servesOomRequests(
  trace: RequestTrace,
  targets: readonly Pick<ReplayTarget, 'params'>[],
  cap: number | string | undefined,
  device?: Device,
): number {
  const known = device !== undefined && (device.source === 'oom' || device.source === 'option' || device.source === 'file')
  if (cap === undefined && !known && !targets.some((t) => t.params?.['max_reserved'] !== undefined && t.params['max_reserved'] !== '0')) return 0
  let count = 0
  const kind = trace.events.kind
  for (let i = 0; i < kind.length; i++) if (kind[i] === EventKind.oom) count++
  return count
}

/** Index k of the served trace (withOomRequests: `allocs` the served requests' allocs, ascending) on the trace's own events: a request's alloc and free both stand at its out-of-memory. */
function onOwnEvents(k: number, allocs: readonly number[]): number {
  // Served frees at or before k: each is one event the trace does not have.
  let lo = 0
  let hi = allocs.length
  while (lo < hi) {
    const mid = (lo + hi) >> 1
    if (allocs[mid]! + 1 <= k) lo = mid + 1
    else hi = mid
  }
  return k - lo
}

/**
 * replayTrace with each recorded out-of-memory served as its request (withOomRequests), and the
 * results' event indices (layout events, bucket ends, first failures, the preview's cut) put back
 * on the trace's own events, so that a page draws them on the trace it has and the CLI's series
 * are the trace's: the request stands at its out-of-memory event.
 */
export async function replayServingOoms(
  trace: RequestTrace,
  targets: readonly ReplayTarget[],
  options: Parameters<typeof replayTrace>[2] = {},
): Promise<ReplayResult[]> {
  const served = withOomRequests(trace)
  const allocs = served.ooms
  if (allocs.length === 0) return replayTrace(trace, targets, options)
  const own = (k: number): number => onOwnEvents(k, allocs)
  // A cut asked at a trace event is made on the served trace at that event's place (an
  // out-of-memory's: its request, allocated).
  let previewAt = options.previewAt
  if (typeof previewAt === 'number') {
    let before = 0
    while (before < allocs.length && allocs[before]! - before < previewAt) before++
    previewAt += before
  }
  const results = await replayTrace(served.trace, targets, { ...options, ...(previewAt !== undefined && { previewAt }) })
  const n = trace.events.kind.length
  for (const r of results) {
    const event = r.layout.event
    for (let j = 0; j < event.length; j++) event[j] = own(event[j]!)
    // A bucket's end is exclusive: the events before it on the served trace, on the trace's own.
    const end = r.buckets.end
    for (let j = 0; j < end.length; j++) end[j] = Math.min(n, own(Math.max(0, end[j]! - 1)) + 1)
    const failures = r.summary.firstFailures
    for (let j = 0; j < failures.length; j++) failures[j] = own(failures[j]!)
    r.summary.recordedFailures = allocs.length
    if (r.preview) r.preview.event = own(r.preview.event)
    if (r.full) {
      // One value per trace event: an out-of-memory's is its served request's, allocated.
      const full = r.full
      const at = new Uint32Array(n)
      for (let i = 0, m = 0; i < n; i++) {
        while (m < allocs.length && allocs[m]! - m < i) m++
        at[i] = i + m
      }
      for (const key of ['requested', 'rounded', 'reserved', 'deviceCalls'] as const) {
        const series = full[key]
        const out = new Float64Array(n)
        for (let i = 0; i < n; i++) out[i] = series[at[i]!]!
        full[key] = out
      }
    }
  }
  return results
}

/** The trace with each out-of-memory replaced by its request: an alloc of a new id, freed at once. */
export function withOomRequests(trace: RequestTrace): { trace: RequestTrace; ooms: number[] } {
  const e = trace.events
  const n = e.kind.length
  let count = 0
  for (let i = 0; i < n; i++) if (e.kind[i] === EventKind.oom) count++
  if (count === 0) return { trace, ooms: [] }
  let nextId = 0
  for (let i = 0; i < n; i++) if (e.kind[i] === EventKind.alloc && e.id[i]! >= nextId) nextId = e.id[i]! + 1
  const out = allocateEvents(n + count)
  if (e.pool) out.pool = new Uint32Array(n + count)
  const ooms: number[] = []
  let j = 0
  for (let i = 0; i < n; i++) {
    if (e.kind[i] !== EventKind.oom) {
      copyEventRow(e, i, out, j++)
      continue
    }
    // The oom becomes its request: an alloc of a new id, freed at once.
    copyEventRow(e, i, out, j)
    out.kind[j] = EventKind.alloc
    out.id[j] = nextId
    ooms.push(j++)
    copyEventRow(e, i, out, j)
    out.kind[j] = EventKind.free
    out.id[j++] = nextId++
  }
  return { trace: { ...trace, events: out }, ooms }
}

/** Index of the last request event at or before `time` (events ascending in time); 0 if none. */
function eventAt(times: Float64Array, time: number): number {
  let lo = 0
  let hi = times.length - 1
  if (hi < 0 || time < times[0]!) return 0
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1
    if (times[mid]! <= time) lo = mid
    else hi = mid - 1
  }
  return lo
}

/**
 * Index of the last request event at or before each of `times`: a forward walk while they ascend
 * (a layout's events do), a binary search where one steps back.
 */
function eventsAt(eventTimes: Float64Array, times: ArrayLike<number>, ops?: ArrayLike<number>): Uint32Array {
  const out = new Uint32Array(times.length)
  const last = eventTimes.length - 1
  let e = 0
  let previous = -Infinity
  for (let k = 0; k < times.length; k++) {
    const time = times[k]!
    if (time < previous) e = eventAt(eventTimes, time)
    else while (e < last && eventTimes[e + 1]! <= time) e++
    let at = last < 0 || time < eventTimes[0]! ? 0 : e
    // Memory obtained between two requests was obtained for the next one (PyTorch logs a segment
    // just before the allocation that needed it, a microsecond or so earlier): a replay counts it
    // at that allocation too, so the recorded and replayed maps agree event by event.
    const op = ops?.[k]
    if ((op === LayoutOp.regionReserve || op === LayoutOp.vaReserve || op === LayoutOp.map) && at < last && eventTimes[at]! < time) at++
    out[k] = at
    previous = time
  }
  return out
}

/** A layout's own event column (LayoutTrace.event) where it has one that fits the trace's events; a copy (the caller writes into it). */
function recordedEventsOf(l: LayoutTrace, events: number): Uint32Array | undefined {
  const e = l.event
  if (e === undefined || e.length !== l.op.length) return undefined
  for (let k = 0; k < e.length; k++) if (e[k]! >= events && events > 0) return undefined
  return e.slice()
}

/** The leading rows of a recorded layout that are its trace's window-open state (one device's layout); 0 if none. */
function standInRowsOf(trace: RequestTrace, stored: StrategyResult): number {
  const rows = trace.meta.properties[STAND_IN_ROWS]
  if (rows === undefined || rows.includes(',') || stored.name !== RECORDED_LAYOUT_NAME) return 0
  const n = Number(rows)
  return Number.isSafeInteger(n) && n > 0 ? n : 0
}

/**
 * A recorded layout (a snapshot's `pytorch (recorded)`, a recording's) placed on the request
 * events it stands beside, by time, with PyTorch's timing rule above, and its metrics as buckets
 * that end at those events: what a replay yields on its own, so the two are drawn alike.
 */
export function recordedOnEvents(trace: RequestTrace, stored: StrategyResult): StrategyToSend {
  const times = trace.events.time
  const streamIndex = new Map<number, number>()
  trace.tables.streams.forEach((name, i) => {
    const v = Number(name)
    streamIndex.set(Number.isFinite(v) ? v : i, i)
  })
  const l = stored.layout!
  const n = l.op.length
  const stream = new Uint32Array(n)
  for (let k = 0; k < n; k++) stream[k] = streamIndex.get(l.stream[k]!) ?? NO_STREAM
  // Where its importer said which request event each row belongs to, that; else by time.
  const event = recordedEventsOf(l, times.length) ?? eventsAt(times, l.time, l.op)
  // The window-open state (initial-state.ts) was there before the first event, as a replay from it
  // draws it: at event 0, not after the stand-in allocs that share its time.
  event.fill(0, 0, Math.min(standInRowsOf(trace, stored), n))
  const layout = { op: l.op, address: l.address, size: l.size, requested: l.requested, stream, event }
  const m = stored.metrics
  let metrics: MetricsSent | undefined
  if (m) {
    const end = new Uint32Array(m.time.length)
    for (let k = 0; k < end.length; k++) end[k] = eventAt(times, m.time[k]!) + 1
    // One sample a bucket: its maximum and minimum are the sample.
    metrics = {
      end,
      requestedMax: m.requested,
      roundedMax: m.rounded,
      reservedMax: m.reserved,
      requestedMin: m.requested,
      roundedMin: m.rounded,
      reservedMin: m.reserved,
      fragmentation: m.externalFragmentation,
      deviceCalls: m.deviceCalls,
    }
  }
  return {
    name: stored.name,
    strategy: stored.strategy,
    params: stored.params,
    recorded: true,
    summary: stored.summary ?? {},
    ...(metrics && { metrics }),
    layout,
  }
}

/** A replay's result as the renderer reads it: its buckets, its layout, its numeric summary. */
export function replayedOnEvents(result: ReplayResult): StrategyToSend {
  const b = result.buckets
  const summary: Record<string, number> = {}
  for (const [k, v] of Object.entries(result.summary)) if (typeof v === 'number') summary[k] = v
  summary['firstFailureEvent'] = result.summary.firstFailures.length > 0 ? result.summary.firstFailures[0]! : -1
  return {
    name: result.label,
    strategy: result.strategy,
    params: result.params,
    recorded: false,
    summary,
    metrics: {
      end: b.end,
      requestedMax: b.requestedMax,
      roundedMax: b.roundedMax,
      reservedMax: b.reservedMax,
      requestedMin: b.requestedMin,
      roundedMin: b.roundedMin,
      reservedMin: b.reservedMin,
      fragmentation: b.externalFragmentation,
      deviceCalls: b.deviceCalls,
    },
    layout: result.layout,
    ...(result.preview && { cut: result.preview }),
  }
}

/**
 * Stored results with a layout (recorded ones) then replay results, as one `replay:result` bundle
 * (src-shared/wire.ts, packReplay); `piece`: layout events a piece.
 */
export function replayBundle(trace: RequestTrace, stored: readonly StrategyResult[], results: readonly ReplayResult[], piece = LAYOUT_PIECE): Bundle {
  return packReplay(replaySent(trace, stored, results), piece)
}

/** Stored results with a layout (recorded ones) then replay results, as the renderer reads them. */
export function replaySent(trace: RequestTrace, stored: readonly StrategyResult[], results: readonly ReplayResult[]): StrategyToSend[] {
  return [...stored.map((s) => recordedOnEvents(trace, s)), ...results.map(replayedOnEvents)]
}
