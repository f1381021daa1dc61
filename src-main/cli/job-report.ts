// A job of many ranks (services/whatif/job.ts) as the CLI prints it, text and --json: `whatif R0 R1
// ...` after running the lab on each rank, and `ranks` after reading each rank's `whatif --json`.
import { deviceWords } from '../../src-shared/device.ts'
import { confLine } from '../../src-shared/pytorch-conf.ts'
import { formatBytes } from '../services/units.ts'
import { NOT_RUN, type JobReport } from '../services/whatif/job.ts'
import { formatValue, renderTable } from './format.ts'

/** A job report as `whatif R0 R1 ... --json` and `ranks --json` print it. */
export function jobJson(report: JobReport) {
  return {
    ranks: report.ranks.map((r) => ({
      file: r.file,
      rank: r.rank,
      rankFrom: r.rankFrom,
      events: r.events,
      device: r.device,
      limit: r.limit,
      recordedConf: r.recordedConf,
      // Not the plan's milliseconds: a job's JSON is the same however it was run (ranks merges it).
      floor: r.floor && { peakLiveBytes: r.floor.peakLiveBytes, peakLiveRoundedBytes: r.floor.peakLiveRoundedBytes, plannedBytes: r.floor.plannedBytes },
      configs: r.rows.map((row) => ({
        rank: row.rank,
        conf: row.conf,
        kind: row.kind,
        label: row.label,
        peakReserved: row.peakReserved,
        peakAllocated: row.peakAllocated,
        segments: row.segments,
        failures: row.failures,
        smallestFittingBytes: row.smallestFittingBytes,
        notRanked: row.notRanked ?? null,
      })),
    })),
    worstRank: report.worstRank,
    configs: report.configs.map((c) => ({
      rank: c.rank,
      conf: c.conf,
      kind: c.kind,
      label: c.label,
      line: c.line,
      fitsEveryRank: c.fitsEveryRank,
      smallestFittingBytes: c.smallestFittingBytes,
      worstRank: c.worstRank,
      perRank: c.perRank,
    })),
  }
}

/** A job report as `whatif R0 R1 ...` and `ranks` print it; `search`: whether the smallest fitting limits were searched for. */
export function jobText(report: JobReport, options: { search: boolean }): string {
  const lines: string[] = []
  const from = { stats: 'the stats beside it', name: 'its name', order: 'its place among the files' }
  lines.push(`a job of ${report.ranks.length} ranks:`)
  for (const r of report.ranks)
    lines.push(
      `  rank ${r.rank}: ${r.file} (rank from ${from[r.rankFrom]}), ${formatValue(r.events, 'count')} events, recorded with ${r.recordedConf === null ? 'no settings' : confLine(r.recordedConf)}`,
    )
  const devices = new Set(report.ranks.map((r) => deviceWords({ ...r.device, from: "each rank's stats" }, formatBytes)))
  if (devices.size === 1) lines.push([...devices][0]!)
  else for (const r of report.ranks) lines.push(`rank ${r.rank}: ${deviceWords(r.device, formatBytes)}`)
  for (const r of report.ranks)
    if (r.floor)
      lines.push(
        `rank ${r.rank}: ${formatBytes(r.floor.peakLiveRoundedBytes)} live at the peak (the floor); a static plan of every block's lifetime reserves ${formatBytes(r.floor.plannedBytes)}`,
      )
  const limits = new Set(report.ranks.map((r) => (r.limit.bytes === null ? 'none' : formatBytes(r.limit.bytes))))
  lines.push(`limit: ${[...limits].join(', ')}${limits.size > 1 ? ' (by rank)' : ''}`)
  const recorded = report.configs.find((c) => c.key === 'recorded')
  const worst = recorded?.perRank.find((p) => p.rank === report.worstRank)
  lines.push(`worst rank: ${report.worstRank}${worst ? ` (peak reserved ${formatBytes(worst.peakReserved)} under its recorded settings)` : ''}`)
  lines.push('')
  const header = ['#', 'configuration', 'fits every rank', 'smallest fitting (every rank)', 'worst rank', ...report.ranks.map((r) => `rank ${r.rank} peak`)]
  const table = report.configs.map((c) => [
    c.rank > 0 ? String(c.rank) : '-',
    c.label,
    c.rank === 0
      ? 'not ranked'
      : c.fitsEveryRank
        ? 'yes'
        : `no (${c.perRank
            .filter((p) => p.failures > 0)
            .map((p) => p.rank)
            .join(', ')} fail)`,
    c.smallestFittingBytes === null ? (options.search ? 'none up to the device' : '-') : formatBytes(c.smallestFittingBytes),
    String(c.worstRank),
    ...c.perRank.map((p) => (p.notRanked === NOT_RUN ? '-' : formatBytes(p.peakReserved))),
  ])
  lines.push(renderTable(header, table))
  lines.push('')
  for (const c of report.configs) {
    const reasons = new Map<string, number[]>()
    for (const p of c.perRank) if (p.notRanked) reasons.set(p.notRanked, [...(reasons.get(p.notRanked) ?? []), p.rank])
    for (const [reason, ranks] of reasons)
      lines.push(`not ranked: ${c.label}${ranks.length === c.perRank.length ? '' : ` on rank${ranks.length > 1 ? 's' : ''} ${ranks.join(', ')}`}: ${reason}`)
  }
  const best = report.configs.find((c) => c.rank === 1)
  if (best)
    lines.push(
      best.fitsEveryRank
        ? `best: ${best.line ?? best.label}: fits every rank${best.smallestFittingBytes !== null ? `, on a device of ${formatBytes(best.smallestFittingBytes)} or more` : ''} (rank ${best.worstRank} needs the most)`
        : `no configuration fits every rank under the limit; the closest: ${best.label}`,
    )
  return `${lines.join('\n')}\n`
}
