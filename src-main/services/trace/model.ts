// The request trace in memory: what a program asked of the allocator, independent of any
// allocator (docs/architecture.md#request-trace). Columns of typed arrays, one row per event, so a million
// events cost tens of megabytes and cross to workers and the native replay without copying
// objects. Importers (PyTorch snapshots, RMM logs, recordings) produce it; the trace file
// (Arrow IPC, docs/trace-format.md) stores it; replay consumes it.
import type { StrategyResult } from '../../../src-shared/results.ts'

export const EventKind = {
  alloc: 0, // id, size, stream, device, time, stack, tag
  free: 1, // id, stream (the stream the free is issued on), time
  marker: 2, // id = index into markers (step boundary, arena reset point), time
  oom: 3, // a failure the program saw when recorded: size, stream, time
  trim: 4, // the program released cached memory (torch.cuda.empty_cache): stream, time; size = bytes released when recorded
} as const
export type EventKind = (typeof EventKind)[keyof typeof EventKind]

export interface TraceEvents {
  kind: Uint8Array
  /** Block id (alloc/free) or marker index (marker). Ids are dense from 0. */
  id: Uint32Array
  /** Bytes requested (alloc, oom). Exact below 2^53. */
  size: Float64Array
  /** Index into TraceTables.streams. */
  stream: Uint32Array
  device: Uint16Array
  /** Nanoseconds since the trace's start. */
  time: Float64Array
  /** Index into TraceTables.stacks, or -1. */
  stack: Int32Array
  /** Index into TraceTables.tags, or -1. */
  tag: Int32Array
  /**
   * Memory pool of an alloc (and of its free): 0 the default pools, k >= 1 the private pool
   * TraceTables.pools[k - 1] (a CUDA graph's). Absent: every event is in the default pools.
   */
  pool?: Uint32Array
}

export interface Frame {
  name: string
  filename: string
  line: number
}

export interface TraceTables {
  /** Stream handles as the source named them (a cudaStream_t value, "0" for the default). */
  streams: string[]
  /** Deduplicated frames; stacks refer to them by index, innermost first. */
  frames: Frame[]
  stacks: Uint32Array[]
  tags: string[]
  markers: string[]
  /** Names of the private memory pools events.pool refers to (PyTorch's segment_pool_id, "(1, 0)"); absent: none. */
  pools?: string[]
}

export interface TraceMeta {
  /** "pytorch-snapshot", "rmm-log", "recording", "synthetic", ... */
  source: string
  /** File the trace came from, as the user named it (no machine paths added). */
  origin?: string
  gpu?: string
  driver?: string
  /** Anything a user should know about how complete the trace is (ring buffer overflowed...). */
  warnings: string[]
  /** Free-form provenance: tool versions, parameters. Values are strings. */
  properties: Record<string, string>
}

/**
 * A figure the real allocator reported while the program ran, as a step curve over the request
 * events: from event index[k] on (up to the next point) it was bytes[k]. Only the points where it
 * changes are kept, so its cost grows with events, never with bytes.
 */
export interface RecordedSeries {
  index: Uint32Array
  bytes: Float64Array
}

export interface RequestTrace {
  meta: TraceMeta
  events: TraceEvents
  tables: TraceTables
  /**
   * The allocator's own reserved bytes over the events, where the source recorded them (a
   * torch.profiler trace's Total Reserved): the reference the replays' reserved curves are read
   * against. The trace file keeps it (its recorded_reserved section, 1.2 on).
   */
  recordedReserved?: RecordedSeries
}

/** The largest value of a recorded series; undefined without one. */
export function seriesPeak(series: RecordedSeries | undefined): number | undefined {
  if (!series || series.bytes.length === 0) return undefined
  let peak = series.bytes[0]!
  for (const b of series.bytes) if (b > peak) peak = b
  return peak
}

export function eventCount(trace: RequestTrace): number {
  return trace.events.kind.length
}

/** Allocates empty columns for `n` events (importers fill them, then trim with sliceEvents). */
export function allocateEvents(n: number): TraceEvents {
  return {
    kind: new Uint8Array(n),
    id: new Uint32Array(n),
    size: new Float64Array(n),
    stream: new Uint32Array(n),
    device: new Uint16Array(n),
    time: new Float64Array(n),
    stack: new Int32Array(n).fill(-1),
    tag: new Int32Array(n).fill(-1),
  }
}

/** Copies event row `i` of `from` into row `j` of `to`, every column (the pool where `to` has one). */
export function copyEventRow(from: TraceEvents, i: number, to: TraceEvents, j: number): void {
  to.kind[j] = from.kind[i]!
  to.id[j] = from.id[i]!
  to.size[j] = from.size[i]!
  to.stream[j] = from.stream[i]!
  to.device[j] = from.device[i]!
  to.time[j] = from.time[i]!
  to.stack[j] = from.stack[i]!
  to.tag[j] = from.tag[i]!
  if (to.pool) to.pool[j] = from.pool?.[i] ?? 0
}

export function sliceEvents(e: TraceEvents, n: number): TraceEvents {
  return {
    kind: e.kind.slice(0, n),
    id: e.id.slice(0, n),
    size: e.size.slice(0, n),
    stream: e.stream.slice(0, n),
    device: e.device.slice(0, n),
    time: e.time.slice(0, n),
    stack: e.stack.slice(0, n),
    tag: e.tag.slice(0, n),
    ...(e.pool === undefined ? {} : { pool: e.pool.slice(0, n) }),
  }
}

/**
 * The first thing in a request trace that breaks the references the format promises (docs/
 * trace-format.md): a stack naming a frame that is not there, an event naming a stream, stack, tag
 * or marker that is not there, an unknown kind, a time that is not finite. Undefined when it holds
 * together. The trace writer refuses what this names and the reader reports it, so whatever the
 * writer accepts, the reader reads back.
 */
export function traceProblem(events: TraceEvents, tables: TraceTables): { row?: number; problem: string } | undefined {
  const { streams, frames, stacks, tags, markers } = tables
  const pools = tables.pools?.length ?? 0
  if (events.pool !== undefined) {
    if (events.pool.length !== events.kind.length) return { problem: `the pool column has ${events.pool.length} values for ${events.kind.length} events` }
    for (let i = 0; i < events.pool.length; i++)
      if (events.pool[i]! > pools) return { row: i, problem: `pool ${events.pool[i]} is not in the pools table (${pools} private pools)` }
  }
  for (let i = 0; i < stacks.length; i++)
    for (const f of stacks[i]!) if (f >= frames.length) return { problem: `stack ${i} refers to frame ${f}, but there are ${frames.length} frames` }
  for (let i = 0; i < events.kind.length; i++) {
    const problem = eventProblem(events, i, streams.length, stacks.length, tags.length, markers.length)
    if (problem) return { row: i, problem }
  }
  return undefined
}

/** What a recorded series (RequestTrace.recordedReserved) breaks of the format's promises: lengths, order, bounds. */
export function seriesProblem(trace: RequestTrace): { row?: number; problem: string } | undefined {
  const s = trace.recordedReserved
  if (s === undefined) return undefined
  if (s.index.length !== s.bytes.length) return { problem: `the recorded reserved series has ${s.index.length} events for ${s.bytes.length} values` }
  const events = trace.events.kind.length
  for (let k = 0; k < s.index.length; k++) {
    if (s.index[k]! > events) return { problem: `point ${k} of the recorded reserved series is at event ${s.index[k]}, past the ${events} events` }
    if (k > 0 && s.index[k]! <= s.index[k - 1]!)
      return { problem: `point ${k} of the recorded reserved series (event ${s.index[k]}) is not after the one before it` }
  }
  return undefined
}

/** A recorded layout's row whose event (LayoutTrace.event) is not one of the trace's. */
export function layoutEventProblem(strategies: readonly StrategyResult[], events: number): { row?: number; problem: string } | undefined {
  for (const s of strategies) {
    const event = s.layout?.event
    if (event === undefined) continue
    if (event.length !== s.layout!.op.length)
      return { problem: `the layout of strategy "${s.name}" has ${event.length} events for ${s.layout!.op.length} rows` }
    for (let k = 0; k < event.length; k++)
      if (event[k]! >= events) return { problem: `layout row ${k} of strategy "${s.name}" belongs to event ${event[k]}, past the ${events} events` }
  }
  return undefined
}

function eventProblem(e: TraceEvents, i: number, streams: number, stacks: number, tags: number, markers: number): string | undefined {
  const kind = e.kind[i]!
  if (kind > EventKind.trim) return `kind ${kind} is not alloc (0), free (1), marker (2), oom (3) or trim (4)`
  if (e.stream[i]! >= streams && (kind === EventKind.alloc || kind === EventKind.free || kind === EventKind.oom || kind === EventKind.trim))
    return `stream ${e.stream[i]} is not in the streams table (${streams} streams)`
  const stack = e.stack[i]!
  if (stack < -1 || stack >= stacks) return `stack ${stack} is not in the stacks table (${stacks} stacks)`
  const tag = e.tag[i]!
  if (tag < -1 || tag >= tags) return `tag ${tag} is not in the tags table (${tags} tags)`
  if (kind === EventKind.marker && e.id[i]! >= markers) return `marker ${e.id[i]} is not in the markers table (${markers} markers)`
  const t = e.time[i]!
  if (!Number.isFinite(t)) return `time ${t} is not a finite number`
  return undefined
}
