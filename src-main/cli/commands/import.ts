// `vramscope import FILE -o OUT`: a PyTorch snapshot or RMM log (or a trace file, rewritten whole)
// saved as a .vramscope trace file, with PyTorch's recorded layout as "pytorch (recorded)".
import { plural } from '../../../src-shared/compare.ts'
import { describeTrace } from '../../services/analysis/inspect.ts'
import { writeTrace } from '../../services/trace/file.ts'
import { formatBytes } from '../../services/units.ts'
import { openWithProgress, printJson, type CommonOptions, type Io } from '../shared.ts'
import { describeKind } from './info.ts'

export async function importCommand(io: Io, file: string, options: CommonOptions & { output: string }): Promise<void> {
  const input = await openWithProgress(io, options, file)
  await writeTrace(options.output, input.trace, input.strategies)
  const d = describeTrace(input.trace, input.strategies)
  if (options.json) {
    printJson(io, {
      file,
      kind: input.kind,
      output: options.output,
      events: d.events,
      blocks: d.blocks,
      streams: d.streams,
      frames: d.frames,
      warnings: d.warnings,
      strategies: d.strategies.map((s) => s.name),
    })
    return
  }
  const lines = [
    `${file} (${describeKind(input)}) -> ${options.output}`,
    `  ${plural(d.events, 'event')}, ${plural(d.blocks, 'block')}, ${plural(d.streams, 'stream')}, ${plural(d.frames, 'frame')}; peak requested ${formatBytes(d.peakRequested)}`,
  ]
  for (const s of d.strategies) lines.push(`  kept ${s.name}: ${plural(s.layoutEvents, 'layout event')}`)
  for (const w of d.warnings) lines.push(`  warning: ${w}`)
  io.stdout.write(`${lines.join('\n')}\n`)
}
