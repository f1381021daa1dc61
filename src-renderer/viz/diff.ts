// Two traces (or two runs) replayed through the same strategies, side by side: for every strategy
// both hold (matched by name), each compared metric of A and B, B − A and (B − A) / A. The metric
// list and which way is better are the CLI's (src-shared/compare.ts), one definition.
import { COMPARED_METRICS, type MetricDefinition } from '../../src-shared/compare.ts'
import type { StrategySummary } from '../../src-shared/summary.ts'
import { formatBytes, formatCount, formatRatio } from './format.ts'

export interface SideStrategy {
  name: string
  summary: StrategySummary
}

export interface DiffCell {
  metric: MetricDefinition
  a: number | undefined
  b: number | undefined
  delta: number | undefined
  relative: number | undefined
  /** Whether B is better (1), worse (-1) or the same / not comparable (0) by this metric. */
  verdict: -1 | 0 | 1
}

export interface StrategyDiffRow {
  name: string
  onlyIn?: 'a' | 'b'
  cells: DiffCell[]
}

function value(summary: Record<string, number> | undefined, key: string): number | undefined {
  const v = summary?.[key]
  return typeof v === 'number' && Number.isFinite(v) ? v : undefined
}

export function diffStrategies(a: readonly SideStrategy[], b: readonly SideStrategy[]): StrategyDiffRow[] {
  const names = [...new Set([...a.map((s) => s.name), ...b.map((s) => s.name)])]
  return names.map((name) => {
    const sa = a.find((s) => s.name === name)
    const sb = b.find((s) => s.name === name)
    const cells = COMPARED_METRICS.filter((m) => m.key !== 'eventsPerSecond').map((metric): DiffCell => {
      const va = value(sa?.summary, metric.key)
      const vb = value(sb?.summary, metric.key)
      const delta = va !== undefined && vb !== undefined ? vb - va : undefined
      const relative = delta !== undefined && va !== 0 ? delta / va! : undefined
      let verdict: DiffCell['verdict'] = 0
      if (delta !== undefined && delta !== 0 && metric.better !== 'none') verdict = (metric.better === 'lower') === delta < 0 ? 1 : -1
      return { metric, a: va, b: vb, delta, relative, verdict }
    })
    return { name, ...(sa === undefined ? { onlyIn: 'b' as const } : sb === undefined ? { onlyIn: 'a' as const } : {}), cells }
  })
}

/**
 * A figure of the diff as shown: bytes, counts, ratios as percentages; `signed` for B − A, where a
 * change of a ratio is in percentage points ("+4.5 pt"), not a percentage of it.
 */
export function formatDiffValue(unit: string, v: number | undefined, signed = false): string {
  if (v === undefined) return '—'
  const sign = signed && v > 0 ? '+' : ''
  if (unit === 'ratio') return signed ? `${sign}${(v * 100).toFixed(1)} pt` : formatRatio(v)
  return sign + (unit === 'bytes' ? formatBytes(v) : formatCount(Math.round(v)))
}

/** The relative change (B − A) / A; '—' where A is 0 or a side lacks the figure. */
export function formatDiffRelative(relative: number | undefined): string {
  return relative === undefined ? '—' : `${relative > 0 ? '+' : ''}${(relative * 100).toFixed(1)} %`
}

/** A strategy's heading: its name, and which side alone holds it ("pytorch (recorded) — only in B"). */
export function diffHeading(row: Pick<StrategyDiffRow, 'name' | 'onlyIn'>): string {
  return row.onlyIn ? `${row.name} — only in ${row.onlyIn.toUpperCase()}` : row.name
}
