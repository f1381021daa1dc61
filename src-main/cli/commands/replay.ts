// `vramscope replay FILE --strategies ... [--cap 24GiB] [-o OUT.vramscope]`: the trace through
// every strategy, a table of the compared metrics side by side with the winner of each marked,
// and PyTorch's own recorded figures beside the model's when the input has them.
import { compareResults, isRecorded, plural, unrankedReason } from '../../../src-shared/compare.ts'
import { usesPytorchPolicy, type ReplayedInput, type ReplayStart } from '../../services/replay/replay-input.ts'
import { confLine } from '../../../src-shared/pytorch-conf.ts'
import { deviceWords } from '../../../src-shared/device.ts'
import { writeTrace } from '../../services/trace/file.ts'
import { seriesPeak } from '../../services/trace/model.ts'
import type { StrategyResult } from '../../../src-shared/results.ts'
import { formatBytes } from '../../services/units.ts'
import { formatValue, renderTable } from '../format.ts'
import { OptionError, openAndReplay, parseReplayOptions, printJson, type Io, type ReplayingOptions } from '../shared.ts'

export interface ReplayCommandOptions extends ReplayingOptions {
  output?: string
}

export async function replayCommand(io: Io, file: string, options: ReplayCommandOptions): Promise<void> {
  const request = parseReplayOptions(options)
  if (!request.specs && request.confs.length === 0)
    throw new OptionError(
      '--strategies',
      'give strategies to replay (-s caching:preset=pytorch,slab) or PyTorch configurations (--conf "expandable_segments:True")',
    )
  const opened = await openAndReplay(io, options, file, request, options.output !== undefined)
  const cap = request.cap
  const replayed = opened.replayed!
  const { input, kept } = opened
  // Stored results of the file other than the ones replayed now (a recorded layout) stay.
  if (options.output !== undefined) await writeTrace(options.output, input.trace, opened.strategies)
  const shown = [...replayed.results, ...kept.filter(isRecorded)]
  const rows = compareResults(shown)
  const fidelity = fidelityOf(replayed, kept)
  const againstRecorded = againstRecordedCurve(replayed, input.trace.recordedReserved === undefined ? undefined : seriesPeak(input.trace.recordedReserved))

  if (options.json) {
    printJson(io, {
      file,
      kind: input.kind,
      events: input.trace.events.kind.length,
      cap: cap ?? null,
      device: replayed.device,
      output: options.output ?? null,
      strategies: shown.map((s) => ({
        name: s.name,
        strategy: s.strategy,
        params: s.params,
        recorded: isRecorded(s),
        unranked: isRecorded(s) ? null : (unrankedReason(s) ?? null),
        recordedPlacement: replayed.placed.find((p) => p.label === s.name)?.regions ?? 0,
        summary: s.summary ?? {},
      })),
      winners: Object.fromEntries(rows.filter((r) => r.winners.length > 0).map((r) => [r.metric.key, r.winners.map((i) => shown[i]!.name)])),
      fidelity,
      recordedReserved: againstRecorded,
      recordedSettings: replayed.recordedSettings,
      sized: replayed.sized,
      unsized: replayed.unsized,
      start: replayed.start,
      oomRequests: replayed.oomRequests,
      warnings: input.trace.meta.warnings,
    })
    return
  }

  const header = ['', ...shown.map((s) => s.name)]
  const table = rows.map((row) => [
    row.metric.label,
    ...row.values.map((v, i) => `${formatValue(v, row.metric.unit)}${row.winners.includes(i) ? ' *' : row.winners.length > 0 ? '  ' : ''}`),
  ])
  table.push(rankedRow(shown))
  const lines = [
    `${file}: ${formatValue(input.trace.events.kind.length, 'count')} events${cap !== undefined ? `, device capped at ${formatBytes(cap)}` : ''}`,
    // The device the strategies ran on and where its memory came from; a cap replaces it.
    cap !== undefined ? `${deviceWords(replayed.device, formatBytes)}; the cap replaces it` : deviceWords(replayed.device, formatBytes),
    '',
    renderTable(header, table),
    '',
    '* best of the replayed strategies that served every request and kept every live block' +
      (shown.some(isRecorded) ? '; recorded results are the reference, not ranked' : ''),
  ]
  for (const f of fidelity)
    lines.push(
      `${f.model}: peak reserved ${formatBytes(f.modelPeakReserved)} vs ${f.recorded} ${formatBytes(f.recordedPeakReserved)} ` +
        `(${f.relativeDifference >= 0 ? '+' : ''}${(f.relativeDifference * 100).toFixed(2)} %), segments ${f.modelSegments} vs ${f.recordedSegments}` +
        (f.recordedPlacement > 0 ? `; replayed at PyTorch's ${f.recordedPlacement} recorded segment addresses` : ''),
    )
  if (againstRecorded) {
    lines.push(`the profiler's recorded peak reserved: ${formatBytes(againstRecorded.peak)}`)
    for (const s of againstRecorded.strategies)
      lines.push(
        `  ${s.name}: peak reserved ${formatBytes(s.peakReserved)} (${s.relativeDifference >= 0 ? '+' : ''}${(s.relativeDifference * 100).toFixed(2)} % of the recorded)`,
      )
  }
  for (const r of replayed.recordedSettings)
    lines.push(
      `${r.label}: replayed under the snapshot's recorded settings, ${confLine(r.conf)} (give parameters or --conf to replay others)` +
        (r.notModelled.length > 0 ? `; not modelled: ${r.notModelled.join(', ')}` : ''),
    )
  for (const z of replayed.sized) lines.push(`${z.label}: pools sized from the trace, ${z.params} (give sizes to replay others)`)
  for (const z of replayed.unsized) lines.push(`${z.label}: not sized from the trace, ${z.reason}; replayed with its own defaults`)
  for (const b of replayed.start) lines.push(startLine(b))
  if (replayed.oomRequests > 0)
    lines.push(
      `${plural(replayed.oomRequests, 'recorded out-of-memory', 'recorded out-of-memories')} replayed as the request${replayed.oomRequests === 1 ? '' : 's'} the program made, ${cap !== undefined ? 'under the cap' : 'on the device'} (as whatif replays ${replayed.oomRequests === 1 ? 'it' : 'them'})`,
    )
  for (const w of input.trace.meta.warnings) lines.push(`warning: ${w}`)
  if (options.output !== undefined) lines.push(`results saved to ${options.output}`)
  io.stdout.write(`${lines.join('\n')}\n`)
}

/** How a target started a trace that began with memory in use (ReplayedInput.start), in words. */
export function startLine(b: ReplayStart): string {
  if (b.seeded)
    return (
      `${b.label}: started from the recorded state when recording began: ${plural(b.segments, b.expandable ? 'mapped range' : 'segment')}${b.expandable ? ' of expandable segments' : ''} with ${plural(b.blocks, 'live block')} and the free space between them` +
      (b.pendingAsFree > 0
        ? ` (${plural(b.pendingAsFree, 'block')} then waiting for ${b.pendingAsFree === 1 ? 'its stream' : 'their streams'} counted as free)`
        : '')
    )
  return `${b.label}: started empty, with the blocks live when recording began allocated at t = 0 (${b.reason ?? 'not the PyTorch policy'})`
}

/** The table's last row: whether each result is ranked, and if not why ("874 failures"). */
export function rankedRow(shown: readonly StrategyResult[]): string[] {
  return ['ranked', ...shown.map((s) => (isRecorded(s) ? 'reference' : unrankedReason(s) ? `no: ${unrankedReason(s)}` : 'yes'))]
}

interface AgainstRecorded {
  /** The peak of the allocator's own reserved curve (trace.recordedReserved). */
  peak: number
  strategies: { name: string; peakReserved: number; relativeDifference: number }[]
}

/** Each replayed strategy's peak reserved beside the recorded curve's peak (a profiler trace's Total Reserved); null without one. */
function againstRecordedCurve(replayed: ReplayedInput, peak: number | undefined): AgainstRecorded | null {
  if (peak === undefined) return null
  return {
    peak,
    strategies: replayed.results.flatMap((s) => {
      const own = s.summary?.['peakReserved']
      if (own === undefined) return []
      return [{ name: s.name, peakReserved: own, relativeDifference: peak === 0 ? 0 : (own - peak) / peak }]
    }),
  }
}

interface Fidelity {
  model: string
  recorded: string
  modelPeakReserved: number
  recordedPeakReserved: number
  relativeDifference: number
  modelSegments: number
  recordedSegments: number
  recordedPlacement: number
}

/** PyTorch-policy results beside the recorded PyTorch allocator they model. */
function fidelityOf(replayed: ReplayedInput, kept: readonly StrategyResult[]): Fidelity[] {
  const recorded = kept.find((s) => isRecorded(s) && s.summary?.['peakReserved'] !== undefined)
  if (!recorded) return []
  return replayed.results.flatMap((model) => {
    if (!usesPytorchPolicy({ strategy: model.strategy, params: model.params as Record<string, string> }) || !model.summary) return []
    const modelPeak = model.summary['peakReserved']!
    const recordedPeak = recorded.summary!['peakReserved']!
    return [
      {
        model: model.name,
        recorded: recorded.name,
        modelPeakReserved: modelPeak,
        recordedPeakReserved: recordedPeak,
        relativeDifference: recordedPeak === 0 ? 0 : (modelPeak - recordedPeak) / recordedPeak,
        modelSegments: model.summary['deviceCalls.regionAlloc'] ?? 0,
        recordedSegments: recorded.summary!['deviceCalls.regionAlloc'] ?? 0,
        recordedPlacement: replayed.placed.find((p) => p.label === model.name)?.regions ?? 0,
      },
    ]
  })
}
