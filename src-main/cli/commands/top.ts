// `vramscope top FILE... [--at peak|oom|EVENT] [--by frame|tag|stream] [--strategy NAME] [--json]`:
// what was live at one moment, grouped by who asked for it, largest first
// (src-main/services/analysis/top.ts). Frames are filtered as in the app (src-shared/frames.ts):
// a group is named by the first frame of the user's code, and lists the shown frames of its
// largest block. Several files (a folder, a pattern): a job of one rank a file, each rank's groups,
// then the groups of all ranks side by side.
import { InputError } from '../../services/input-error.ts'
import { recordedLayout, topGroups, TOP_GROUPINGS, type LayoutOnEvents, type TopAt, type TopBy, type TopResult } from '../../services/analysis/top.ts'
import { replayInput } from '../../services/replay/replay-input.ts'
import { parseStrategySpecs } from '../../services/replay/strategy-spec.ts'
import { formatBytes, formatDuration } from '../../services/units.ts'
import { expandInputs, isOneFile, rankFiles, type RankedFile } from '../../services/whatif/job.ts'
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

interface TopArguments {
  at: TopAt
  by: TopBy
  spec: ReturnType<typeof parseStrategySpecs> | undefined
}

export async function topCommand(io: Io, args: string | string[], options: TopCommandOptions): Promise<void> {
  const given = typeof args === 'string' ? [args] : args
  const at = parseAt(options.at)
  const by = parseBy(options.by)
  const limit = parseCount('--limit', options.limit, 20)
  const shownFrames = parseCount('--frames', options.frames, 3)
  // A strategy is checked before the file is read, so a bad one fails first.
  const spec = options.strategy === undefined || options.strategy === 'recorded' ? undefined : parseStrategySpecs([options.strategy], '--strategy')
  if (spec && spec.length !== 1) throw new OptionError('--strategy', `'${options.strategy}': give one strategy (${spec.length} given)`)
  // One file: its groups. Several, a folder or a pattern: a job of one rank a file (whatif/job.ts).
  if (!(await isOneFile(given))) return topJobCommand(io, await expandInputs(given), options, { at, by, spec }, limit, shownFrames)
  const file = given[0]!
  const result = await topOf(io, file, options, { at, by, spec })
  if (options.json) {
    printJson(io, topJson(file, result))
    return
  }
  io.stdout.write(render(file, result, limit, shownFrames))
}

/** One file's groups: opened, laid out as asked, grouped; the file is let go when this returns. */
async function topOf(io: Io, file: string, options: TopCommandOptions, args: TopArguments): Promise<TopResult> {
  const { at, by, spec } = args
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
  return topGroups(input.trace, { at, by, file, stored: input.strategies, ...(layout && { layout }) })
}

function topJson(file: string, result: TopResult) {
  return {
    file,
    at: result.at,
    by: result.by,
    counted: result.counted,
    groups: result.groups.map((g) => ({ key: g.key, bytes: g.bytes, blocks: g.blocks, share: g.share, frames: g.frames, event: g.largestEvent })),
  }
}

interface RankTop extends RankedFile {
  result: TopResult
}

/** A group over every rank: its bytes on each (0 where a rank has none), their sum, the rank holding the most (null: every rank alike). */
export interface TopJobGroup {
  key: string
  bytes: number
  byRank: { rank: number; bytes: number }[]
  most: number | null
}

/** The ranks' groups side by side, matched by key, the largest over all ranks first. */
function jobGroups(ranks: readonly RankTop[]): TopJobGroup[] {
  const byKey = new Map<string, number[]>()
  ranks.forEach((r, i) => {
    for (const g of r.result.groups) {
      let list = byKey.get(g.key)
      if (!list) byKey.set(g.key, (list = new Array<number>(ranks.length).fill(0)))
      list[i] = list[i]! + g.bytes
    }
  })
  const groups = [...byKey].map(([key, list]) => {
    const most = list.reduce((best, b, i) => (b > list[best]! ? i : best), 0)
    const alike = list.every((b) => b === list[0])
    return {
      key,
      bytes: list.reduce((a, b) => a + b, 0),
      byRank: ranks.map((r, i) => ({ rank: r.rank, bytes: list[i]! })),
      most: alike ? null : ranks[most]!.rank,
    }
  })
  return groups.sort((a, b) => b.bytes - a.bytes || a.key.localeCompare(b.key))
}

/**
 * `top R0 R1 ...` (or a folder, or a pattern): each rank's groups, one rank open at a time, then
 * the groups of all ranks side by side: the largest over all ranks, each rank's bytes, the rank
 * that holds the most.
 */
async function topJobCommand(io: Io, files: string[], options: TopCommandOptions, args: TopArguments, limit: number, shownFrames: number): Promise<void> {
  const ranked = await rankFiles(files)
  const ranks: RankTop[] = []
  for (const r of ranked) ranks.push({ ...r, result: await topOf(io, r.file, options, args) })
  const groups = jobGroups(ranks)
  if (options.json) {
    printJson(io, {
      ranks: ranks.map((r) => {
        const { file, ...rest } = topJson(r.file, r.result)
        return { file, rank: r.rank, rankFrom: r.rankFrom, ...rest }
      }),
      differs: { by: args.by, groups },
    })
    return
  }
  const out: string[] = []
  for (const r of ranks) {
    out.push(`rank ${r.rank}: ${r.file} (rank from ${rankFromWords(r.rankFrom)})`)
    for (const line of render(r.file, r.result, limit, shownFrames).trimEnd().split('\n')) out.push(line === '' ? '' : `  ${line}`)
    out.push('')
  }
  const shown = groups.slice(0, limit)
  out.push(`what differs: the largest groups over all ${ranks.length} ranks, by ${args.by}, each rank's bytes at its own ${momentWords(args.at)}`)
  if (shown.length === 0) out.push('  nothing was live on any rank')
  else {
    const header = [...ranks.map((r) => `rank ${r.rank}`), 'most']
    const cell = (g: TopJobGroup) => [...g.byRank.map((b) => (b.bytes === 0 ? '-' : formatBytes(b.bytes))), g.most === null ? 'alike' : `rank ${g.most}`]
    const all = [...ranks.map((r) => formatBytes(r.result.at.bytes)), '']
    const rows = shown.map(cell)
    const w = header.map((h, c) => Math.max(h.length, all[c]!.length, ...rows.map((row) => row[c]!.length)))
    const line = (cells: string[], key: string) => `  ${cells.map((c, i) => c.padStart(w[i]!)).join('  ')}  ${key}`
    out.push(line(header, args.by === 'frame' ? 'allocated at (first frame of your code)' : args.by))
    shown.forEach((g, i) => out.push(line(rows[i]!, g.key)))
    out.push(line(all, '(all live)'))
    if (groups.length > limit) out.push(`  … ${groups.length - limit} more group${groups.length - limit === 1 ? '' : 's'} (--limit, or --json for all)`)
  }
  io.stdout.write(`${out.join('\n')}\n`)
}

function rankFromWords(from: RankedFile['rankFrom']): string {
  return from === 'stats' ? 'the stats beside it' : from === 'name' ? 'its name' : 'its place among the files'
}

function momentWords(at: TopAt): string {
  return at.kind === 'peak' ? 'peak' : at.kind === 'oom' ? 'first out-of-memory' : `event ${formatValue(at.event, 'count')}`
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
