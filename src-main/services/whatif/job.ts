// A job of many ranks (one snapshot per rank, as distributed training writes them, or the folder
// `vramscope record --pytorch` fills under torchrun): which files, which rank each is and where
// that came from, and the what-if lab over every rank, one rank open at a time, each
// configuration's rows of all ranks put together: does it fit every rank, the smallest device that
// fits them all, the worst rank. The CLI's `whatif FILE FILE...` prints it.
import { readFile, readdir, stat } from 'node:fs/promises'
import { basename, dirname, extname, join, resolve } from 'node:path'

import type { Device } from '../../../src-shared/device.ts'
import type { WhatifFloor, WhatifReportRow } from '../../../src-shared/whatif-report.ts'
import { InputError } from '../input-error.ts'
import { statsPathOf } from '../import/open-input.ts'
import type { OpenedInput } from '../import/open-input.ts'
import { JOB_FILE } from '../record/pytorch.ts'
import { runWhatif, type WhatifOptions } from './whatif.ts'

/** What a folder's files may be: snapshots, trace files, RMM logs; not the stats and lists beside them. */
const INPUT_EXTENSIONS = new Set(['.pickle', '.pkl', '.pt', '.json', '.vramscope', '.arrow', '.csv'])
const NOT_INPUTS = /(\.stats\.json|^job\.json|\.driver\.vramscope|\.tmp\d+)$/

/** Whether a file named `name` is a rank's input (a snapshot, trace or log), not a stats file or list beside one. */
export function isRankInput(name: string): boolean {
  return INPUT_EXTENSIONS.has(extname(name).toLowerCase()) && !isBesideInput(name)
}

/** Whether a file named `name` is what stands beside the inputs (record --pytorch's stats and lists), not an input. */
export function isBesideInput(name: string): boolean {
  return NOT_INPUTS.test(name)
}

function natural(a: string, b: string): number {
  return a.localeCompare(b, undefined, { numeric: true })
}

function globToRegExp(pattern: string): RegExp {
  let out = ''
  for (const c of pattern) out += c === '*' ? '[^/]*' : c === '?' ? '[^/]' : c.replace(/[.+^${}()|[\]\\]/g, '\\$&')
  return new RegExp(`^${out}$`)
}

async function kindOf(path: string): Promise<'file' | 'folder' | undefined> {
  try {
    const s = await stat(path)
    return s.isDirectory() ? 'folder' : 'file'
  } catch {
    return undefined
  }
}

/**
 * The files the arguments name, in order: a file as it is; a folder's inputs (record --pytorch's
 * job.json lists them; else every snapshot, trace or log in it, natural order, a process's
 * NAME.oom.pickle left out where NAME.pickle holds its whole run); a pattern with * or ? that
 * names no file, the files of its folder it matches. Each argument must give at least one.
 */
export async function expandInputs(args: readonly string[]): Promise<string[]> {
  const out: string[] = []
  for (const arg of args) {
    const kind = await kindOf(arg)
    if (kind === 'file') {
      out.push(arg)
      continue
    }
    if (kind === 'folder') {
      out.push(...(await folderInputs(arg)))
      continue
    }
    if (/[*?]/.test(basename(arg)) && !/[*?]/.test(dirname(arg))) {
      const dir = dirname(arg)
      const re = globToRegExp(basename(arg))
      const matched = (await readdir(dir).catch(() => [] as string[])).filter((f) => re.test(f)).sort(natural)
      if (matched.length === 0) throw new InputError(arg, '', 'matches no file')
      out.push(...matched.map((f) => join(dir, f)))
      continue
    }
    throw new InputError(arg, '', 'no such file or folder')
  }
  const seen = new Set<string>()
  for (const f of out) {
    const key = resolve(f)
    if (seen.has(key)) throw new InputError(f, '', 'is given twice')
    seen.add(key)
  }
  return out
}

/**
 * Whether the arguments are one file, as a command of one file takes it: a single argument that is
 * no folder and no pattern matching files (a missing file stays the one-file command's to refuse,
 * in its own words).
 */
export async function isOneFile(args: readonly string[]): Promise<boolean> {
  if (args.length !== 1) return false
  const kind = await kindOf(args[0]!)
  return kind === 'file' || (kind === undefined && !/[*?]/.test(basename(args[0]!)))
}

async function folderInputs(dir: string): Promise<string[]> {
  try {
    const job = JSON.parse(await readFile(join(dir, JOB_FILE), 'utf8')) as { processes?: { snapshot?: string | null }[] }
    const listed = (job.processes ?? []).map((p) => p.snapshot).filter((s): s is string => typeof s === 'string' && !s.includes('/'))
    if (listed.length > 0) return listed.map((s) => join(dir, s))
  } catch {
    // no job.json: the folder's inputs
  }
  const files = (await readdir(dir)).filter(isRankInput).sort(natural)
  const names = new Set(files)
  const inputs = files.filter((f) => !(f.endsWith('.oom.pickle') && names.has(f.replace(/\.oom\.pickle$/, '.pickle'))))
  if (inputs.length === 0) throw new InputError(dir, '', 'holds no snapshot, trace file or RMM log')
  return inputs.map((f) => join(dir, f))
}

export interface RankedFile {
  file: string
  rank: number
  /** Where the rank came from: the stats beside the file (record --pytorch), the file's name, or its place among the files given. */
  rankFrom: 'stats' | 'name' | 'order'
}

/** The rank a file's name gives: rank3, rank_3, rank-3, r3 (as a word), else the name's last number. */
export function rankInName(file: string): number | undefined {
  const stem = basename(file).replace(/(\.oom)?\.[^.]+$/, '')
  const m = /(?:^|[^a-z])(?:rank|r)[_-]?(\d+)(?![0-9])/i.exec(stem) ?? /(\d+)(?!.*\d)/.exec(stem)
  if (!m) return undefined
  const n = Number(m[1])
  return Number.isSafeInteger(n) ? n : undefined
}

async function rankInStats(file: string): Promise<number | undefined> {
  try {
    const stats = JSON.parse(await readFile(statsPathOf(file), 'utf8')) as { rank?: unknown }
    return typeof stats.rank === 'number' && Number.isSafeInteger(stats.rank) && stats.rank >= 0 ? stats.rank : undefined
  } catch {
    return undefined
  }
}

/**
 * Each file's rank, never guessed silently: from the stats beside it, else from its name, else
 * its place in the list; one rule for all the files (a mixture would collide), the first that
 * gives every file a rank of its own. Two files of one rank are refused, naming both.
 */
export async function rankFiles(files: readonly string[]): Promise<RankedFile[]> {
  const fromStats = await Promise.all(files.map(rankInStats))
  const fromName = files.map(rankInName)
  const distinct = (ranks: (number | undefined)[]) => ranks.every((r) => r !== undefined) && new Set(ranks).size === ranks.length
  let ranks: number[]
  let rankFrom: RankedFile['rankFrom']
  if (distinct(fromStats)) [ranks, rankFrom] = [fromStats as number[], 'stats']
  else if (distinct(fromName)) [ranks, rankFrom] = [fromName as number[], 'name']
  else {
    const clash = (list: (number | undefined)[]) => {
      for (let i = 0; i < list.length; i++)
        for (let j = i + 1; j < list.length; j++) if (list[i] !== undefined && list[i] === list[j]) return [files[i], files[j], list[i]] as const
      return undefined
    }
    const both = clash(fromStats) ?? clash(fromName)
    if (both) throw new InputError(both[1]!, '', `says it is rank ${both[2]}, as ${both[0]} does: give each rank's file once`)
    ;[ranks, rankFrom] = [files.map((_, i) => i), 'order']
  }
  return files.map((file, i) => ({ file, rank: ranks[i]!, rankFrom })).sort((a, b) => a.rank - b.rank)
}

/** What the job reads of a lab row. */
export type LabRow = Pick<
  WhatifReportRow,
  'rank' | 'notRanked' | 'conf' | 'kind' | 'label' | 'line' | 'peakReserved' | 'peakAllocated' | 'segments' | 'failures' | 'smallestFittingBytes'
>

/** One rank's lab result, as the job keeps it (the rows, not the trace). */
export interface RankResult {
  file: string
  rank: number
  rankFrom: RankedFile['rankFrom']
  events: number
  device: Device
  deviceBytes: number
  limit: { bytes: number | null; source: 'option' | 'implied' | 'none' }
  recordedConf: string | null
  /** The rank's floor (null: a `whatif --json` written before the floor was reported). */
  floor: WhatifFloor | null
  rows: LabRow[]
}

/** A configuration's reason for a rank whose lab had no such row. */
export const NOT_RUN = 'not run on this rank'

export interface JobConfig {
  /** Rows of every rank are matched by this: 'recorded', or the kind and configuration. */
  key: string
  conf: string
  kind: WhatifReportRow['kind']
  label: string
  line: string | null
  /** 1 = best for the job; 0: not ranked on some rank. */
  rank: number
  fitsEveryRank: boolean
  /** The smallest limit that runs every rank with no failure: the largest of theirs; null where one has none. */
  smallestFittingBytes: number | null
  /** The rank that needs the most (its smallest fitting limit, else its peak reserved). */
  worstRank: number
  perRank: { rank: number; peakReserved: number; failures: number; smallestFittingBytes: number | null; notRanked: string | null }[]
}

export interface JobReport {
  ranks: RankResult[]
  /** The rank whose recorded run reserved the most (the recorded row; else PyTorch's defaults; else the first row). */
  worstRank: number
  configs: JobConfig[]
}

// A strategy row's conf is its spec, sized to each rank's trace (a buddy pool's size): its label names it across ranks.
const rowKey = (r: LabRow) => (r.kind === 'recorded' ? 'recorded' : r.kind === 'strategy' ? `strategy:${r.label}` : `${r.kind}:${r.conf}`)

/** Every configuration's rows of all ranks together, ranked: fitting every rank first, then by the smallest device that fits them all, then by the worst peak reserved. */
export function jobReport(ranks: readonly RankResult[]): JobReport {
  const keys: string[] = []
  const byKey = new Map<string, (LabRow | undefined)[]>()
  ranks.forEach((r, i) => {
    for (const row of r.rows) {
      const key = rowKey(row)
      let list = byKey.get(key)
      if (!list) {
        byKey.set(key, (list = new Array(ranks.length).fill(undefined)))
        keys.push(key)
      }
      list[i] = row
    }
  })
  const configs: JobConfig[] = []
  for (const key of keys) {
    const rows = byKey.get(key)!
    const first = rows.find((r) => r !== undefined)!
    const perRank = ranks.map((r, i) => {
      const row = rows[i]
      return {
        rank: r.rank,
        peakReserved: row?.peakReserved ?? 0,
        failures: row?.failures ?? 0,
        smallestFittingBytes: row?.smallestFittingBytes ?? null,
        notRanked: row === undefined ? NOT_RUN : (row.notRanked ?? null),
      }
    })
    const ranked = perRank.every((p) => p.notRanked === null)
    const needs = (p: (typeof perRank)[number]) => p.smallestFittingBytes ?? p.peakReserved
    const worst = perRank.reduce((a, b) => (needs(b) > needs(a) ? b : a))
    configs.push({
      key,
      conf: first.conf,
      kind: first.kind,
      label: first.label,
      line: first.line ?? null,
      rank: ranked ? 1 : 0,
      fitsEveryRank: ranked && perRank.every((p) => p.failures === 0),
      smallestFittingBytes: perRank.every((p) => p.smallestFittingBytes !== null) ? Math.max(...perRank.map((p) => p.smallestFittingBytes!)) : null,
      worstRank: worst.rank,
      perRank,
    })
  }
  const maxPeak = (c: JobConfig) => Math.max(...c.perRank.map((p) => p.peakReserved))
  configs.sort(
    (a, b) =>
      b.rank - a.rank ||
      Number(b.fitsEveryRank) - Number(a.fitsEveryRank) ||
      (a.smallestFittingBytes ?? Infinity) - (b.smallestFittingBytes ?? Infinity) ||
      maxPeak(a) - maxPeak(b),
  )
  let n = 0
  for (const c of configs) if (c.rank > 0) c.rank = ++n
  const reference = configs.find((c) => c.key === 'recorded') ?? configs.find((c) => c.kind === 'pytorch' && c.conf === '') ?? configs[0]
  const worstRank = reference ? reference.perRank.reduce((a, b) => (b.peakReserved > a.peakReserved ? b : a)).rank : (ranks[0]?.rank ?? 0)
  return { ranks: [...ranks], worstRank, configs }
}

/**
 * The lab over every rank, one open at a time (`open` reads one file and the rank's input is let
 * go before the next is opened), with the same options for each; `onProgress` hears each rank's
 * lab progress with the rank's place. An error of a rank's lab is thrown as it is, its file in
 * `failedFile` for the caller to name.
 */
export async function runJobWhatif(
  ranked: readonly RankedFile[],
  open: (file: string) => Promise<Pick<OpenedInput, 'trace' | 'strategies'>>,
  options: Omit<WhatifOptions, 'onProgress'>,
  onProgress?: (rank: RankedFile, index: number, progress: Parameters<NonNullable<WhatifOptions['onProgress']>>[0]) => void,
): Promise<JobReport> {
  const results: RankResult[] = []
  for (const [i, r] of ranked.entries()) {
    let result
    try {
      result = await runWhatif(await open(r.file), { ...options, ...(onProgress && { onProgress: (p) => onProgress(r, i, p) }) })
    } catch (e) {
      if (e instanceof Error) Object.assign(e, { failedFile: r.file })
      throw e
    }
    results.push({
      file: r.file,
      rank: r.rank,
      rankFrom: r.rankFrom,
      events: result.events,
      device: result.device,
      deviceBytes: result.deviceBytes,
      limit: result.limit,
      recordedConf: result.recordedConf ?? null,
      floor: result.floor,
      rows: result.rows,
    })
  }
  return jobReport(results)
}
