// What replaying a request trace through one strategy (or recording a real allocator) yields, as a
// trace file stores it beside the request trace: the layout events, the metrics time series and a
// summary. Metric definitions: docs/architecture.md#metrics (defined once there; each place that
// computes them follows it).
import type { LayoutTrace } from './layout.ts'
import type { StrategySummary } from './summary.ts'

/** One row per sample, all columns the same length, time ascending. */
export interface MetricsSeries {
  /** Nanoseconds since the trace's start. */
  time: Float64Array
  /** Bytes the program asked for and holds. */
  requested: Float64Array
  /** Bytes of the blocks handed out (requested rounded up by the strategy). */
  rounded: Float64Array
  /** Bytes obtained from the device. */
  reserved: Float64Array
  /** 1 - largest free block / total free inside reserved; 0 when nothing is free. */
  externalFragmentation: Float64Array
  /** cudaMalloc / cuMemMap... calls so far. */
  deviceCalls: Float64Array
}

export interface StrategyResult {
  /** Unique within a file: "caching (pytorch)", "pytorch (recorded)". */
  name: string
  /** Strategy id (docs/strategies.md), or what recorded it. */
  strategy: string
  /** The parameters it ran with, as JSON values. */
  params: Record<string, unknown>
  layout?: LayoutTrace
  metrics?: MetricsSeries
  /** Peaks, fragmentation at peak, failures, device calls... by name. */
  summary?: StrategySummary
}
