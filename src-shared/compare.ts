// The figures strategies are compared on (docs/architecture.md#metrics), in one list used by the CLI's
// replay table, the CSV export and diff: the summary key, how to print it, and which way is better.
// Winners are picked among modelled strategies only; a recorded allocator ("pytorch (recorded)")
// is the reference they are measured against, not a contestant.
import type { StrategyResult } from './results.ts'

export type MetricUnit = 'bytes' | 'ratio' | 'count' | 'rate'

export interface MetricDefinition {
  /** Key in StrategyResult.summary. */
  key: string
  label: string
  unit: MetricUnit
  /** Which value wins; 'none' for figures that describe the input rather than the strategy. */
  better: 'lower' | 'higher' | 'none'
}

export const COMPARED_METRICS: readonly MetricDefinition[] = [
  { key: 'peakRequested', label: 'peak requested', unit: 'bytes', better: 'none' },
  { key: 'peakReserved', label: 'peak reserved', unit: 'bytes', better: 'lower' },
  { key: 'internalWasteAtPeak', label: 'internal waste at peak', unit: 'bytes', better: 'lower' },
  { key: 'externalFragmentationAtPeak', label: 'external fragmentation at peak', unit: 'ratio', better: 'lower' },
  { key: 'failures', label: 'failures', unit: 'count', better: 'lower' },
  { key: 'deviceCalls', label: 'device calls', unit: 'count', better: 'lower' },
  { key: 'eventsPerSecond', label: 'events/s', unit: 'rate', better: 'higher' },
]

/** Strategy id of results that were recorded from a real allocator rather than modelled. */
export function isRecorded(result: Pick<StrategyResult, 'name' | 'strategy'>): boolean {
  return result.strategy === 'pytorch' || result.strategy === 'recorded' || result.name.endsWith('(recorded)')
}

export interface ComparedRow {
  metric: MetricDefinition
  /** One per result, in the results' order; undefined where a result lacks the figure. */
  values: (number | undefined)[]
  /** Indices of the results holding the best value (ties share it); empty when all are equal. */
  winners: number[]
}

/** The compared metrics of each result, side by side, with the winners of each marked. */
export function compareResults(results: readonly StrategyResult[]): ComparedRow[] {
  return COMPARED_METRICS.map((metric) => {
    const values = results.map((r) => {
      const v = r.summary?.[metric.key]
      return typeof v === 'number' && !Number.isNaN(v) ? v : undefined
    })
    return { metric, values, winners: winnersOf(metric, values, results) }
  })
}

function winnersOf(metric: MetricDefinition, values: (number | undefined)[], results: readonly StrategyResult[]): number[] {
  if (metric.better === 'none') return []
  const contestants = values.flatMap((v, i) => (v === undefined || isRecorded(results[i]!) ? [] : [{ v, i }]))
  if (contestants.length < 2) return []
  const best = metric.better === 'lower' ? Math.min(...contestants.map((c) => c.v)) : Math.max(...contestants.map((c) => c.v))
  const winners = contestants.filter((c) => c.v === best).map((c) => c.i)
  return winners.length === contestants.length ? [] : winners
}
