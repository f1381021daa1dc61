// `vramscope info FILE...`: what a trace file, PyTorch snapshot or RMM log holds. Several files (a
// folder, a pattern): a job of one rank a file, each rank's info, then the fields that differ between ranks.
import { oomHeadlineWords, oomLimitWords, oomVerdictWords } from '../../../src-shared/oom.ts'
import { describeTrace, type TraceDescription } from '../../services/analysis/inspect.ts'
import { oomSummary } from '../../services/analysis/oom.ts'
import type { OpenedInput } from '../../services/import/open-input.ts'
import { seriesPeak } from '../../services/trace/model.ts'
import { formatBytes, formatDuration } from '../../services/units.ts'
import { recordedConf } from '../../services/replay/replay-input.ts'
import { expandInputs, isOneFile, rankFiles, type RankedFile } from '../../services/whatif/job.ts'
import { formatValue, renderTable } from '../format.ts'
import { plural } from '../../../src-shared/compare.ts'
import { openWithProgress, printJson, type CommonOptions, type Io } from '../shared.ts'

export function describeKind(input: OpenedInput): string {
  switch (input.kind) {
    case 'trace': {
      const f = input.file!
      return `vramscope trace ${f.version} (${f.writer === 'stream' ? 'a recording' : 'written whole'}${f.complete ? '' : ', incomplete'})`
    }
    case 'pytorch-snapshot':
      return `PyTorch memory snapshot (${input.pytorch!.format})`
    case 'rmm-log':
      return 'RMM log (CSV)'
    case 'kineto-trace':
      return `torch.profiler trace (Chrome JSON${input.trace.meta.properties['kineto.gzip'] === 'true' ? ', gzip' : ''})`
    case 'nsys-sqlite':
      return `Nsight Systems export (SQLite, device ${input.nsys!.device})`
    case 'umpire-log':
      return `Umpire replay log (${input.trace.meta.properties['umpire.format'] === 'classic' ? 'classic ' : ''}JSON lines)`
  }
}

/** CUDA device ordinals as a count and names: "1 (cuda:0)", "2 (cuda:0, cuda:1)", "none". */
export function deviceList(devices: readonly number[]): string {
  return devices.length === 0 ? 'none' : `${devices.length} (${devices.map((d) => `cuda:${d}`).join(', ')})`
}

export async function infoCommand(io: Io, args: string | string[], options: CommonOptions): Promise<void> {
  const given = typeof args === 'string' ? [args] : args
  // One file: what it holds. Several, a folder or a pattern: a job of one rank a file (whatif/job.ts).
  if (!(await isOneFile(given))) return infoJobCommand(io, await expandInputs(given), options)
  const file = given[0]!
  const info = await infoOf(io, file, options)
  if (options.json) printJson(io, info.json)
  else io.stdout.write(info.text)
}

interface FileInfo {
  json: Record<string, unknown>
  text: string
  fields: InfoField[]
}

/** One file's info, as JSON, as text, and the fields a job compares; the file is let go when this returns. */
async function infoOf(io: Io, file: string, options: CommonOptions): Promise<FileInfo> {
  const input = await openWithProgress(io, options, file)
  const d = describeTrace(input.trace, input.strategies)
  const oom = oomSummary(input.trace, input.strategies)
  const series = input.trace.recordedReserved
  // The allocator's own reserved curve where the source kept one (a profiler trace's Total Reserved).
  const recordedCurve = series && { peak: seriesPeak(series)!, points: series.index.length }
  const json = {
    file,
    kind: input.kind,
    format: describeKind(input),
    ...d,
    ...(oom && { oom }),
    ...(recordedCurve && { recordedReserved: recordedCurve }),
    ...(input.file && { traceFile: input.file }),
    ...(input.pytorch && { pytorch: input.pytorch }),
    ...(input.rmm && { rmm: input.rmm }),
  }
  const fields = infoFields(input, d, oom?.count ?? 0)
  if (options.json) return { json, text: '', fields }
  const count = (n: number) => formatValue(n, 'count')
  const lines: [string, string][] = [
    ['format', describeKind(input)],
    ['source', [d.source, d.origin && `from ${d.origin}`].filter(Boolean).join(' ')],
  ]
  if (d.gpu || d.driver) lines.push(['gpu', [d.gpu, d.driver && `driver ${d.driver}`].filter(Boolean).join(', ')])
  lines.push(
    [
      'events',
      `${count(d.events)} (${plural(d.allocs, 'alloc')}, ${plural(d.frees, 'free')}, ${plural(d.markers, 'marker')}, ${plural(d.recordedFailures, 'recorded failure')})`,
    ],
    ['blocks', count(d.blocks)],
    ['streams', count(d.streams)],
    ['devices', deviceList(d.devices)],
    ['frames', `${count(d.frames)} in ${plural(d.stacks, 'stack')}`],
    ['duration', formatDuration(d.durationNs)],
    [
      'requested',
      `peak ${formatBytes(d.peakRequested)}, ${formatBytes(d.bytesRequested)} in all, ${plural(d.liveAtEnd, 'block')} (${formatBytes(d.liveBytesAtEnd)}) live at the end`,
    ],
  )
  if (recordedCurve)
    lines.push(['recorded reserved', `peak ${formatBytes(recordedCurve.peak)}, ${plural(recordedCurve.points, 'change')} (the profiler's Total Reserved)`])
  if (d.unknownFrees > 0) lines.push(['unknown frees', `${plural(d.unknownFrees, 'free')} of blocks not live (skipped by replay)`])
  if (input.rmm) {
    const r = input.rmm
    lines.push([
      'log',
      `${count(r.lines)} lines, ${r.badLines.length} skipped${r.badLines.length > 0 ? ` (lines ${r.badLines.map((b) => b.line).join(', ')})` : ''}`,
    ])
  }
  if (input.pytorch) lines.push(['snapshot devices', deviceList(input.pytorch.devices)])
  if (oom) {
    lines.push(['out of memory', `${oomHeadlineWords(oom, formatBytes, count)}${oom.count > 1 ? ` (the first of ${count(oom.count)})` : ''}`])
    lines.push(['at the failure', oomVerdictWords(oom, formatBytes)])
    const limit = oomLimitWords(oom, formatBytes)
    if (limit) lines.push(['implied limit', limit])
  }
  const strategies =
    d.strategies.length === 0
      ? ['(none)']
      : d.strategies.map((s) => {
          const peak = s.summary?.['peakReserved']
          const parts = [`${s.name} [${s.strategy}]`]
          if (peak !== undefined) parts.push(`peak reserved ${formatBytes(peak)}`)
          const regions = s.summary?.['deviceCalls.regionAlloc']
          if (regions !== undefined) parts.push(plural(regions, 'region'))
          parts.push(`${plural(s.layoutEvents, 'layout event')}, ${plural(s.metricsSamples, 'metrics sample')}`)
          return parts.join(', ')
        })
  const warnings = d.warnings.length === 0 ? ['(none)'] : d.warnings
  const width = Math.max(...lines.map(([k]) => k.length), 'strategies'.length)
  const out = [`${file}`]
  for (const [key, value] of lines) out.push(`  ${key.padEnd(width)}  ${value}`)
  out.push(`  ${'warnings'.padEnd(width)}  ${warnings[0]}`, ...warnings.slice(1).map((w) => `  ${''.padEnd(width)}  ${w}`))
  out.push(`  ${'strategies'.padEnd(width)}  ${strategies[0]}`, ...strategies.slice(1).map((s) => `  ${''.padEnd(width)}  ${s}`))
  return { json, text: `${out.join('\n')}\n`, fields }
}

/** A figure a job compares between ranks: its JSON value (bytes as integers) and its words. */
interface InfoField {
  field: string
  label: string
  value: number | string | null
  text: string
}

function infoFields(input: OpenedInput, d: TraceDescription, ooms: number): InfoField[] {
  const p = d.properties
  const f = (field: string, label: string, value: number | string | null, text: string): InfoField => ({ field, label, value, text })
  const bytes = (field: string, label: string, n: number | null) => f(field, label, n, n === null ? 'none' : formatBytes(n))
  const count = (field: string, label: string, n: number) => f(field, label, n, formatValue(n, 'count'))
  const deviceBytes = p['device.total_bytes'] !== undefined && /^\d+$/.test(p['device.total_bytes']) ? Number(p['device.total_bytes']) : null
  const conf = recordedConf(input.trace)
  // A recorded layout's peak, else the peak of the allocator's own reserved curve (a profiler trace's).
  const recorded = d.strategies.find((s) => s.name.endsWith('(recorded)'))?.summary?.['peakReserved'] ?? seriesPeak(input.trace.recordedReserved)
  const device = p['device.name'] ?? d.gpu ?? null
  return [
    f('format', 'format', describeKind(input), describeKind(input)),
    f('device', 'device', device, device ?? 'not said'),
    bytes('deviceBytes', 'device memory', deviceBytes),
    f('settings', 'settings', conf ?? null, conf === undefined ? 'not recorded' : conf === '' ? "PyTorch's defaults" : conf),
    count('events', 'events', d.events),
    count('blocks', 'blocks', d.blocks),
    count('streams', 'streams', d.streams),
    f('devices', 'devices', deviceList(d.devices), deviceList(d.devices)),
    count('frames', 'frames', d.frames),
    f('durationNs', 'duration', d.durationNs, formatDuration(d.durationNs)),
    bytes('peakRequested', 'peak requested', d.peakRequested),
    bytes('bytesRequested', 'requested in all', d.bytesRequested),
    bytes('liveBytesAtEnd', 'live at the end', d.liveBytesAtEnd),
    bytes('peakReserved', 'recorded peak reserved', recorded ?? null),
    count('recordedFailures', 'recorded failures', d.recordedFailures),
    count('ooms', 'out of memory', ooms),
    count('warnings', 'warnings', d.warnings.length),
  ]
}

/**
 * `info R0 R1 ...` (or a folder, or a pattern): each rank's info, one rank open at a time, then
 * the fields whose values differ between ranks, rank by rank, and those every rank has alike.
 */
async function infoJobCommand(io: Io, files: string[], options: CommonOptions): Promise<void> {
  const ranked = await rankFiles(files)
  const ranks: (RankedFile & FileInfo)[] = []
  for (const r of ranked) ranks.push({ ...r, ...(await infoOf(io, r.file, options)) })
  const names = ranks[0]!.fields.map((x) => x.field)
  const differ = names.filter((_, i) => new Set(ranks.map((r) => r.fields[i]!.value)).size > 1)
  const alike = names.filter((n) => !differ.includes(n))
  if (options.json) {
    printJson(io, {
      ranks: ranks.map((r) => ({ file: r.file, rank: r.rank, rankFrom: r.rankFrom, ...r.json })),
      differs: {
        fields: differ.map((field) => ({
          field,
          byRank: ranks.map((r) => ({ rank: r.rank, value: r.fields.find((x) => x.field === field)!.value })),
        })),
        alike,
      },
    })
    return
  }
  const out: string[] = []
  for (const r of ranks) {
    const from = r.rankFrom === 'stats' ? 'the stats beside it' : r.rankFrom === 'name' ? 'its name' : 'its place among the files'
    out.push(`rank ${r.rank}: ${r.file} (rank from ${from})`)
    for (const line of r.text.trimEnd().split('\n')) out.push(`  ${line}`)
    out.push('')
  }
  const label = (field: string) => ranks[0]!.fields.find((x) => x.field === field)!.label
  out.push(`what differs between the ${ranks.length} ranks:`)
  if (differ.length === 0) out.push('  nothing')
  else {
    const rows = differ.map((field) => [label(field), ...ranks.map((r) => r.fields.find((x) => x.field === field)!.text)])
    for (const line of renderTable(['', ...ranks.map((r) => `rank ${r.rank}`)], rows).split('\n')) out.push(`  ${line}`)
  }
  if (alike.length > 0) out.push(`every rank alike in: ${alike.map(label).join(', ')}`)
  io.stdout.write(`${out.join('\n')}\n`)
}
