// The figures strategies are compared on (docs/architecture.md#metrics), in one list used by the CLI's
// replay table, the CSV export and diff: the summary key, how to print it, and which way is better.
// Winners are picked among modelled strategies only; a recorded allocator ("pytorch (recorded)")
// is the reference they are measured against, not a contestant. A modelled strategy that failed a
// request or dropped live blocks (arena's step resets) did not do the job the trace asks for, so it
// is not ranked at all: 0 B reserved by a strategy that served nothing is no win.
import type { StrategyResult } from './results.ts'
import type { SummaryKey } from './summary.ts'

export type MetricUnit = 'bytes' | 'ratio' | 'count' | 'rate'

export interface MetricDefinition {
  /** Key in StrategyResult.summary. */
  key: SummaryKey
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
  { key: 'droppedByReset', label: 'live blocks dropped at resets', unit: 'count', better: 'lower' },
  { key: 'deviceCalls', label: 'device calls', unit: 'count', better: 'lower' },
  { key: 'eventsPerSecond', label: 'events/s', unit: 'rate', better: 'higher' },
]

/** Strategy id of results that were recorded from a real allocator rather than modelled. */
export function isRecorded(result: Pick<StrategyResult, 'name' | 'strategy'>): boolean {
  return result.strategy === 'pytorch' || result.strategy === 'recorded' || result.name.endsWith('(recorded)')
}

/** Singular or plural by count: plural(1, 'failure') → "1 failure", plural(874, 'failure') → "874 failures". */
export function plural(n: number, singular: string, pluralForm = `${singular}s`): string {
  return `${n.toLocaleString('en-US')} ${n === 1 ? singular : pluralForm}`
}

/** The static plan (docs/strategies.md#planned): a bound the allocators are measured against, never a contestant. */
export const PLANNED_STRATEGY = 'planned'

/**
 * Why a modelled result is not ranked, or undefined when it may be: it failed requests, or dropped
 * blocks the program still held at a reset (docs/architecture.md#metrics), or it is the static plan,
 * a bound rather than an allocator. Recorded results are never ranked; they are the reference (no
 * reason given).
 */
export function unrankedReason(result: Pick<StrategyResult, 'summary'> & Partial<Pick<StrategyResult, 'strategy'>>): string | undefined {
  const failures = result.summary?.['failures'] ?? 0
  const dropped = result.summary?.['droppedByReset'] ?? 0
  const reasons: string[] = []
  if (result.strategy === PLANNED_STRATEGY) reasons.push('a bound, not an allocator')
  if (failures > 0) reasons.push(plural(failures, 'failure'))
  if (dropped > 0) reasons.push(`dropped ${plural(dropped, 'live block')} at resets`)
  return reasons.length > 0 ? reasons.join(', ') : undefined
}

/** Whether a result may be marked best: modelled, every request served, every live block kept. */
export function isRanked(result: Pick<StrategyResult, 'name' | 'strategy' | 'summary'>): boolean {
  return !isRecorded(result) && unrankedReason(result) === undefined
}

/**
 * The best of `values` by `better`, among the results that may be ranked (`ranked[i]`): indices of
 * the best (ties share it). Empty when fewer than two modelled results have a value, when no
 * ranked one has, or when every ranked one ties (then nothing stands out).
 */
export function bestOf(
  values: readonly (number | undefined)[],
  better: MetricDefinition['better'],
  ranked: readonly boolean[],
  modelled: readonly boolean[],
): number[] {
  if (better === 'none') return []
  const has = (i: number) => values[i] !== undefined && Number.isFinite(values[i]!)
  if (values.filter((_, i) => has(i) && modelled[i]).length < 2) return []
  const contestants = values.flatMap((v, i) => (has(i) && ranked[i] ? [{ v: v!, i }] : []))
  if (contestants.length === 0) return []
  const best = better === 'lower' ? Math.min(...contestants.map((c) => c.v)) : Math.max(...contestants.map((c) => c.v))
  const winners = contestants.filter((c) => c.v === best).map((c) => c.i)
  return winners.length === contestants.length && contestants.length > 1 ? [] : winners
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
  return bestOf(
    values,
    metric.better,
    results.map((r) => isRanked(r)),
    results.map((r) => !isRecorded(r)),
  )
}
