// Replay of a request trace through a list of strategies (issue 3, part 2): arguments checked here,
// with messages that name them, then the native engine (native/core/replay) runs off the JavaScript
// thread and hands back typed-array columns per strategy. toStrategyResult() turns one result into
// the trace file's StrategyResult (layout trace with times, metrics series, numeric summary).
import { availableParallelism, freemem } from 'node:os'

import type {
  ReplayEventColumns,
  ReplayInitialState,
  ReplayOptions as NativeReplayOptions,
  ReplayResult,
  ReplaySummary,
  ReplayTargetSpec,
  StrategyParams,
} from '../../../native/index.js'
import { loadNative } from '../../native.ts'
import { checkInitialState } from './initial-state.ts'
import { badArgument, checkCount, checkParams, describe, findStrategy, isPlainObject } from './allocators.ts'
import type { LayoutTrace } from '../../../src-shared/layout.ts'
import { EventKind, type RequestTrace } from '../trace/model.ts'
import type { MetricsSeries, StrategyResult } from '../../../src-shared/results.ts'
import { parseByteSize } from '../units.ts'

export type { ReplayBuckets, ReplayFullMetrics, ReplayLayoutColumns, ReplayResult, ReplaySummary } from '../../../native/index.js'

/** ReplayLayoutColumns.stream where a layout event has no stream (regions, maps). */
export const NO_STREAM = 0xffffffff

export interface ReplayTarget {
  strategy: string
  params?: StrategyParams
  /** Unique among the targets; default: the strategy with its parameters, "caching (pytorch)". */
  label?: string
  /** The simulated device this target runs on (ReplayOptions.cap replaces its capacity). */
  device?: {
    /** Bytes, or a size such as "80GiB" (default 80 GiB). */
    capacity?: number | string
    /** VMM granule, a power of two from 256 B to 1 GiB (default 2 MiB). */
    granularity?: number
    /** How long queued stream work takes before a stream-ordered free completes (default 10 µs). */
    completionDelayNs?: number
    /** Stream-ordered pool release threshold, bytes. */
    releaseThreshold?: number
  }
  /**
   * Where a recording's driver placed each region (cudaMalloc), in order: a PyTorch snapshot's
   * segment addresses. Region i of the replay goes there when that range is free. Policies that
   * break ties by address (PyTorch's best fit) then reuse the very blocks the recording did.
   */
  regionPlacement?: BigUint64Array | readonly bigint[]
  /**
   * The allocator's state when the trace's window opened (a recording that began late or whose
   * ring buffer overflowed): caching with preset pytorch starts from it instead of empty
   * (initial-state.ts; docs/architecture.md, "Replay from the recorded state").
   */
  initialState?: ReplayInitialState
}

export interface ReplayProgressInfo {
  /** Index into the targets, and its label. */
  target: number
  label: string
  targets: number
  eventsDone: number
  eventsTotal: number
  /** Of the whole replay, 0 to 1. */
  fraction: number
}

export interface ReplayOptions {
  /** Device memory cap for every target: bytes or a size such as "24GiB". Requests that do not fit fail, are counted, and the replay goes on. */
  cap?: number | string
  /** Reset strategies that support it (arena) at markers (step boundaries); default true. */
  resetAtMarkers?: boolean
  /** Metrics buckets (min, max and last of each); default 2048. */
  buckets?: number
  /** Also one metrics row per event. */
  fullMetrics?: boolean
  /** Collect the layout events; default true. */
  layout?: boolean
  /** With layout, keep split and merge events too; default true. false leaves them out (the app's maps draw none; its bundle is smaller and its replay quicker). */
  structureEvents?: boolean
  /** Blocks the fragmentation walks at bucket ends may visit per event (default 2; 0: no limit). */
  walkBudgetPerEvent?: number
  /** The same for walks at new reserved peaks (default 4; 0: no limit). */
  peakWalkBudgetPerEvent?: number
  /** Measure external fragmentation (default true); false skips every walk (fragmentation figures NaN or 0): faster, for searches. */
  fragmentation?: boolean
  /** End each target's replay at its first failed allocation (default false); summary.stoppedAtFailure says so. For a search over caps. */
  stopAtFailure?: boolean
  /**
   * With layout: also cut each target's layout to what its map shows after this request event, or
   * 'peak' each target's own reserved peak, in the target's thread (ReplayResult.preview;
   * src-shared/wire.ts, cutAt).
   */
  previewAt?: number | 'peak'
  /** Called every 65536 events of each target and at each target's end. */
  onProgress?: (progress: ReplayProgressInfo) => void
  /** Aborting stops the replay: the promise rejects with code CANCELLED and no results. */
  signal?: AbortSignal
}

const OPTION_NAMES = [
  'cap',
  'resetAtMarkers',
  'buckets',
  'fullMetrics',
  'layout',
  'structureEvents',
  'walkBudgetPerEvent',
  'peakWalkBudgetPerEvent',
  'fragmentation',
  'stopAtFailure',
  'previewAt',
  'onProgress',
  'signal',
] as const
const TARGET_NAMES = ['strategy', 'params', 'label', 'device', 'regionPlacement', 'initialState'] as const
const DEVICE_NAMES = ['capacity', 'granularity', 'completionDelayNs', 'releaseThreshold'] as const

/** Bytes from a number or a size such as "24GiB"; the error names the argument. */
export function parseBytesArgument(name: string, value: unknown): number {
  if (typeof value === 'string') {
    try {
      const bytes = parseByteSize(value)
      if (bytes === 0) throw new RangeError('a size of 0 bytes leaves no room for anything')
      return bytes
    } catch (error) {
      throw badArgument('range', `${name}: ${(error as Error).message}`)
    }
  }
  checkCount(name, value, false)
  if (value === 0) throw badArgument('range', `${name} must be more than 0 bytes`)
  return value as number
}

export function cancelledError(reason: unknown): Error {
  const error = new Error('replay cancelled', { cause: reason })
  Object.defineProperty(error, 'code', { value: 'CANCELLED', enumerable: true })
  return error
}

const COLUMN_TYPES = [
  ['kind', Uint8Array, 'Uint8Array'],
  ['id', Uint32Array, 'Uint32Array'],
  ['size', Float64Array, 'Float64Array'],
  ['stream', Uint32Array, 'Uint32Array'],
  ['time', Float64Array, 'Float64Array'],
] as const

/** The columns replay reads, checked value by value (the native side trusts them). */
function checkTrace(trace: unknown): RequestTrace {
  if (typeof trace !== 'object' || trace === null || !isPlainObject((trace as RequestTrace).events))
    throw badArgument('type', `trace must be a RequestTrace (with events), got ${describe(trace)}`)
  const events = (trace as RequestTrace).events as unknown as Record<string, unknown>
  for (const [name, type, typeName] of COLUMN_TYPES)
    if (!(events[name] instanceof type)) throw badArgument('type', `trace.events.${name} must be a ${typeName}, got ${describe(events[name])}`)
  const { kind, id, size, time } = (trace as RequestTrace).events
  const n = kind.length
  for (const [name] of COLUMN_TYPES) {
    const length = (events[name] as Uint8Array).length
    if (length !== n) throw badArgument('range', `trace.events.${name} has ${length} entries, trace.events.kind has ${n}: every column needs one per event`)
  }
  for (let i = 0; i < n; i++) {
    const k = kind[i]!
    if (k > EventKind.trim) throw badArgument('range', `trace.events.kind[${i}] must be 0 (alloc), 1 (free), 2 (marker), 3 (oom) or 4 (trim), got ${k}`)
    if (k === EventKind.alloc) {
      const bytes = size[i]!
      if (!Number.isSafeInteger(bytes) || bytes < 0) throw badArgument('range', `trace.events.size[${i}] must be a whole number of bytes, got ${bytes}`)
      if (id[i]! >= n) throw badArgument('range', `trace.events.id[${i}] is ${id[i]}: block ids must be dense from 0 (below the ${n} events)`)
    }
    const t = time[i]!
    if (!(t >= 0) || !Number.isFinite(t)) throw badArgument('range', `trace.events.time[${i}] must be a non-negative number of nanoseconds, got ${t}`)
  }
  const pool = (trace as RequestTrace).events.pool
  if (pool !== undefined) {
    if (!(pool instanceof Uint32Array)) throw badArgument('type', `trace.events.pool must be a Uint32Array, got ${describe(pool)}`)
    if (pool.length !== n)
      throw badArgument('range', `trace.events.pool has ${pool.length} entries, trace.events.kind has ${n}: every column needs one per event`)
  }
  return trace as RequestTrace
}

/** "caching (pytorch)", "buddy (pool_size=4GiB)", "slab". */
export function defaultLabel(strategy: string, params: StrategyParams): string {
  const entries = Object.entries(params)
  if (entries.length === 0) return strategy
  if (entries.length === 1 && entries[0]![0] === 'preset') return `${strategy} (${entries[0]![1]})`
  return `${strategy} (${entries.map(([k, v]) => `${k}=${v}`).join(', ')})`
}

/** Runs `check`, giving its error `prefix` in front of the argument name it starts with. */
function within<T>(prefix: string, check: () => T): T {
  try {
    return check()
  } catch (error) {
    const e = error as Error & { code?: string }
    if (e.code !== 'INVALID_ARGUMENT') throw error
    throw badArgument(e instanceof TypeError ? 'type' : 'range', `${prefix}${e.message}`)
  }
}

function checkTargets(targets: unknown): ReplayTargetSpec[] {
  if (!Array.isArray(targets)) throw badArgument('type', `targets must be an array, got ${describe(targets)}`)
  if (targets.length === 0) throw badArgument('range', 'targets must name at least one strategy')
  const labels = new Map<string, number>()
  return targets.map((target: unknown, i): ReplayTargetSpec => {
    const at = `targets[${i}]`
    if (!isPlainObject(target)) throw badArgument('type', `${at} must be an object such as { strategy: 'caching' }, got ${describe(target)}`)
    for (const key of Object.keys(target))
      if (!(TARGET_NAMES as readonly string[]).includes(key)) throw badArgument('range', `${at}.${key}: no such target field (${TARGET_NAMES.join(', ')})`)
    const info = within(`${at}.`, () => findStrategy(target['strategy']))
    const params = within(`${at}.`, () => checkParams(info, target['params']))
    const label = target['label'] ?? defaultLabel(info.name, params)
    if (typeof label !== 'string' || label.length === 0) throw badArgument('type', `${at}.label must be a non-empty string, got ${describe(label)}`)
    const previous = labels.get(label)
    if (previous !== undefined) throw badArgument('range', `${at}.label: '${label}' is also targets[${previous}]'s label; give each target its own`)
    labels.set(label, i)
    const spec: ReplayTargetSpec = { label, strategy: info.name, params }
    const simulated: NonNullable<ReplayTargetSpec['simulated']> = {}
    const device = target['device']
    if (device !== undefined) {
      if (!isPlainObject(device)) throw badArgument('type', `${at}.device must be an object, got ${describe(device)}`)
      for (const [key, value] of Object.entries(device)) {
        if (!(DEVICE_NAMES as readonly string[]).includes(key))
          throw badArgument('range', `${at}.device.${key}: no such device option (${DEVICE_NAMES.join(', ')})`)
        if (value === undefined) continue
        if (key === 'capacity') simulated.capacity = parseBytesArgument(`${at}.device.capacity`, value)
        else {
          checkCount(`${at}.device.${key}`, value, false)
          simulated[key as 'granularity' | 'completionDelayNs' | 'releaseThreshold'] = value as number
        }
      }
      const g = simulated.granularity
      if (g !== undefined && (g < 256 || g > 2 ** 30 || (g & (g - 1)) !== 0))
        throw badArgument('range', `${at}.device.granularity must be a power of two from 256 B to 1 GiB, got ${g}`)
    }
    const placement = target['regionPlacement']
    if (placement !== undefined) {
      if (placement instanceof BigUint64Array) simulated.regionPlacement = placement
      else if (Array.isArray(placement) && placement.every((a) => typeof a === 'bigint' && a >= 0n && a < 1n << 64n))
        simulated.regionPlacement = BigUint64Array.from(placement as bigint[])
      else throw badArgument('type', `${at}.regionPlacement must be a BigUint64Array or an array of bigint addresses, got ${describe(placement)}`)
    }
    if (Object.keys(simulated).length > 0) spec.simulated = simulated
    const initial = target['initialState']
    if (initial !== undefined) {
      if (info.name !== 'caching' || params['preset'] !== 'pytorch')
        throw badArgument('range', `${at}.initialState: only caching with preset pytorch starts from a recorded state, not ${defaultLabel(info.name, params)}`)
      spec.initialState = checkInitialState(`${at}.initialState`, initial)
    }
    return spec
  })
}

function checkOptions(options: unknown): ReplayOptions {
  if (options === undefined) return {}
  if (!isPlainObject(options)) throw badArgument('type', `options must be a plain object, got ${describe(options)}`)
  for (const key of Object.keys(options))
    if (!(OPTION_NAMES as readonly string[]).includes(key)) throw badArgument('range', `options.${key}: no such replay option (${OPTION_NAMES.join(', ')})`)
  const o = options as ReplayOptions
  for (const name of ['resetAtMarkers', 'fullMetrics', 'layout', 'structureEvents', 'fragmentation', 'stopAtFailure'] as const)
    if (o[name] !== undefined && typeof o[name] !== 'boolean') throw badArgument('type', `options.${name} must be a boolean, got ${describe(o[name])}`)
  for (const name of ['buckets', 'walkBudgetPerEvent', 'peakWalkBudgetPerEvent'] as const)
    if (o[name] !== undefined) checkCount(`options.${name}`, o[name], false)
  if (o.buckets !== undefined && (o.buckets < 1 || o.buckets > 2 ** 24)) throw badArgument('range', `options.buckets must be from 1 to 2^24, got ${o.buckets}`)
  if (o.previewAt !== undefined && o.previewAt !== 'peak') checkCount('options.previewAt', o.previewAt, false)
  if (o.onProgress !== undefined && typeof o.onProgress !== 'function')
    throw badArgument('type', `options.onProgress must be a function, got ${describe(o.onProgress)}`)
  if (o.signal !== undefined && !(o.signal instanceof AbortSignal))
    throw badArgument('type', `options.signal must be an AbortSignal, got ${describe(o.signal)}`)
  return o
}

/**
 * Targets to replay at once: one a hardware thread, as many as there are targets, and no more than
 * half the memory free now holds of their working sets (each keeps a slot per block id, 16 B, and
 * with layout its layout columns, 37 B an event and about 2.5 events a request at most, until its
 * result is taken). Side by side, a 10 M-event trace's five strategies would otherwise hold five
 * working sets at once where one after another held one.
 */
export function replayThreads(events: number, ids: number, targets: number, layout: boolean): number {
  return Math.max(1, Math.min(availableParallelism(), targets, targetsInMemory(events, ids, layout)))
}

/** How many targets' working sets (replayThreads) half the memory free now holds. */
function targetsInMemory(events: number, ids: number, layout: boolean): number {
  const perTarget = ids * 16 + (layout ? events * 2.5 * 37 : 0) + 64 * 1024 * 1024
  return Math.floor((freemem() * 0.5) / perTarget)
}

/**
 * Replays `trace` through every target (side by side, on up to replayThreads() threads of the
 * engine's one pool, off the JavaScript thread: docs/architecture.md#one-pool-of-replay-threads)
 * and returns one result per target, in the targets' order. Same input, same results
 * (summary.wallNs and eventsPerSecond aside).
 */
export async function replayTrace(trace: RequestTrace, targets: readonly ReplayTarget[], options?: ReplayOptions): Promise<ReplayResult[]> {
  const checkedTrace = checkTrace(trace)
  const specs = checkTargets(targets)
  const o = checkOptions(options)
  const signal = o.signal
  if (signal?.aborted) throw cancelledError(signal.reason)
  const native: NativeReplayOptions = {}
  if (o.cap !== undefined) native.capacity = parseBytesArgument('options.cap', o.cap)
  if (o.resetAtMarkers !== undefined) native.resetAtMarkers = o.resetAtMarkers
  if (o.buckets !== undefined) native.buckets = o.buckets
  if (o.fullMetrics !== undefined) native.fullMetrics = o.fullMetrics
  if (o.layout !== undefined) native.layout = o.layout
  if (o.structureEvents !== undefined) native.structureEvents = o.structureEvents
  // Ids are dense from 0, so there are no more of them than events: a bound, without a pass over
  // the events on every replay (the what-if lab replays one target hundreds of times).
  const events = checkedTrace.events.kind.length
  native.threads = replayThreads(events, events, specs.length, o.layout ?? true)
  // With more targets than threads, the engine starts every target's slice before it finishes any
  // (longestFirst: the longest then does not run alone at the end), so every working set is held
  // at once: only where memory holds them all.
  native.longestFirst = targetsInMemory(events, events, o.layout ?? true) >= specs.length
  if (o.walkBudgetPerEvent !== undefined) native.walkBudgetPerEvent = o.walkBudgetPerEvent
  if (o.peakWalkBudgetPerEvent !== undefined) native.peakWalkBudgetPerEvent = o.peakWalkBudgetPerEvent
  if (o.fragmentation !== undefined) native.fragmentation = o.fragmentation
  if (o.stopAtFailure !== undefined) native.stopAtFailure = o.stopAtFailure
  if (o.previewAt !== undefined) native.previewAt = o.previewAt
  // The abort raises a flag the replay's own threads read: it stops them within a few dozen events,
  // and a replay still waiting for a thread before it starts, whatever this thread is busy with.
  const addon = loadNative()
  const flag = signal ? addon.cancelFlag() : undefined
  if (flag) native.cancelFlag = flag
  const raise = () => addon.raiseCancelFlag(flag!)
  const { onProgress } = o
  // Targets replay side by side (the native replay's threads), their reports interleaved: the
  // fraction is of all their events together, each target's as far as it last reported.
  const doneOf = new Float64Array(specs.length)
  const report = onProgress
    ? (p: { target: number; targets: number; eventsDone: number; eventsTotal: number }) => {
        doneOf[p.target] = p.eventsTotal === 0 ? 1 : p.eventsDone / p.eventsTotal
        // Summed afresh (a handful of targets): a running sum of differences ends a hair below 1.
        let done = 0
        for (const f of doneOf) done += f
        onProgress({ ...p, label: specs[p.target]!.label, fraction: Math.min(1, done / p.targets) })
      }
    : undefined
  const { kind, id, size, stream, time, pool } = checkedTrace.events
  const columns: ReplayEventColumns = { kind, id, size, stream, time }
  // CUDA graphs' private pools, where the importer found them.
  if (pool !== undefined) columns.pool = pool
  signal?.addEventListener('abort', raise, { once: true })
  try {
    const results = await addon.replay(columns, specs, native, report)
    // A replay that finished before it noticed the abort is still cancelled for the caller.
    if (signal?.aborted) throw cancelledError(signal.reason)
    return results
  } finally {
    signal?.removeEventListener('abort', raise)
  }
}

/** Numbers only, for StrategyResult.summary (what compare.ts and the trace file keep). */
function numericSummary(s: ReplaySummary): Record<string, number> {
  const out: Record<string, number> = {}
  for (const [key, value] of Object.entries(s)) {
    if (typeof value === 'number') out[key] = value
    else if (typeof value === 'boolean') out[key] = value ? 1 : 0
  }
  out['firstFailureEvent'] = s.firstFailures.length > 0 ? s.firstFailures[0]! : -1
  for (const [key, value] of Object.entries(s.deviceCallDetail)) out[`deviceCalls.${key}`] = value
  return out
}

/** A stream table entry ("0", "140234...", "0x7f...") as a number; its index where it is not one. */
function streamValue(name: string | undefined, index: number): number {
  if (name === undefined) return index
  const value = Number(name)
  return Number.isFinite(value) ? value : index
}

/**
 * One replay result as the trace file stores it: the layout with each event's time and the
 * stream's handle (from the trace's stream table; none when the replay ran without layout), and the
 * metrics sampled at each bucket's end (or at every event when the replay kept fullMetrics).
 */
export function toStrategyResult(result: ReplayResult, trace: RequestTrace): StrategyResult {
  const l = result.layout
  const n = l.op.length
  const layout: LayoutTrace | undefined =
    n === 0 && trace.events.kind.length > 0
      ? undefined
      : {
          op: l.op,
          address: l.address,
          size: l.size,
          requested: l.requested,
          stream: new Float64Array(n),
          time: new Float64Array(n),
          aux: l.aux,
        }
  const streams = trace.tables.streams.map((name, i) => streamValue(name, i))
  for (let i = 0; layout && i < n; i++) {
    const s = l.stream[i]!
    layout.stream[i] = s === NO_STREAM ? 0 : (streams[s] ?? s)
    layout.time[i] = trace.events.time[l.event[i]!] ?? 0
  }
  let metrics: MetricsSeries
  if (result.full) {
    metrics = {
      time: trace.events.time.slice(),
      requested: result.full.requested,
      rounded: result.full.rounded,
      reserved: result.full.reserved,
      // Walks happen at bucket ends only: NaN in between.
      externalFragmentation: new Float64Array(result.full.requested.length).fill(Number.NaN),
      deviceCalls: result.full.deviceCalls,
    }
    const b = result.buckets
    for (let k = 0; k < b.end.length; k++) metrics.externalFragmentation[b.end[k]! - 1] = b.externalFragmentation[k]!
  } else {
    // Each bucket's maximum, so that no peak disappears into a bucket (the chart of a long trace
    // is an envelope of its highs; the last value of a bucket can miss a peak inside it).
    const b = result.buckets
    metrics = {
      time: b.time,
      requested: b.requestedMax,
      rounded: b.roundedMax,
      reserved: b.reservedMax,
      externalFragmentation: b.externalFragmentation,
      deviceCalls: b.deviceCalls,
    }
  }
  const strategyResult: StrategyResult = {
    name: result.label,
    strategy: result.strategy,
    params: { ...result.params },
    metrics,
    summary: numericSummary(result.summary),
  }
  // A replay run without layout (options.layout false) has none to store.
  if (layout) strategyResult.layout = layout
  return strategyResult
}
