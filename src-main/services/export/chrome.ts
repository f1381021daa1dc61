// Replay results as Chrome Trace Event JSON (the format chrome://tracing and Perfetto open): one
// process per strategy, named after it, holding counter tracks of its metrics over time
// (requested, rounded, reserved bytes, external fragmentation in percent, device calls); the
// trace's markers and the failures the program saw when it was recorded are instant events of a
// first process named "trace". Timestamps are microseconds since the trace's start, as the format
// wants. Written as a sequence of strings so a large export never has to be one string in memory.
import { EventKind, type RequestTrace } from '../trace/model.ts'
import type { MetricsSeries, StrategyResult } from '../../../src-shared/results.ts'

export interface ChromeExportInput {
  trace: RequestTrace
  strategies: readonly StrategyResult[]
}

/** Counter tracks each strategy gets: the series column, the track name and the value's name. */
const COUNTERS: readonly { column: keyof Omit<MetricsSeries, 'time'>; track: string; arg: string; scale: number }[] = [
  { column: 'requested', track: 'requested', arg: 'bytes', scale: 1 },
  { column: 'rounded', track: 'rounded', arg: 'bytes', scale: 1 },
  { column: 'reserved', track: 'reserved', arg: 'bytes', scale: 1 },
  { column: 'externalFragmentation', track: 'external fragmentation', arg: 'percent', scale: 100 },
  { column: 'deviceCalls', track: 'device calls', arg: 'calls', scale: 1 },
]

const TRACE_PID = 1
/** Events per string yielded: big enough to be cheap, small enough to keep memory flat. */
const EVENTS_PER_PIECE = 4096

/**
 * Microsecond timestamps of a series. A source without times (every sample at the same instant)
 * would stack all samples on one point, so such a series is spread one microsecond per sample.
 */
function timestamps(time: Float64Array): { ts: Float64Array; byIndex: boolean } {
  const n = time.length
  const flat = n > 1 && time[0] === time[n - 1]
  return { ts: Float64Array.from(time, (t, i) => (flat ? i : t / 1000)), byIndex: flat }
}

function metadataEvent(pid: number, name: string, args: Record<string, unknown>): string {
  return JSON.stringify({ ph: 'M', pid, tid: 0, name, args })
}

export function* chromeTraceChunks(input: ChromeExportInput): Generator<string> {
  const { trace, strategies } = input
  const spreadByIndex: string[] = []
  let pending: string[] = []
  let first = true
  const emit = function* (event: string): Generator<string> {
    pending.push(event)
    if (pending.length >= EVENTS_PER_PIECE) {
      yield (first ? '' : ',\n') + pending.join(',\n')
      first = false
      pending = []
    }
  }
  yield '{"traceEvents":[\n'

  yield* emit(metadataEvent(TRACE_PID, 'process_name', { name: 'trace' }))
  yield* emit(metadataEvent(TRACE_PID, 'process_sort_index', { sort_index: 0 }))
  const e = trace.events
  for (let i = 0; i < e.kind.length; i++) {
    const kind = e.kind[i]
    if (kind === EventKind.marker) {
      const name = trace.tables.markers[e.id[i]!] ?? `marker ${e.id[i]}`
      yield* emit(JSON.stringify({ ph: 'i', s: 'g', pid: TRACE_PID, tid: 0, ts: e.time[i]! / 1000, name, cat: 'marker' }))
    } else if (kind === EventKind.oom) {
      yield* emit(
        JSON.stringify({
          ph: 'i',
          s: 'p',
          pid: TRACE_PID,
          tid: 0,
          ts: e.time[i]! / 1000,
          name: 'out of memory (recorded)',
          cat: 'failure',
          args: { bytes: e.size[i]! },
        }),
      )
    }
  }

  for (const [index, result] of strategies.entries()) {
    const pid = TRACE_PID + 1 + index
    yield* emit(metadataEvent(pid, 'process_name', { name: result.name }))
    yield* emit(metadataEvent(pid, 'process_sort_index', { sort_index: index + 1 }))
    yield* emit(metadataEvent(pid, 'process_labels', { labels: `${result.strategy} ${JSON.stringify(result.params)}` }))
    const metrics = result.metrics
    if (!metrics) continue
    const { ts, byIndex } = timestamps(metrics.time)
    if (byIndex) spreadByIndex.push(result.name)
    for (const counter of COUNTERS) {
      const values = metrics[counter.column]
      for (let i = 0; i < values.length; i++) {
        const v = values[i]!
        if (Number.isNaN(v)) continue // not measured at this sample (replay's walk budget)
        yield* emit(`{"ph":"C","pid":${pid},"tid":0,"ts":${ts[i]},"name":${JSON.stringify(counter.track)},"args":{"${counter.arg}":${v * counter.scale}}}`)
      }
    }
  }

  const other: Record<string, unknown> = {
    generator: 'vramscope',
    source: trace.meta.source,
    ...(trace.meta.origin !== undefined && { origin: trace.meta.origin }),
    ...(trace.meta.gpu !== undefined && { gpu: trace.meta.gpu }),
    strategies: strategies.map((s) => ({ name: s.name, strategy: s.strategy, params: s.params, summary: s.summary ?? null })),
  }
  if (spreadByIndex.length > 0) other['timeIsSampleIndex'] = spreadByIndex
  const rest = pending.length === 0 ? '' : (first ? '' : ',\n') + pending.join(',\n')
  yield `${rest}\n],\n"displayTimeUnit":"ms",\n"otherData":${JSON.stringify(other)}}\n`
}

export function chromeTrace(input: ChromeExportInput): string {
  return [...chromeTraceChunks(input)].join('')
}
