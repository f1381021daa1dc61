// Printing for people: figures in their units and plain-text tables with aligned columns.
import type { MetricUnit } from '../../src-shared/compare.ts'
import { formatBytes, formatCount, formatDuration } from '../services/units.ts'

export type Unit = MetricUnit | 'ns'

const grouped = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 })

export function formatValue(value: number | undefined, unit: Unit): string {
  if (value === undefined || Number.isNaN(value)) return '-'
  switch (unit) {
    case 'bytes':
      return formatBytes(value)
    case 'ratio':
      return `${(value * 100).toFixed(1)} %`
    case 'count':
      return grouped.format(value)
    case 'rate':
      return formatCount(value)
    case 'ns':
      return formatDuration(value)
  }
}

/** A difference with its sign: "+12.0 MiB", "-3", "+4.5 %" for ratios (percentage points). */
export function formatDelta(delta: number | undefined, unit: Unit): string {
  if (delta === undefined || Number.isNaN(delta)) return '-'
  if (delta === 0) return '0'
  const sign = delta > 0 ? '+' : '-'
  if (unit === 'ratio') return `${sign}${(Math.abs(delta) * 100).toFixed(1)} pt`
  return `${sign}${formatValue(Math.abs(delta), unit)}`
}

export function formatRelative(relative: number | undefined): string {
  if (relative === undefined || !Number.isFinite(relative)) return ''
  if (relative === 0) return '0 %'
  return `${relative > 0 ? '+' : ''}${(relative * 100).toFixed(1)} %`
}

/** Columns padded to their widest cell; the first left-aligned, the others right-aligned. */
export function renderTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, c) => Math.max(h.length, ...rows.map((r) => (r[c] ?? '').length)))
  const line = (cells: readonly string[]) =>
    cells
      .map((cell, c) => (c === 0 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!)))
      .join('  ')
      .trimEnd()
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n')
}
