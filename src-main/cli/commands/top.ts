// `vramscope top FILE [--at peak|oom|EVENT] [--by frame|tag|stream] [--strategy NAME] [--json]`:
// what was live at one moment, grouped by who asked for it, largest first
// (src-main/services/analysis/top.ts). Frames are filtered as in the app (src-shared/frames.ts):
// a group is named by the first frame of the user's code, and lists the shown frames of its
// largest block.
import { InputError } from '../../services/input-error.ts'
import { recordedLayout, topGroups, TOP_GROUPINGS, type LayoutOnEvents, type TopAt, type TopBy, type TopResult } from '../../services/analysis/top.ts'
import { replayInput } from '../../services/replay/replay-input.ts'
import { parseStrategySpecs } from '../../services/replay/strategy-spec.ts'
import { formatBytes, formatDuration } from '../../services/units.ts'
import { formatValue } from '../format.ts'
import { OptionError, openWithProgress, printJson, progressFor, type CommonOptions, type Io } from '../shared.ts'

export interface TopCommandOptions extends CommonOptions {
  at?: string
  by?: string
  strategy?: string
  limit?: string
  frames?: string
  recordedPlacement: boolean
}

function parseAt(text: string | undefined): TopAt {
  if (text === undefined || text === 'peak') return { kind: 'peak' }
  if (text === 'oom') return { kind: 'oom' }
  if (/^\d+$/.test(text)) return { kind: 'event', event: Number(text) }
  throw new OptionError('--at', `'${text}': give peak, oom or an event index (a whole number)`)
}

function parseBy(text: string | undefined): TopBy {
  if (text === undefined) return 'frame'
  if ((TOP_GROUPINGS as readonly string[]).includes(text)) return text as TopBy
  throw new OptionError('--by', `'${text}': give ${TOP_GROUPINGS.join(', ')}`)
}

function parseCount(option: string, text: string | undefined, fallback: number): number {
  if (text === undefined) return fallback
  if (!/^\d+$/.test(text)) throw new OptionError(option, `'${text}': give a whole number`)
  return Number(text)
}

export async function topCommand(io: Io, file: string, options: TopCommandOptions): Promise<void> {
  const at = parseAt(options.at)
  const by = parseBy(options.by)
  const limit = parseCount('--limit', options.limit, 20)
  const shownFrames = parseCount('--frames', options.frames, 3)
  // A strategy is checked before the file is read, so a bad one fails first.
  const spec = options.strategy === undefined || options.strategy === 'recorded' ? undefined : parseStrategySpecs([options.strategy], '--strategy')
  if (spec && spec.length !== 1) throw new OptionError('--strategy', `'${options.strategy}': give one strategy (${spec.length} given)`)
  const input = await openWithProgress(io, options, file)
  let layout: LayoutOnEvents | undefined
  if (options.strategy === 'recorded') {
    layout = recordedLayout(input.trace, input.strategies)
    if (!layout) throw new OptionError('--strategy', `recorded: ${file} holds no recorded layout (PyTorch snapshots and recordings do)`)
  } else if (spec) {
    const progress = progressFor(io, options)
    try {
      const replayed = await replayInput(input, spec, {
        layout: true,
        recordedPlacement: options.recordedPlacement,
        onProgress: (p) => progress.update(`replay ${p.label}`, p.eventsDone, p.eventsTotal, 'events'),
      })
      const r = replayed.replays[0]!
      layout = { name: r.label, ...r.layout, peakReservedEvent: r.summary.peakReservedEvent }
    } catch (e) {
      if ((e as { code?: unknown }).code === 'INVALID_ARGUMENT') throw new InputError(file, '', (e as Error).message)
      throw e
    } finally {
      progress.clear()
    }
  }
  const result = topGroups(input.trace, { at, by, file, stored: input.strategies, ...(layout && { layout }) })
  if (options.json) {
    printJson(io, {
      file,
      at: result.at,
      by: result.by,
      counted: result.counted,
      groups: result.groups.map((g) => ({ key: g.key, bytes: g.bytes, blocks: g.blocks, share: g.share, frames: g.frames, event: g.largestEvent })),
    })
    return
  }
  io.stdout.write(render(file, result, limit, shownFrames))
}

function render(file: string, r: TopResult, limit: number, shownFrames: number): string {
  const a = r.at
  const what = r.counted.kind === 'requests' ? 'requested' : `as laid out by ${r.counted.name}, rounded`
  const out = [
    `${file} at event ${formatValue(a.event, 'count')} (${formatDuration(a.time)}): ${a.description}${a.reserved !== undefined ? `, ${formatBytes(a.reserved)} reserved` : ''}`,
    `  ${formatBytes(a.bytes)} live in ${formatValue(a.blocks, 'count')} block${a.blocks === 1 ? '' : 's'} (${what}), by ${r.by}`,
    '',
  ]
  if (r.groups.length === 0) {
    out.push('  nothing was live')
    return `${out.join('\n')}\n`
  }
  const rows = r.groups.slice(0, limit).map((g) => [formatBytes(g.bytes), `${(g.share * 100).toFixed(1)} %`, formatValue(g.blocks, 'count'), g.key, g])
  const w = [0, 1, 2].map((c) => Math.max(['bytes', 'share', 'blocks'][c]!.length, ...rows.map((row) => (row[c] as string).length)))
  const headerKey = r.by === 'frame' ? 'allocated at (first frame of your code)' : r.by
  out.push(`  ${'bytes'.padStart(w[0]!)}  ${'share'.padStart(w[1]!)}  ${'blocks'.padStart(w[2]!)}  ${headerKey}`)
  const indent = ' '.repeat(2 + w[0]! + 2 + w[1]! + 2 + w[2]! + 2)
  for (const row of rows) {
    const g = row[4] as TopResult['groups'][number]
    out.push(`  ${(row[0] as string).padStart(w[0]!)}  ${(row[1] as string).padStart(w[1]!)}  ${(row[2] as string).padStart(w[2]!)}  ${g.key}`)
    // Under a frame group, the frames between the allocation and the group's frame (innermost
    // first: the operation, then the modules that called it); under a tag or stream, the stack.
    const at = r.by === 'frame' ? g.frames.findIndex((f) => f === g.key || f.startsWith(`${g.key} ×`)) : -1
    const inner = at >= 0 ? g.frames.slice(0, at) : r.by === 'frame' ? [] : g.frames
    for (const f of inner.slice(0, shownFrames)) out.push(`${indent}  ${f}`)
    if (inner.length > shownFrames) out.push(`${indent}  … ${inner.length - shownFrames} more`)
  }
  if (r.groups.length > limit) out.push(`  … ${r.groups.length - limit} more group${r.groups.length - limit === 1 ? '' : 's'} (--limit, or --json for all)`)
  return `${out.join('\n')}\n`
}
