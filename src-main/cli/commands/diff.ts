// `vramscope diff A B [--strategies ...]`: two traces, or two files of results, side by side with
// their differences; with --strategies both are replayed first.
import { diffTraces, type DiffRow, type DiffSide } from '../../services/export/diff.ts'
import { describeTrace } from '../../services/analysis/inspect.ts'
import { formatDelta, formatRelative, formatValue, renderTable } from '../format.ts'
import { openAndReplay, parseReplayOptions, printJson, type Io, type ReplayRequest, type ReplayingOptions } from '../shared.ts'

export type DiffCommandOptions = ReplayingOptions

async function side(io: Io, options: DiffCommandOptions, file: string, request: ReplayRequest): Promise<DiffSide> {
  const { input, strategies } = await openAndReplay(io, options, file, request)
  return { file, description: describeTrace(input.trace, strategies), strategies }
}

function tableOf(rows: readonly DiffRow[], a: string, b: string): string {
  return renderTable(
    ['', a, b, 'b - a', ''],
    rows.map((r) => [r.label, formatValue(r.a, r.unit), formatValue(r.b, r.unit), formatDelta(r.delta, r.unit), formatRelative(r.relative)]),
  )
}

export async function diffCommand(io: Io, a: string, b: string, options: DiffCommandOptions): Promise<void> {
  const request = parseReplayOptions(options)
  const diff = diffTraces(await side(io, options, a, request), await side(io, options, b, request))
  if (options.json) {
    printJson(io, diff)
    return
  }
  const out = [`a: ${a}`, `b: ${b}`, '', 'trace', tableOf(diff.trace, 'a', 'b')]
  for (const s of diff.strategies) {
    out.push('', s.onlyIn ? `${s.name} — only in ${s.onlyIn}` : s.name)
    out.push(tableOf(s.rows, 'a', 'b'))
    for (const side of ['a', 'b'] as const) if (s.unranked?.[side]) out.push(`not ranked in ${side}: ${s.unranked[side]}`)
  }
  if (diff.strategies.length === 0) out.push('', 'neither file holds replay results; give --strategies to replay both')
  io.stdout.write(`${out.join('\n')}\n`)
}
