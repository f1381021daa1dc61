// Each strategy's summary as CSV (RFC 4180), one row per strategy, for spreadsheets and scripts.
// Columns: name, strategy, params (a JSON object), the compared metrics (src-shared/compare.ts) in
// their order, then every other summary figure any strategy has, in the order first met. Numbers
// are written as JavaScript prints them (exact for bytes below 2^53); a figure a strategy lacks is
// an empty field.
import { COMPARED_METRICS } from '../../../src-shared/compare.ts'
import type { StrategyResult } from '../../../src-shared/results.ts'
import type { SummaryKey } from '../../../src-shared/summary.ts'

export function summaryColumns(results: readonly StrategyResult[]): SummaryKey[] {
  const columns = COMPARED_METRICS.map((m) => m.key)
  const seen = new Set(columns)
  for (const r of results)
    // Every figure a result holds, also those a newer version wrote (they read back as they are).
    for (const key of Object.keys(r.summary ?? {}) as SummaryKey[])
      if (!seen.has(key)) {
        seen.add(key)
        columns.push(key)
      }
  return columns
}

function field(value: string): string {
  return /[",\r\n]/.test(value) ? `"${value.replaceAll('"', '""')}"` : value
}

function numberField(value: unknown): string {
  if (typeof value !== 'number') return ''
  return Number.isNaN(value) ? '' : String(value)
}

export function summaryCsv(results: readonly StrategyResult[]): string {
  const columns = summaryColumns(results)
  const lines = [['name', 'strategy', 'params', ...columns].map(field).join(',')]
  for (const r of results)
    lines.push([field(r.name), field(r.strategy), field(JSON.stringify(r.params)), ...columns.map((c) => numberField(r.summary?.[c]))].join(','))
  return `${lines.join('\r\n')}\r\n`
}
