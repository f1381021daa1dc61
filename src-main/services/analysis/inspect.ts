// What a request trace holds, in figures a person can check at a glance (the CLI's `info`, the
// app's file panel): event counts, blocks, streams, frames, duration, the peak of requested bytes
// (which needs no allocator: it is the program's own demand) and the strategy results stored
// beside it. One pass over the event columns.
import { EventKind, type RequestTrace } from '../trace/model.ts'
import type { StrategyResult } from '../../../src-shared/results.ts'
import type { StrategySummary } from '../../../src-shared/summary.ts'

export interface TraceDescription {
  source: string
  origin?: string
  gpu?: string
  driver?: string
  events: number
  allocs: number
  frees: number
  markers: number
  /** Failures the program saw when it was recorded. */
  recordedFailures: number
  /** Distinct blocks allocated. */
  blocks: number
  streams: number
  devices: number[]
  frames: number
  stacks: number
  tags: number
  /** Nanoseconds from the first event to the last. */
  durationNs: number
  bytesRequested: number
  /** Highest sum of requested bytes live at once, and the event after which it was reached. */
  peakRequested: number
  peakRequestedEvent: number
  liveAtEnd: number
  liveBytesAtEnd: number
  /** Frees of an id that is not live (never allocated, or freed already). */
  unknownFrees: number
  warnings: string[]
  properties: Record<string, string>
  strategies: StoredStrategy[]
}

export interface StoredStrategy {
  name: string
  strategy: string
  params: Record<string, unknown>
  layoutEvents: number
  metricsSamples: number
  summary?: StrategySummary
}

export function describeTrace(trace: RequestTrace, strategies: readonly StrategyResult[] = []): TraceDescription {
  const e = trace.events
  const n = e.kind.length
  let maxId = -1
  for (let i = 0; i < n; i++) if (e.kind[i] === EventKind.alloc && e.id[i]! > maxId) maxId = e.id[i]!
  // Ids are dense from 0, so a typed array indexed by id is the live table; NaN marks "not live".
  const liveSize = new Float64Array(maxId + 1).fill(NaN)
  const seen = new Uint8Array(maxId + 1)
  const devices = new Set<number>()
  let allocs = 0
  let frees = 0
  let markers = 0
  let recordedFailures = 0
  let blocks = 0
  let bytesRequested = 0
  let live = 0
  let liveCount = 0
  let peak = 0
  let peakEvent = -1
  let unknownFrees = 0
  for (let i = 0; i < n; i++) {
    const kind = e.kind[i]
    const id = e.id[i]!
    if (kind === EventKind.alloc) {
      allocs++
      devices.add(e.device[i]!)
      const size = e.size[i]!
      bytesRequested += size
      if (!seen[id]) {
        seen[id] = 1
        blocks++
      }
      if (!Number.isNaN(liveSize[id]!)) {
        // The same id allocated again while live: the older block stays counted until freed once.
        live -= liveSize[id]!
        liveCount--
      }
      liveSize[id] = size
      live += size
      liveCount++
      if (live > peak) {
        peak = live
        peakEvent = i
      }
    } else if (kind === EventKind.free) {
      frees++
      const size = id < liveSize.length ? liveSize[id]! : NaN
      if (Number.isNaN(size)) unknownFrees++
      else {
        live -= size
        liveCount--
        liveSize[id] = NaN
      }
    } else if (kind === EventKind.marker) markers++
    else if (kind === EventKind.oom) recordedFailures++
  }
  const meta = trace.meta
  return {
    source: meta.source,
    ...(meta.origin !== undefined && { origin: meta.origin }),
    ...(meta.gpu !== undefined && { gpu: meta.gpu }),
    ...(meta.driver !== undefined && { driver: meta.driver }),
    events: n,
    allocs,
    frees,
    markers,
    recordedFailures,
    blocks,
    streams: trace.tables.streams.length,
    devices: [...devices].sort((a, b) => a - b),
    frames: trace.tables.frames.length,
    stacks: trace.tables.stacks.length,
    tags: trace.tables.tags.length,
    durationNs: n > 0 ? e.time[n - 1]! - e.time[0]! : 0,
    bytesRequested,
    peakRequested: peak,
    peakRequestedEvent: peakEvent,
    liveAtEnd: liveCount,
    liveBytesAtEnd: live,
    unknownFrees,
    warnings: [...meta.warnings],
    properties: { ...meta.properties },
    strategies: strategies.map((s) => ({
      name: s.name,
      strategy: s.strategy,
      params: s.params,
      layoutEvents: s.layout?.op.length ?? 0,
      metricsSamples: s.metrics?.time.length ?? 0,
      ...(s.summary && { summary: s.summary }),
    })),
  }
}

/**
 * The first free of a block id that is not live at that point (never allocated, or freed already),
 * or undefined. A trace file must not hold one: a free names its alloc's id (docs/trace-format.md).
 */
export function findUnknownFree(trace: RequestTrace): { event: number; id: number; freedBefore: boolean } | undefined {
  const e = trace.events
  const n = e.kind.length
  // 0 never seen, 1 live, 2 freed: ids are dense from 0, but a bad file may hold any id, so grow.
  let state = new Uint8Array(1024)
  for (let i = 0; i < n; i++) {
    const kind = e.kind[i]
    if (kind !== EventKind.alloc && kind !== EventKind.free) continue
    const id = e.id[i]!
    if (id >= state.length) {
      const grown = new Uint8Array(Math.max(id + 1, state.length * 2))
      grown.set(state)
      state = grown
    }
    if (kind === EventKind.alloc) state[id] = 1
    else if (state[id] === 1) state[id] = 2
    else return { event: i, id, freedBefore: state[id] === 2 }
  }
  return undefined
}
