// Two traces, or two sets of results, side by side with their differences: what the programs asked
// for (events, blocks, peak requested...) and, for strategies both sides hold (matched by name),
// the compared metrics. "b - a" everywhere; relative differences are against a.
import { COMPARED_METRICS, isRecorded, unrankedReason, type MetricUnit } from '../../../src-shared/compare.ts'
import type { TraceDescription } from '../analysis/inspect.ts'
import type { StrategyResult } from '../../../src-shared/results.ts'

export interface DiffSide {
  /** The file, as the user named it. */
  file: string
  description: TraceDescription
  strategies: readonly StrategyResult[]
}

export interface DiffRow {
  key: string
  label: string
  unit: MetricUnit | 'ns'
  a: number | undefined
  b: number | undefined
  /** b - a, when both are there. */
  delta: number | undefined
  /** (b - a) / a; undefined when a is 0 or either is missing. */
  relative: number | undefined
}

export interface StrategyDiff {
  name: string
  /** Set when only one side holds the strategy. */
  onlyIn?: 'a' | 'b'
  rows: DiffRow[]
  /** Why the strategy is not ranked on a side (it failed requests or dropped live blocks): "874 failures". */
  unranked?: { a?: string; b?: string }
}

export interface TraceDiff {
  a: string
  b: string
  trace: DiffRow[]
  strategies: StrategyDiff[]
}

const TRACE_FIGURES: readonly { key: keyof TraceDescription; label: string; unit: DiffRow['unit'] }[] = [
  { key: 'events', label: 'events', unit: 'count' },
  { key: 'allocs', label: 'allocations', unit: 'count' },
  { key: 'frees', label: 'frees', unit: 'count' },
  { key: 'blocks', label: 'blocks', unit: 'count' },
  { key: 'markers', label: 'markers', unit: 'count' },
  { key: 'recordedFailures', label: 'recorded failures', unit: 'count' },
  { key: 'streams', label: 'streams', unit: 'count' },
  { key: 'durationNs', label: 'duration', unit: 'ns' },
  { key: 'bytesRequested', label: 'bytes requested', unit: 'bytes' },
  { key: 'peakRequested', label: 'peak requested', unit: 'bytes' },
  { key: 'liveBytesAtEnd', label: 'live at end', unit: 'bytes' },
]

function row(key: string, label: string, unit: DiffRow['unit'], a: number | undefined, b: number | undefined): DiffRow {
  const both = a !== undefined && b !== undefined
  return {
    key,
    label,
    unit,
    a,
    b,
    delta: both ? b - a : undefined,
    relative: both && a !== 0 ? (b - a) / a : undefined,
  }
}

function figure(summary: Record<string, number> | undefined, key: string): number | undefined {
  const v = summary?.[key]
  return typeof v === 'number' && !Number.isNaN(v) ? v : undefined
}

export function diffTraces(a: DiffSide, b: DiffSide): TraceDiff {
  const trace = TRACE_FIGURES.map((f) => row(f.key, f.label, f.unit, a.description[f.key] as number, b.description[f.key] as number))
  const names = [...new Set([...a.strategies.map((s) => s.name), ...b.strategies.map((s) => s.name)])]
  const strategies = names.map((name): StrategyDiff => {
    const left = a.strategies.find((s) => s.name === name)
    const right = b.strategies.find((s) => s.name === name)
    const rows = COMPARED_METRICS.map((m) => row(m.key, m.label, m.unit, figure(left?.summary, m.key), figure(right?.summary, m.key)))
    const why = (r: StrategyResult | undefined) => (r && !isRecorded(r) ? unrankedReason(r) : undefined)
    const unranked = { ...(why(left) && { a: why(left) }), ...(why(right) && { b: why(right) }) }
    return { name, ...(left ? (right ? {} : { onlyIn: 'a' as const }) : { onlyIn: 'b' as const }), rows, ...(Object.keys(unranked).length > 0 && { unranked }) }
  })
  return { a: a.file, b: b.file, trace, strategies }
}
