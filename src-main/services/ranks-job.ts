// A job of many ranks opened in the app (docs/architecture.md, "A job of many ranks"): the files a
// page hands over (staged, each written to the page's folder as it arrives), each rank read once
// for its figures and its memory over time (rankSummary) and let go before the next is read, so
// the host holds one rank's input at a time however many ranks the job has; then, on request, one
// rank opened as a trace like any file, and the what-if lab run over every rank (runJobWhatif).
import { randomUUID } from 'node:crypto'
import { rmSync } from 'node:fs'
import { mkdtemp, rename, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { basename, join } from 'node:path'

import { ApiError } from '../../src-shared/api-error.ts'
import { sweepLayout } from '../../src-shared/layout-accounting.ts'
import {
  RANK_SERIES_BUCKETS,
  bucketSeries,
  worstRankOf,
  type RankSeries,
  type RankSummary,
  type RanksSummary,
  type RanksWhatifReport,
} from '../../src-shared/ranks.ts'
import { describeTrace } from './analysis/inspect.ts'
import { floorOf } from './analysis/floor.ts'
import { oomSummary } from './analysis/oom.ts'
import { recordedLayout } from './analysis/top.ts'
import { openInput, type OpenedInput } from './import/open-input.ts'
import type { JobContext } from './jobs.ts'
import { EventKind, type RequestTrace } from './trace/model.ts'
import { InputError } from './input-error.ts'
import { isBesideInput, jobReport, rankFiles, runJobWhatif, type JobReport, type RankedFile } from './whatif/job.ts'
import { readRankResults } from './whatif/rank-results.ts'
import type { WhatifOptions } from './whatif/whatif.ts'

/** Files a page may stage at once (a job of 1,000 ranks is the cluster's: scripts/cluster/). */
export const MAX_STAGED_PER_PAGE = 256

interface Staged {
  path: string
  name: string
  /** A file the user has (a job the host was started with), read where it is: never deleted. */
  inPlace?: true
}

interface OpenedJob {
  page: string
  files: (RankedFile & { name: string })[]
}

/** The figures of one rank's input the strip shows (RankSummary), computed in one pass over its events. */
export function rankSummary(input: Pick<OpenedInput, 'trace' | 'strategies' | 'kind'>, ranked: Omit<RankedFile, 'file'> & { name: string }): RankSummary {
  const trace = input.trace
  const d = describeTrace(trace, input.strategies)
  const { series, peakBytes } = memorySeries(trace, input)
  const oom = oomSummary(trace, input.strategies)
  return {
    rank: ranked.rank,
    rankFrom: ranked.rankFrom,
    name: ranked.name,
    kind: input.kind,
    events: d.events,
    durationNs: d.durationNs,
    peakBytes,
    series,
    ...(d.gpu !== undefined && { gpu: d.gpu }),
    ...(oom && { oom, oomNs: trace.events.time[oom.event]! }),
    floorBytes: floorOf(trace).peakLiveRoundedBytes,
  }
}

/** The recorded layout's reserved bytes over time (the one accounting), else the allocator's recorded reserved series, else the bytes live. */
function memorySeries(trace: RequestTrace, input: Pick<OpenedInput, 'strategies'>): { series: RankSeries; peakBytes: number } {
  const e = trace.events
  const n = e.kind.length
  const after = new Float64Array(n)
  const layout = recordedLayout(trace, input.strategies)
  let of: RankSeries['of']
  let peakBytes = 0
  if (layout) {
    of = 'reserved'
    // Reserved after each request event: the last layout event of each sets it, carried forward.
    let k = 0
    let reserved = 0
    const swept = sweepLayout(layout, {
      each: (j, account) => {
        const event = layout.event[j]!
        for (; k < event && k < n; k++) after[k] = reserved
        reserved = account.reserved
      },
    })
    for (; k < n; k++) after[k] = reserved
    // The figure itself from the sweep, as every reader takes it (after[] is its carrier for the strip).
    peakBytes = swept.peakReserved
  } else if (trace.recordedReserved) {
    // No layout, but the allocator's own reserved bytes (a profiler trace's Total Reserved): those.
    of = 'reserved'
    const { index, bytes } = trace.recordedReserved
    let p = -1
    for (let i = 0; i < n; i++) {
      while (p + 1 < index.length && index[p + 1]! <= i) p++
      after[i] = p < 0 ? 0 : bytes[p]!
      if (after[i]! > peakBytes) peakBytes = after[i]!
    }
  } else {
    of = 'allocated'
    const sizes = new Map<number, number>()
    let live = 0
    for (let i = 0; i < n; i++) {
      if (e.kind[i] === EventKind.alloc) {
        sizes.set(e.id[i]!, e.size[i]!)
        live += e.size[i]!
      } else if (e.kind[i] === EventKind.free) {
        live -= sizes.get(e.id[i]!) ?? 0
        sizes.delete(e.id[i]!)
      }
      after[i] = live
      if (live > peakBytes) peakBytes = live
    }
  }
  return { series: { of, ...bucketSeries(e.time, (i) => after[i]!, RANK_SERIES_BUCKETS) }, peakBytes }
}

/** The lab's report over every rank as the page reads it. */
export function ranksWhatifReport(report: JobReport, names: ReadonlyMap<number, string>, replays: number, elapsedMs: number): RanksWhatifReport {
  return {
    ranks: report.ranks.map((r) => ({ rank: r.rank, name: names.get(r.rank) ?? basename(r.file), limit: r.limit, recordedConf: r.recordedConf })),
    worstRank: report.worstRank,
    configs: report.configs.map(({ key: _key, ...c }) => c),
    replays,
    elapsedMs,
  }
}

/**
 * The session's jobs of many ranks: files staged per page, the jobs opened from them, and the
 * work that reads them. A page has one job at a time: opening another deletes the files of the last.
 */
export class RankJobs {
  private readonly staged = new Map<string, Staged & { page: string }>()
  private readonly folders = new Map<string, Promise<string>>()
  private readonly opened = new Map<string, OpenedJob>()

  /** The folders made, for the process's exit to remove (the desktop app's one page never closes). */
  private readonly made = new Set<string>()

  constructor(private readonly stagingRoot = tmpdir()) {}

  private folder(page: string): Promise<string> {
    let f = this.folders.get(page)
    if (!f) {
      f = mkdtemp(join(this.stagingRoot, 'vramscope-ranks-')).then((made) => {
        if (this.made.size === 0) process.once('exit', () => this.removeMade())
        this.made.add(made)
        return made
      })
      this.folders.set(page, f)
    }
    return f
  }

  private removeMade(): void {
    for (const f of this.made) rmSync(f, { recursive: true, force: true })
  }

  private checkRoom(page: string): void {
    let n = 0
    for (const s of this.staged.values()) if (s.page === page) n++
    if (n >= MAX_STAGED_PER_PAGE)
      throw new ApiError(
        'BAD_INPUT',
        `a page stages at most ${MAX_STAGED_PER_PAGE} files for a job; for more ranks, run \`vramscope whatif\` per rank and merge with \`vramscope ranks\``,
      )
  }

  /** Writes a file's bytes to the page's folder (the desktop app's drops); its key names it in `open`. */
  async stage(name: string, bytes: Uint8Array, page: string): Promise<{ key: string }> {
    this.checkRoom(page)
    const path = join(await this.folder(page), name)
    await writeFile(path, bytes)
    return { key: this.keep(path, name, page) }
  }

  /** Takes a file a host has written (a streamed upload) into the page's folder: the key names it. */
  async adopt(written: string, name: string, page: string): Promise<{ key: string }> {
    try {
      this.checkRoom(page)
      const path = join(await this.folder(page), name)
      await rename(written, path)
      return { key: this.keep(path, name, page) }
    } finally {
      await rm(join(written, '..'), { recursive: true, force: true })
    }
  }

  /** Stages a file the user has where it is (the files a host was started with): never moved or deleted. */
  stageInPlace(path: string, name: string, page: string): string {
    this.checkRoom(page)
    return this.keep(path, name, page, true)
  }

  private keep(path: string, name: string, page: string, inPlace = false): string {
    // A file of the same name staged again replaces the first.
    for (const [key, s] of this.staged) if (s.path === path) this.staged.delete(key)
    const key = randomUUID()
    this.staged.set(key, { path, name, page, ...(inPlace && { inPlace }) })
    return key
  }

  /**
   * Starts reading the staged files `keys` as one job: each file's rank (rankFiles: the stats
   * beside it, else its name, else its place), then each rank in turn, only one rank's input held
   * at a time. The job's result is a RanksSummary (`ranks:result`).
   */
  open(
    keys: readonly string[],
    page: string,
    start: (phase: string, work: (job: JobContext) => Promise<RanksSummary>) => { jobId: string },
  ): { jobId: string } {
    const files: Staged[] = []
    for (const key of keys) {
      const s = this.staged.get(key)
      if (!s || s.page !== page) throw new ApiError('NOT_FOUND', `ranks: no staged file ${JSON.stringify(key)} (stage each file with ranks:stage first)`)
      // Files the user chose are read for what their content is (a profiler's .json.gz, an Nsight
      // export): only what stands beside the inputs is left out.
      if (!isBesideInput(s.name)) files.push(s)
    }
    if (files.length === 0) throw new ApiError('BAD_INPUT', 'ranks: none of the files is a snapshot, trace file or log (stats files come beside them)')
    // The page's last job is over: its staged files that this one does not name (a page names
    // every file it staged for a job, the stats beside the snapshots too) go.
    for (const [id, job] of this.opened) if (job.page === page) this.opened.delete(id)
    for (const [key, s] of this.staged)
      if (s.page === page && !keys.includes(key)) {
        this.staged.delete(key)
        if (!s.inPlace) void rm(s.path, { force: true })
      }
    const names = new Map(files.map((f) => [f.path, f.name]))
    return start(`opening ${files.length} ranks`, async (job) => {
      const results = await this.asResults(files)
      if (results) return { ranksId: randomUUID(), ...results }
      const ranked = await rankFiles(files.map((f) => f.path))
      const ranks: RankSummary[] = []
      for (const [i, r] of ranked.entries()) {
        const name = names.get(r.file)!
        job.progress(`opening rank ${r.rank} (${i + 1} of ${ranked.length}): ${name}`, i / ranked.length)
        let input: OpenedInput
        try {
          input = await openInput(r.file, {
            signal: job.signal,
            onProgress: (p) =>
              job.progress(
                `${p.phase} rank ${r.rank} (${i + 1} of ${ranked.length}): ${name}`,
                (i + (p.bytesTotal > 0 ? p.bytesDone / p.bytesTotal : 0)) / ranked.length,
              ),
          })
        } catch (e) {
          if (e instanceof Error) e.message = e.message.split(r.file).join(name)
          throw e
        }
        ranks.push(rankSummary(input, { rank: r.rank, rankFrom: r.rankFrom, name }))
        job.signal.throwIfAborted()
      }
      const ranksId = randomUUID()
      this.opened.set(ranksId, { page, files: ranked.map((r) => ({ ...r, name: names.get(r.file)! })) })
      return {
        ranksId,
        from: 'files',
        ranks,
        worstRank: worstRankOf(ranks) ?? 0,
        oomRanks: ranks.filter((r) => r.oom).map((r) => r.rank),
      }
    })
  }

  /**
   * The job's summary where every file is a rank's `whatif FILE --json` output (a cluster's
   * tasks'): the report merged as `vramscope ranks` merges it, each rank's figures from its
   * recorded row. Undefined where the files are not such outputs (snapshots, JSON traces); an
   * output that is damaged is named.
   */
  private async asResults(files: readonly Staged[]): Promise<Omit<RanksSummary, 'ranksId'> | undefined> {
    if (!files.every((f) => f.name.toLowerCase().endsWith('.json'))) return undefined
    let read: Awaited<ReturnType<typeof readRankResults>>
    try {
      read = await readRankResults(files.map((f) => f.path))
    } catch (e) {
      // Not a what-if output at all: the files are snapshots or traces, read as such.
      if (e instanceof InputError && /has no "configs" array|is not a JSON object|is not JSON|is over the|bytes, over the/.test(e.problem)) return undefined
      if (e instanceof Error) for (const f of files) e.message = e.message.split(f.path).join(f.name)
      throw e
    }
    const name = new Map(files.map((f) => [f.path, f.name]))
    const names = new Map([...read.fileOf].map(([rank, path]) => [rank, name.get(path)!]))
    const report = jobReport(read.results)
    const ranks: RankSummary[] = read.results.map((r) => {
      const row = r.rows.find((x) => x.kind === 'recorded') ?? r.rows.find((x) => x.kind === 'pytorch' && x.conf === '') ?? r.rows[0]
      return {
        rank: r.rank,
        rankFrom: r.rankFrom,
        name: names.get(r.rank)!,
        kind: 'whatif-result',
        events: r.events,
        durationNs: 0,
        peakBytes: row?.peakReserved ?? 0,
        series: { of: 'reserved', startNs: 0, endNs: 0, max: [] },
        ...(r.device.name !== undefined && { gpu: r.device.name }),
        floorBytes: r.floor?.peakLiveRoundedBytes ?? 0,
      }
    })
    return {
      from: 'results',
      report: ranksWhatifReport(report, names, 0, 0),
      ranks,
      worstRank: report.worstRank,
      oomRanks: [],
    }
  }

  /** An opened job; NOT_FOUND saying why where there is none. */
  require(ranksId: string): OpenedJob {
    const job = this.opened.get(ranksId)
    if (!job) throw new ApiError('NOT_FOUND', `ranks: no open job ${JSON.stringify(ranksId)} (another job was opened since, or its page closed)`)
    return job
  }

  /** The file of one rank of an opened job, to open as a trace. */
  file(ranksId: string, rank: number): { path: string; name: string } {
    const job = this.require(ranksId)
    const f = job.files.find((r) => r.rank === rank)
    if (!f) throw new ApiError('NOT_FOUND', `ranks: the job has no rank ${rank} (its ranks: ${job.files.map((r) => r.rank).join(', ')})`)
    return { path: f.file, name: f.name }
  }

  /** The what-if lab over every rank of an opened job, one rank's input held at a time. */
  async whatif(ranksId: string, options: Omit<WhatifOptions, 'onProgress' | 'signal'>, job: JobContext): Promise<RanksWhatifReport> {
    const opened = this.require(ranksId)
    const started = Date.now()
    const n = opened.files.length
    const done = new Array<number>(n).fill(0)
    const report = await runJobWhatif(
      opened.files,
      (file) => openInput(file, { signal: job.signal }),
      { ...options, signal: job.signal },
      (r, i, p) => {
        done[i] = p.done
        job.progress(`what-if: rank ${r.rank} (${i + 1} of ${n}), ${p.done} of about ${p.total} replays · ${p.label}`, Math.min(0.99, (i + p.fraction) / n))
      },
    )
    const replays = done.reduce((a, b) => a + b, 0)
    return ranksWhatifReport(report, new Map(opened.files.map((f) => [f.rank, f.name])), replays, Date.now() - started)
  }

  /** A page went: its staged files and jobs with it. */
  async closePage(page: string): Promise<void> {
    for (const [key, s] of this.staged) if (s.page === page) this.staged.delete(key)
    for (const [id, job] of this.opened) if (job.page === page) this.opened.delete(id)
    const folder = this.folders.get(page)
    this.folders.delete(page)
    if (folder) {
      const path = await folder
      this.made.delete(path)
      await rm(path, { recursive: true, force: true }).catch(() => {})
    }
  }
}
