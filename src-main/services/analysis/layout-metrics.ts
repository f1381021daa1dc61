// Metrics of a layout trace that came with no metrics: a real allocator's recorded layout (PyTorch's
// own segments and blocks from a snapshot, "pytorch (recorded)"). It is bookkeeping over the
// layout events, no allocator involved, so the recorded allocator gets the same figures as the
// replayed ones and stands beside them in tables, exports and diffs.
//
// The metrics are those of docs/architecture.md#metrics, as the native replay computes them (a
// pending block counts in neither requested nor rounded bytes). Internal waste and external
// fragmentation are not derived: a snapshot's trace gives each block PyTorch's 512-byte rounding
// of the request, not the block PyTorch actually carved (it keeps remainders it does not split),
// so the waste and the free runs between blocks would be guesses that look like measurements. The rounded series is kept (it is what the layout says) but no
// summary figure is made of it.
import type { LayoutTrace } from '../../../src-shared/layout.ts'
import type { StrategySummary } from '../../../src-shared/summary.ts'
import { sweepLayout } from '../../../src-shared/layout-accounting.ts'
import type { MetricsSeries, StrategyResult } from '../../../src-shared/results.ts'

export interface LayoutMetrics {
  metrics: MetricsSeries
  summary: StrategySummary
}

/** At most this many samples in the series; peaks within each stretch are kept. */
const DEFAULT_MAX_SAMPLES = 8192

export function layoutMetrics(layout: LayoutTrace, maxSamples = DEFAULT_MAX_SAMPLES): LayoutMetrics {
  const n = layout.op.length
  const requested = new Float64Array(n)
  const rounded = new Float64Array(n)
  const reserved = new Float64Array(n)
  const deviceCalls = new Float64Array(n)
  // The one accounting of a layout (its rules: src-shared/layout-accounting.ts); peaks by layout
  // event, as a recorded layout comes with no request events of its own.
  const swept = sweepLayout(layout, {
    each: (k, account) => {
      requested[k] = account.requested
      rounded[k] = account.rounded
      reserved[k] = account.reserved
      deviceCalls[k] = account.deviceCalls
    },
  })
  const keep = sampleIndices(reserved, maxSamples)
  const pick = (column: Float64Array) => Float64Array.from(keep, (i) => column[i]!)
  return {
    metrics: {
      time: pick(layout.time),
      requested: pick(requested),
      rounded: pick(rounded),
      reserved: pick(reserved),
      externalFragmentation: new Float64Array(keep.length).fill(NaN),
      deviceCalls: pick(deviceCalls),
    },
    summary: {
      layoutEvents: n,
      peakRequested: swept.peakRequested,
      peakReserved: swept.peakReserved,
      peakReservedLayoutEvent: swept.peakReservedLayoutEvent,
      failures: swept.failures,
      // Named as replay names its device call counts (summary 'deviceCalls.regionAlloc'...), so a
      // recorded allocator's segments compare with a modelled one's.
      deviceCalls: swept.deviceCalls,
      ...Object.fromEntries(Object.entries(swept.calls).map(([k, v]) => [`deviceCalls.${k}`, v])),
      finalReserved: swept.finalReserved,
    },
  }
}

/** Every index when there are few; else each stretch's highest `values` sample and its last. */
function sampleIndices(values: Float64Array, maxSamples: number): Uint32Array {
  const n = values.length
  if (n <= maxSamples) return Uint32Array.from({ length: n }, (_, i) => i)
  const stretches = Math.max(1, Math.floor(maxSamples / 2))
  const kept: number[] = []
  for (let s = 0; s < stretches; s++) {
    const from = Math.floor((s * n) / stretches)
    const to = Math.floor(((s + 1) * n) / stretches)
    if (to <= from) continue
    let highest = from
    for (let i = from + 1; i < to; i++) if (values[i]! > values[highest]!) highest = i
    kept.push(highest)
    if (highest !== to - 1) kept.push(to - 1)
  }
  return Uint32Array.from(kept)
}

/**
 * The result with metrics and summary filled in from its layout where it has none of its own. A
 * summary that holds other figures (a recording's verified bytes, steps) keeps them and gains the
 * derived ones it lacks (peaks, device calls), so a recording compares like a replay.
 */
export function withLayoutMetrics(result: StrategyResult): StrategyResult {
  if (!result.layout) return result
  if (result.metrics && result.summary && 'peakReserved' in result.summary) return result
  const derived = layoutMetrics(result.layout)
  return { ...result, metrics: result.metrics ?? derived.metrics, summary: { ...derived.summary, ...result.summary } }
}
