// `vramscope info FILE`: what a trace file, PyTorch snapshot or RMM log holds.
import { oomHeadlineWords, oomLimitWords, oomVerdictWords } from '../../../src-shared/oom.ts'
import { describeTrace } from '../../services/analysis/inspect.ts'
import { oomSummary } from '../../services/analysis/oom.ts'
import type { OpenedInput } from '../../services/import/open-input.ts'
import { formatBytes, formatDuration } from '../../services/units.ts'
import { formatValue } from '../format.ts'
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
  }
}

/** CUDA device ordinals as a count and names: "1 (cuda:0)", "2 (cuda:0, cuda:1)", "none". */
export function deviceList(devices: readonly number[]): string {
  return devices.length === 0 ? 'none' : `${devices.length} (${devices.map((d) => `cuda:${d}`).join(', ')})`
}

export async function infoCommand(io: Io, file: string, options: CommonOptions): Promise<void> {
  const input = await openWithProgress(io, options, file)
  const d = describeTrace(input.trace, input.strategies)
  const oom = oomSummary(input.trace, input.strategies)
  if (options.json) {
    printJson(io, {
      file,
      kind: input.kind,
      format: describeKind(input),
      ...d,
      ...(oom && { oom }),
      ...(input.file && { traceFile: input.file }),
      ...(input.pytorch && { pytorch: input.pytorch }),
      ...(input.rmm && { rmm: input.rmm }),
    })
    return
  }
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
  io.stdout.write(`${out.join('\n')}\n`)
}
