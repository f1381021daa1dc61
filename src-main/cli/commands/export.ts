// `vramscope export FILE --format chrome|csv [-o OUT] [--strategies ...]`: results as Chrome Trace
// Event JSON (counter tracks per strategy, opens in Perfetto) or a CSV of each strategy's summary.
// Uses the results the file holds, or replays it first when --strategies is given.
import { plural } from '../../../src-shared/compare.ts'
import { once } from 'node:events'

import { chromeTraceChunks } from '../../services/export/chrome.ts'
import { summaryCsv } from '../../services/export/csv.ts'
import { InputError } from '../../services/input-error.ts'
import { writeFileAtomically } from '../../services/output-file.ts'
import { OptionError, openAndReplay, parseReplayOptions, printJson, type Io, type ReplayingOptions } from '../shared.ts'

export const EXPORT_FORMATS = ['chrome', 'csv'] as const

export interface ExportCommandOptions extends ReplayingOptions {
  format: string
  output?: string
}

export async function exportCommand(io: Io, file: string, options: ExportCommandOptions): Promise<void> {
  const format = options.format
  if (!(EXPORT_FORMATS as readonly string[]).includes(format)) throw new OptionError('--format', `unknown format '${format}' (${EXPORT_FORMATS.join(' or ')})`)
  const request = parseReplayOptions(options)
  if (options.json && options.output === undefined)
    throw new OptionError('--json', 'with --json, stdout holds the JSON report; give -o FILE for the export itself')
  const { input, strategies } = await openAndReplay(io, options, file, request)
  if (strategies.length === 0)
    throw new InputError(file, '', 'holds no replay results to export; give --strategies to replay it first (e.g. --strategies caching:preset=pytorch,buddy)')

  const pieces = format === 'chrome' ? chromeTraceChunks({ trace: input.trace, strategies }) : [summaryCsv(strategies)]
  let bytes = 0
  if (options.output !== undefined) {
    bytes = await writeFileAtomically(options.output, pieces)
  } else {
    for (const piece of pieces) {
      bytes += Buffer.byteLength(piece)
      if (!io.stdout.write(piece)) await once(io.stdout, 'drain')
    }
  }
  if (options.json) printJson(io, { file, format, output: options.output, bytes, strategies: strategies.map((s) => s.name) })
  else if (options.output !== undefined)
    io.stderr.write(
      `${format === 'chrome' ? 'Chrome trace (open it in https://ui.perfetto.dev)' : 'CSV'} of ${plural(strategies.length, 'strategy', 'strategies')} written to ${options.output}\n`,
    )
}
