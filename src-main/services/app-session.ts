// The app's API (src-shared/contract.ts) over the services, for any host: the channel table
// (src-main/ipc/session-handlers.ts) gives the dispatcher one handler per channel, calling the
// methods here, and the web host and the desktop app's worker process carry calls to it. It keeps
// the opened traces of one session (their registry: traces.ts); long work (opening, replaying,
// the what-if lab, recording) runs as a job of its registry (jobs.ts), with progress and cancel,
// so no host ever waits on it; the bundles it answers with are packed by src-shared/wire.ts.
// Nothing here knows about HTTP, Electron or the transports (test/unit/architecture.test.ts).
import { randomUUID } from 'node:crypto'
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises'
import { homedir, tmpdir } from 'node:os'
import { basename, dirname, join, sep } from 'node:path'

import type {
  AppInfo,
  Bundle,
  RecentFile,
  RecordPytorchRequest,
  RecordRequest,
  ReplayRequest,
  SampleInfo,
  JobStatus,
  OpeningJobs,
  TraceSummary,
  RanksWhatifRequest,
  WhatifRequest,
  WorkloadChoice,
} from '../../src-shared/contract.ts'
import { firstReplay, openingFallbackEvent, restReplay } from '../../src-shared/opening.ts'
import { ConfError, confModel, parsePytorchConf, shownValue } from '../../src-shared/pytorch-conf.ts'
import { reservedPeakEvent } from '../../src-shared/layout-accounting.ts'
import { rowReplay, type WhatifReport } from '../../src-shared/whatif-report.ts'
import { bucketStepSeries, requestedSeries, SUMMARY_BUCKETS } from '../../src-shared/requested.ts'
import type { RecordedSeries } from './trace/model.ts'
import { packReplay, packTraceData, previewOf, strategyBundle, type StrategyToSend } from '../../src-shared/wire.ts'
import { ApiError } from '../../src-shared/api-error.ts'
import { listStrategies } from './replay/allocators.ts'
import { loadNative } from '../native.ts'
import { splitCommandLine } from './record/command-line.ts'
import { interceptLibraryIfBuilt, nvidiaDriverPresent } from './record/program.ts'
import { programStem, recordingFolderName, recordPytorch } from './record/pytorch.ts'
import { recordWorkloadInChild, recordWorkloadInProcess, type WorkloadSpec } from './record/workload.ts'
import { describeTrace } from './analysis/inspect.ts'
import { RankJobs } from './ranks-job.ts'
import type { RanksSummary, RanksWhatifReport } from '../../src-shared/ranks.ts'
import { floorOf } from './analysis/floor.ts'
import { oomSummary } from './analysis/oom.ts'
import { ENDED_KEPT, JobRegistry, type JobContext, type JobLimits } from './jobs.ts'
import { DEFAULT_PAGE, MAX_TRACES_OPEN, MAX_TRACES_PER_PAGE, TraceRegistry, type OpenedTrace } from './traces.ts'
import { openInput } from './import/open-input.ts'
import { placementFor, replayServingOoms, replaySent, servesOomRequests, sizedUnlessRecorded, startFor, withRecordedSettings } from './replay/replay-input.ts'
import { windowOpenState } from './replay/initial-state.ts'
import { replayTrace, type ReplayTarget } from './replay/replay.ts'
import { parseStrategySpecs } from './replay/strategy-spec.ts'
import { parseByteSize } from './units.ts'
import { deviceOfInput } from './replay/device.ts'
import { DEFAULT_DEVICE_BYTES } from './replay/device.ts'
import { runWhatif, WhatifError, type WhatifResult } from './whatif/whatif.ts'

export const PRIVACY_STATEMENT = 'Nothing leaves this machine: traces are read and replayed locally, and vramscope makes no network requests of its own.'

/**
 * Strategies replayed when a trace is opened: the PyTorch policy, power-of-two caching, a slab, a
 * buddy allocator (its pools sized from the trace: replay/sized-defaults.ts) and a growable region.
 */
export const DEFAULT_STRATEGIES = 'caching:preset=pytorch,caching:preset=pow2,slab,buddy,vmm_growable'

/** A finished replay job: its bundle, packed when first asked for, and the preview it was asked for. */
interface ReplayOutcome {
  bundle: () => Bundle
  preview?: Bundle
  /** The event the preview cut a map at, where it cut one (not where every map was sent whole). */
  cutAt?: number
}

/**
 * The event a replay's first map peaked at (its reserved bytes), where the page puts the playhead:
 * a replayed strategy's summary names it; a recorded layout's counts layout events, so its layout
 * is swept, by the one accounting the page's model keeps (src-shared/layout-accounting.ts).
 */
function openingPeak(first: StrategyToSend | undefined, events: number): number | undefined {
  if (!first) return undefined
  if (first.recorded) return reservedPeakEvent(first.layout, events)
  const peak = first.summary['peakReservedEvent']
  return peak !== undefined && Number.isInteger(peak) && peak >= 0 ? peak : undefined
}

// The page of hosts that do not tell pages apart, and the limits on open traces (traces.ts).
export { DEFAULT_PAGE, MAX_TRACES_OPEN, MAX_TRACES_PER_PAGE }

export interface SessionOptions {
  version: string
  host: AppInfo['host']
  samplesDir: string
  initialFile?: string
  /** Where `record:workload` writes its recordings (default: vramscope-recordings in the temp directory). */
  recordingsDir?: string
  /**
   * Record in this process rather than a child: for a session that runs in a process of its own
   * already (the desktop app's utility process, which main restarts if a CUDA fault kills it).
   */
  recordInProcess?: boolean
  /** Files named on the command line as a job of many ranks, opened at start by `ranks:openInitial`. */
  initialJob?: string[]
  /** Paths `trace:openPath` may open; undefined: any (Electron, where the user picked the file). */
  allowedPaths?: Set<string>
  /** Open traces a page keeps (MAX_TRACES_PER_PAGE); an older one of the page is closed first. */
  maxTracesPerPage?: number
  /** Open traces the session keeps in all (MAX_TRACES_OPEN); the least recently used is closed first. */
  maxTracesOpen?: number
  /** Jobs run at once per page and in all, waiting, and kept (jobs.ts has the defaults). */
  jobs?: JobLimits
  /**
   * Whether a page may start a program on this host (`record:pytorch`): the desktop app, whose
   * page is the user's own; `vramscope serve` only with --allow-record-commands, since anyone
   * holding its token could then run commands here.
   */
  recordCommands?: boolean
  /** The folder of the PyTorch hook (sitecustomize.py); default pytorch.ts's pytorchHookDir(). */
  pytorchHookDir?: string
  /** Record a program where no NVIDIA driver shows (tests, with a stand-in torch and driver). */
  skipDriverCheck?: boolean
}

/**
 * An error about the file at `path` as the user knows the file: `shown` (a sample's name, an
 * upload's file name) where the message names the path, and no folder of this host left in it
 * (a page of the web host may be another user's, who has no business knowing them).
 */
function withoutPath(e: unknown, path: string, shown: string): unknown {
  if (e instanceof Error)
    e.message = e.message
      .split(path)
      .join(shown)
      .split(dirname(path) + sep)
      .join('')
  return e
}

/** A file name safe to show and to write in a private directory. */
export function uploadName(name: unknown): string {
  const shown = basename(String(name ?? ''))
    .replace(/[^\w.\- ]/g, '_')
    .slice(0, 200)
  return shown === '' || shown.startsWith('.') ? `upload${shown}` : shown
}

export class AppSession {
  /** The open traces, their pages and limits, and why the recently closed ones were closed (traces.ts). */
  private readonly traces: TraceRegistry
  /** Every job of the session: start, status, cancel and end (jobs.ts). */
  readonly jobs: JobRegistry
  /** When each page was last heard from (Date.now()). */
  private readonly pages = new Map<string, number>()
  private readonly recent: (RecentFile & { path: string })[] = []

  /** Recent-file key of the file named on the command line. */
  private readonly initialKey: string | undefined
  /**
   * A file opened before a page asks for it (prefetchInitial: the one named on the command line;
   * prefetchPath: the desktop app's window's), so the open runs while the page loads its code; the
   * page's own request to open it then takes this job instead of starting another.
   */
  private prefetched: { openJobId: string; claimed: boolean; path: string } | undefined
  /** The page's jobs of many ranks: their staged files and what each rank's read gave (ranks-job.ts). */
  private readonly rankJobs = new RankJobs()
  /** The jobs whose result is a trace's summary (opens, recordings), newest last: job:status carries it once done. */
  private readonly openJobs = new Set<string>()

  constructor(private readonly options: SessionOptions) {
    this.jobs = new JobRegistry(options.jobs, DEFAULT_PAGE)
    // A closed trace's jobs, running or finished, read cancelled saying why.
    this.traces = new TraceRegistry({ perPage: options.maxTracesPerPage, inAll: options.maxTracesOpen }, (traceId, reason) =>
      this.jobs.endFor({ traceId }, reason === 'it was closed' ? 'its trace was closed' : `its trace was closed: ${reason}`),
    )
    if (options.initialFile !== undefined) {
      this.remember(options.initialFile, basename(options.initialFile))
      this.initialKey = this.recent[0]!.key
    }
  }

  async info(): Promise<AppInfo> {
    const strategies = listStrategies().map((s) => ({
      name: s.name,
      params: s.params.map((p) => ({ name: p.name, defaultValue: p.default, description: p.description })),
    }))
    return {
      version: this.options.version,
      samples: await this.samples(),
      strategies,
      defaultStrategies: DEFAULT_STRATEGIES,
      host: this.options.host,
      ...(this.initialKey !== undefined && { initialFile: this.initialKey }),
      ...(this.options.initialJob !== undefined && { initialJob: { files: this.options.initialJob.length } }),
      privacy: PRIVACY_STATEMENT,
      workloads: this.workloads(),
      recording: this.recordingAvailable(),
      recordCommand: this.recordCommandAvailable(),
    }
  }

  private recordCommandAvailable(): AppInfo['recordCommand'] {
    if (!this.options.recordCommands)
      return {
        available: false,
        reason:
          'this host does not run programs for its pages: start it with `vramscope serve --allow-record-commands`, or run `vramscope record --pytorch -- python train.py` in a shell there',
      }
    if (!this.options.skipDriverCheck && !nvidiaDriverPresent())
      return { available: false, reason: 'recording needs an NVIDIA GPU and driver; import and replay work without one' }
    return { available: true }
  }

  /**
   * Records a PyTorch program at tensor level (record --pytorch, services/record/pytorch.ts) into a
   * folder of the recordings directory, its output in the folder's output.log; the job's result is
   * the snapshot of the process that reserved the most, opened like any file. A cancel ends the
   * program with SIGTERM, which the hook answers with a last snapshot.
   */
  recordPytorchProgram(request: RecordPytorchRequest, page = DEFAULT_PAGE): { jobId: string } {
    const allowed = this.recordCommandAvailable()
    // Refused at once where the host runs no programs; no GPU is said by the job, as for a workload.
    if (!this.options.recordCommands) throw new ApiError('BAD_INPUT', allowed.reason!)
    let command: string[]
    try {
      command = splitCommandLine(request.command)
    } catch (e) {
      throw new ApiError('BAD_INPUT', `command: ${(e as Error).message}`)
    }
    if (command.length === 0 || command[0] === '') throw new ApiError('BAD_INPUT', 'command: no program given')
    const cwd = request.cwd ?? homedir()
    return this.startOpenJob(page, `recording ${command.join(' ').slice(0, 80)}`, async (job) => {
      if (!allowed.available) throw new ApiError('BAD_INPUT', allowed.reason!)
      const where = await stat(cwd).catch(() => undefined)
      if (!where?.isDirectory()) throw new ApiError('BAD_INPUT', `cwd: ${cwd} is not a folder on this host`)
      const dir = this.options.recordingsDir ?? join(tmpdir(), 'vramscope-recordings')
      await mkdir(dir, { recursive: true })
      const stem = programStem(command)
      const outDir = join(dir, recordingFolderName('pytorch', command))
      const recording = await recordPytorch({
        command,
        outDir,
        library: interceptLibraryIfBuilt(), // none: snapshots only, the folder's job.json says so
        cwd,
        outputToFile: true,
        ...(this.options.pytorchHookDir !== undefined && { hookDir: this.options.pytorchHookDir }),
        signal: job.signal,
        ...(request.maxEntries !== undefined && { maxEntries: request.maxEntries }),
        ...(request.snapshotEvery !== undefined && { everySeconds: request.snapshotEvery }),
        onProgress: ({ processes, driverEvents }) =>
          job.progress(`recording ${stem}: ${processes} process${processes === 1 ? '' : 'es'} recording, ${driverEvents} driver calls`),
      })
      const withSnapshot = recording.processes.filter((p) => p.snapshot !== null)
      if (withSnapshot.length === 0) {
        const ended = recording.exit.signal ? `was ended by ${recording.exit.signal}` : `exited with code ${recording.exit.exitCode}`
        throw new Error(`the program ${ended} and wrote no snapshot (${recording.warnings.join('; ')}); its output is in ${join(outDir, 'output.log')}`)
      }
      const worst = withSnapshot.reduce((a, b) => ((b.peakReservedBytes ?? 0) > (a.peakReservedBytes ?? 0) ? b : a))
      return this.open(join(outDir, worst.snapshot!), `${basename(outDir)}/${worst.snapshot}`, job, true)
    })
  }

  private workloads(): WorkloadChoice[] {
    const native = loadNative()
    if (typeof native.workloads !== 'function') return []
    return native.workloads().map((w) => ({
      name: w.name,
      description: w.description,
      params: w.params.map((p) => ({ name: p.name, defaultValue: p.default, description: p.description })),
      fixedStrategy: w.fixedStrategy,
    }))
  }

  /** Whether recording can work here, without touching CUDA in this process. */
  private recordingAvailable(): AppInfo['recording'] {
    if (!loadNative().builtWithCuda()) return { available: false, reason: 'this build of vramscope has no CUDA support; import and replay work without it' }
    if (!nvidiaDriverPresent()) return { available: false, reason: 'recording needs an NVIDIA GPU and driver; import and replay work without one' }
    return { available: true }
  }

  /**
   * Records a built-in workload on the GPU: the recorder runs in a child process (a CUDA fault or
   * crash there never takes this one down) and streams into a file that opens whatever happens;
   * the job's result is the recording, opened like any file (and listed among the recent ones).
   * Cancelling the job stops the recorder at its next step or allocation (the job's signal reaches
   * the native run); the job reads cancelled and the partial recording stays on disk.
   */
  recordWorkload(request: RecordRequest, page = DEFAULT_PAGE): { jobId: string } {
    const known = this.workloads()
    const workload = known.find((w) => w.name === request?.workload)
    if (!workload)
      throw new ApiError(
        'BAD_INPUT',
        `workload: ${JSON.stringify(request?.workload)} is not a built-in workload (known: ${known.map((w) => w.name).join(', ') || 'none in this build'})`,
      )
    const spec: WorkloadSpec = { workload: workload.name, workloadParams: { ...(request.params ?? {}) } }
    for (const key of Object.keys(spec.workloadParams!))
      if (!workload.params.some((p) => p.name === key))
        throw new ApiError('BAD_INPUT', `params.${key}: ${workload.name} takes ${workload.params.map((p) => p.name).join(', ') || 'no parameters'}`)
    if (request.strategy !== undefined && request.strategy !== '') {
      let specs
      try {
        specs = parseStrategySpecs([request.strategy], 'strategy')
      } catch (e) {
        throw new ApiError('BAD_INPUT', (e as Error).message)
      }
      if (specs.length !== 1) throw new ApiError('BAD_INPUT', `strategy: one strategy, got ${specs.length}`)
      spec.strategy = specs[0]!.strategy
      spec.strategyParams = specs[0]!.params
    }
    const available = this.recordingAvailable()
    return this.startOpenJob(page, `recording ${workload.name}`, async (job) => {
      if (!available.available) throw new ApiError('BAD_INPUT', available.reason!)
      const dir = this.options.recordingsDir ?? join(tmpdir(), 'vramscope-recordings')
      await mkdir(dir, { recursive: true })
      const stamp = new Date().toISOString().replace(/[:.]/g, '-')
      const name = `${workload.name}-${spec.strategy ?? 'caching'}-${stamp}.vramscope`
      const path = join(dir, name)
      const record = this.options.recordInProcess ? recordWorkloadInProcess : recordWorkloadInChild
      const run = await record(spec, path, (events) => job.progress(`recording ${workload.name}: ${events} events`), job.signal)
      switch (run.kind) {
        case 'no-device':
          throw new ApiError('BAD_INPUT', `recording needs an NVIDIA GPU and driver; import and replay work without one (${run.reason})`)
        case 'bad-input':
          throw new ApiError('BAD_INPUT', run.message)
        case 'crashed':
          throw new Error(`the recorder failed: ${run.message}; what it recorded until then is in ${path}`)
        case 'cancelled':
          // The job reads cancelled already (the registry ended it when it aborted the signal, and
          // keeps its own message); the partial recording, a valid file, stays at run.output.
          throw new ApiError('CANCELLED', `the recording was cancelled; what it recorded until then is in ${run.output}`)
        case 'done':
          return this.open(path, name, job, true)
      }
    })
  }

  private async samples(): Promise<SampleInfo[]> {
    let listed: { name: string; title: string; description: string }[] = []
    try {
      listed = JSON.parse(await readFile(join(this.options.samplesDir, 'samples.json'), 'utf8'))
    } catch {
      return []
    }
    const out: SampleInfo[] = []
    for (const s of listed) {
      try {
        out.push({ ...s, bytes: (await stat(join(this.options.samplesDir, s.name))).size })
      } catch {
        // A sample missing from the installation is not offered.
      }
    }
    return out
  }

  openSample(name: string, page = DEFAULT_PAGE): { jobId: string } {
    if (typeof name !== 'string' || name.includes('/') || name.includes('\\') || name.startsWith('.'))
      throw new ApiError('BAD_INPUT', `sample: ${JSON.stringify(name)} is not a sample name`)
    return this.openPathJob(page, join(this.options.samplesDir, name), name)
  }

  /** Opens a file by path: a string of 1 to 4,096 characters (the contract's schema, checked at the host's edge), of the allowed ones. */
  openPath(path: string, page = DEFAULT_PAGE): { jobId: string } {
    const allowed = this.options.allowedPaths
    if (allowed && !allowed.has(path) && !this.recent.some((r) => r.path === path))
      throw new ApiError('BAD_INPUT', `path: this host opens only the file it was started with, samples and uploads, not ${JSON.stringify(path)}`)
    return this.takePrefetched(path, page) ?? this.openPathJob(page, path, basename(path))
  }

  openRecent(key: string, page = DEFAULT_PAGE): { jobId: string } {
    const entry = this.recent.find((r) => r.key === key)
    if (!entry) throw new ApiError('NOT_FOUND', `recent: no recent file ${JSON.stringify(key)}`)
    return this.takePrefetched(entry.path, page) ?? this.openPathJob(page, entry.path, entry.name)
  }

  recentFiles(): RecentFile[] {
    return this.recent.map(({ name, key, openedAt }) => ({ name, key, openedAt }))
  }

  /** Opens uploaded bytes: written to a private temporary directory, opened, then deleted. */
  openBytes(name: string, bytes: Uint8Array, page = DEFAULT_PAGE): { jobId: string } {
    const shown = uploadName(name)
    return this.startOpenJob(page, `opening ${shown}`, async (job) => {
      const dir = await mkdtemp(join(tmpdir(), 'vramscope-upload-'))
      try {
        const path = join(dir, shown)
        await writeFile(path, bytes)
        return await this.open(path, shown, job, false)
      } finally {
        await rm(dir, { recursive: true, force: true })
      }
    })
  }

  /**
   * Opens a file a host has already written (a streamed upload) and deletes it, with its
   * directory, once opened or failed: the session owns it from here.
   */
  openUploadedFile(path: string, name: string, page = DEFAULT_PAGE): { jobId: string } {
    const shown = uploadName(name)
    return this.startOpenJob(page, `opening ${shown}`, async (job) => {
      try {
        return await this.open(path, shown, job, false)
      } finally {
        await rm(dirname(path), { recursive: true, force: true })
      }
    })
  }

  /** The prefetched open's job, if one was started. */
  get prefetchedJob(): string | undefined {
    return this.prefetched?.openJobId
  }

  /**
   * Opens the file the host was started with ahead of a page's request, and replays its first maps
   * (replayAhead): `vramscope serve` calls this as it starts, and again when a page with the token
   * starts loading. Does nothing without an initial file or while an earlier prefetch has not been
   * taken by a page.
   */
  prefetchInitial(): void {
    const key = this.initialKey
    const entry = this.recent.find((r) => r.key === key)
    if (entry) this.prefetch(entry.path, entry.name)
  }

  /**
   * Opens `path` ahead of a page that will open it, and replays its first maps (replayAhead): the
   * desktop app calls this as it creates a window for a file it was given (the command line, a
   * file association), while the window loads. The page's `trace:openPath` of that path takes the
   * job. Does nothing while an earlier prefetch has not been taken by a page.
   */
  prefetchPath(path: string): void {
    if (typeof path !== 'string' || path === '') throw new ApiError('BAD_INPUT', 'path: a file path is needed')
    this.prefetch(path, basename(path))
  }

  private prefetch(path: string, name: string): void {
    if (this.prefetched && !this.prefetched.claimed) return
    const { jobId } = this.openPathJob(DEFAULT_PAGE, path, name)
    this.prefetched = { openJobId: jobId, claimed: false, path }
  }

  /** The prefetched open of `path` as `page`'s, with the trace it opened (or opens), if one waits to be taken. */
  private takePrefetched(path: string, page: string): { jobId: string } | undefined {
    const p = this.prefetched
    if (!p || p.claimed || p.path !== path) return undefined
    p.claimed = true
    // An open that failed, or whose trace has been closed since, is no use: the page opens afresh.
    if (!this.jobs.handTo(p.openJobId, page)) return undefined
    // Its opening replays go with it (an open still running starts them as the page's: JobContext.page).
    const summary = this.jobs.resultIfDone<TraceSummary>(p.openJobId)
    if (summary?.opening) for (const jobId of [summary.opening.first, summary.opening.rest]) this.jobs.handTo(jobId, page)
    const trace = summary ? this.traces.peek(summary.traceId) : undefined
    if (trace) trace.page = page
    return { jobId: p.openJobId }
  }

  /**
   * The opening of a trace (docs/architecture.md, "The opening view"), started by the open itself,
   * so a file dropped into an open app opens as fast as one named on the command line, and no
   * replay is started on a guess: the first maps' replay (the recorded layouts, or the first
   * strategy), cut at the opening event, and the others' (restReplay), cut where the first cut. The
   * summary names both jobs and the strategies they replay; a page that wants other strategies (or
   * a cap) cancels them and asks for its own.
   */
  private startOpening(summary: TraceSummary, page: string): OpeningJobs | undefined {
    const strategies = DEFAULT_STRATEGIES
    let first: string
    try {
      first = this.replayJob(firstReplay(summary, strategies), page).jobId
    } catch {
      // The page's own replay fails the same way, and says why.
      return undefined
    }
    const rest = this.startJob<ReplayOutcome>(
      page,
      'waiting for the first map',
      async (job) => {
        await this.jobs.settled(first)
        const at = this.jobs.resultIfDone<ReplayOutcome>(first)?.cutAt ?? openingFallbackEvent(summary)
        return this.replayWork(restReplay(summary, strategies, at))(job)
      },
      summary.traceId,
    ).jobId
    return { strategies, first, rest }
  }

  /** A job whose result is a trace's summary (an open, a recording that opens what it recorded). */
  private startOpenJob(page: string, phase: string, work: (job: JobContext) => Promise<TraceSummary>): { jobId: string } {
    const started = this.startJob<TraceSummary>(page, phase, work)
    this.openJobs.add(started.jobId)
    // As many as the registry keeps statuses of; the oldest first out.
    if (this.openJobs.size > ENDED_KEPT) this.openJobs.delete(this.openJobs.values().next().value!)
    return started
  }

  /** A job's status once it has ended or `waitMs` has passed (withSummary). */
  async jobStatus(jobId: string, waitMs?: number): Promise<JobStatus> {
    return this.withSummary(await this.jobs.statusAfter(jobId, waitMs))
  }

  /**
   * A job's status as a page reads it: a done open's carries the trace's summary (job:result's
   * answer), so the page asks nothing more. Hosts that answer `job:status` from statuses the
   * worker pushes push them through this (utility/host.ts).
   */
  withSummary(status: JobStatus): JobStatus {
    if (status.state !== 'done' || !this.openJobs.has(status.jobId)) return status
    const summary = this.jobs.resultIfDone<TraceSummary>(status.jobId)
    return summary ? { ...status, summary } : status
  }

  private openPathJob(page: string, path: string, shown: string): { jobId: string } {
    return this.startOpenJob(page, `opening ${shown}`, (job) => this.open(path, shown, job, true))
  }

  /** Opens `path` as the trace the user knows as `shown`; its errors name `shown`, never `path`. */
  private async open(path: string, shown: string, job: JobContext, remember: boolean): Promise<TraceSummary> {
    const input = await openInput(path, {
      signal: job.signal,
      onProgress: (p) => job.progress(`${p.phase} ${shown}`, p.bytesTotal > 0 ? Math.min(1, p.bytesDone / p.bytesTotal) : 0),
    }).catch((e: unknown) => {
      throw withoutPath(e, path, shown)
    })
    const d = describeTrace(input.trace, input.strategies)
    const oom = oomSummary(input.trace, input.strategies)
    const events = input.trace.events
    const requested = requestedSeries(events.kind, events.id, events.size, SUMMARY_BUCKETS)
    const traceId = randomUUID()
    const summary: TraceSummary = {
      traceId,
      name: shown,
      kind: input.kind,
      source: d.source,
      events: d.events,
      allocs: d.allocs,
      frees: d.frees,
      markers: d.markers,
      durationNs: d.durationNs,
      streams: input.trace.tables.streams,
      warnings: d.warnings,
      stored: input.strategies.map((s) => s.name),
      ...(d.gpu !== undefined && { gpu: d.gpu }),
      ...(oom && { oom }),
      requested: { end: Array.from(requested.end), max: Array.from(requested.max), min: Array.from(requested.min), peak: requested.peak },
      ...(input.trace.recordedReserved && { recordedReserved: recordedReservedSummary(input.trace.recordedReserved, d.events) }),
    }
    // A page closed while this opened has no use for it.
    job.signal.throwIfAborted()
    this.traces.admit(traceId, { summary, input, page: job.page })
    // The open's result names the trace: once the trace is closed, the open reads cancelled too.
    this.jobs.dependOn(job.jobId, traceId)
    if (remember) this.remember(path, shown)
    const opening = this.startOpening(summary, job.page)
    if (opening) summary.opening = opening
    // The floor (a sweep of every event, ~0.1 s for a million) once the opening's replays run on
    // their own threads, not before the first of them starts.
    const floor = floorOf(input.trace)
    summary.floor = { peakLiveBytes: floor.peakLiveBytes, peakLiveRoundedBytes: floor.peakLiveRoundedBytes }
    return summary
  }

  /** How many traces are open (all pages). */
  get openTraces(): number {
    return this.traces.size
  }

  /**
   * Closes a trace: it, and its jobs' results, are freed; its jobs, running or finished, read
   * cancelled saying why; a later request about it fails with `reason`.
   */
  closeTrace(traceId: string, reason = 'it was closed'): { closed: boolean } {
    return { closed: this.traces.close(traceId, reason) }
  }

  /** A page was heard from (any call it makes): it is not idle. */
  seen(page: string): void {
    if (page !== DEFAULT_PAGE) this.pages.set(page, Date.now())
  }

  /** Closes a page: its traces and jobs are freed, its jobs reading cancelled saying why. */
  closePage(page: string, reason = 'its page was closed'): { closed: number } {
    this.pages.delete(page)
    const closed = this.traces.closePage(page, reason)
    this.jobs.endFor({ page }, reason)
    void this.rankJobs.closePage(page)
    return { closed }
  }

  /** Closes every page not heard from for `idleMs` (a browser tab closed without saying so). */
  closeIdlePages(idleMs: number): void {
    const now = Date.now()
    for (const [page, seenAt] of this.pages)
      if (now - seenAt > idleMs) this.closePage(page, `its page made no request for ${Math.round(idleMs / 1000)} s and was closed`)
  }

  private remember(path: string, name: string): void {
    const existing = this.recent.findIndex((r) => r.path === path)
    const key = existing >= 0 ? this.recent[existing]!.key : randomUUID()
    if (existing >= 0) this.recent.splice(existing, 1)
    this.recent.unshift({ path, name, key, openedAt: Date.now() })
    this.recent.length = Math.min(this.recent.length, 10)
  }

  /** The open trace, now the most recently used; NOT_FOUND saying why if it was closed (traces.ts). */
  private trace(traceId: string): OpenedTrace {
    return this.traces.use(traceId)
  }

  /** The request trace's columns, with its tables in the metadata (src-shared/wire.ts). */
  traceData(traceId: string): Bundle {
    const { input, summary } = this.trace(traceId)
    return packTraceData(summary, input.trace)
  }

  /** Replays an opened trace through the strategies (CLI syntax); the job's result is a bundle. */
  startReplay(request: ReplayRequest, page = DEFAULT_PAGE): { jobId: string } {
    this.trace(request?.traceId)
    return this.replayJob(request, page)
  }

  private replayJob(request: ReplayRequest, page: string): { jobId: string } {
    return this.startJob<ReplayOutcome>(page, 'replaying', this.replayWork(request), request.traceId)
  }

  /** The work of a replay of `request`, its arguments checked now (a bad one throws BAD_INPUT). */
  private replayWork(request: ReplayRequest): (job: JobContext) => Promise<ReplayOutcome> {
    const { input } = this.trace(request.traceId)
    let specs
    try {
      specs = parseStrategySpecs([String(request.strategies ?? '')], 'strategies')
    } catch (e) {
      throw new ApiError('BAD_INPUT', (e as Error).message)
    }
    let cap: number | undefined
    if (request.cap !== undefined && request.cap !== '') {
      try {
        cap = parseByteSize(String(request.cap))
      } catch (e) {
        throw new ApiError('BAD_INPUT', `cap: ${(e as Error).message}`)
      }
    }
    if (request.labels !== undefined) {
      const labels = request.labels
      if (labels.length > specs.length) throw new ApiError('BAD_INPUT', `labels: ${labels.length} labels for ${specs.length} strategies`)
      if (new Set(labels).size !== labels.length) throw new ApiError('BAD_INPUT', 'labels: each strategy needs a label of its own')
      specs = specs.map((spec, i) => (labels[i] !== undefined ? { ...spec, label: labels[i] } : spec))
    }
    // A PyTorch-policy target given no settings replays under the snapshot's recorded ones; its
    // label says which ("caching (pytorch) [max_split_size_mb:128]"). A what-if row's defaults
    // (recordedSettings false) are PyTorch's own. Pool strategies named without sizes get pools
    // sized from the trace (sized-defaults.ts).
    specs = chosenTargets(specs, request.targets).map((spec) => sizedUnlessRecorded(spec, input).spec)
    // One rule for the device, the CLI's and the lab's (replay/device.ts): with no cap every target
    // runs on the memory the file implies, else an assumed H100 80GB; the bundle says which.
    const device = deviceOfInput(input)
    if (request.recordedSettings !== false) specs = specs.map((spec) => withRecordedSettings(spec, input.trace, cap ?? device.bytes).spec)
    // PyTorch-policy targets of a late or overflowed recording start from its state at the window's
    // opening (initial-state.ts); their summaries' seededSegments say so to the map header.
    const open = windowOpenState(input.trace, input.strategies)
    const targets = specs.map((spec): ReplayTarget => {
      const placement = placementFor(input.strategies, spec)
      const seeded = open.kind === 'state' && startFor(open, spec, true, cap, device.bytes)?.seeded === true ? open.open.state : undefined
      return {
        label: spec.label,
        strategy: spec.strategy,
        params: spec.params,
        device: { capacity: device.bytes },
        ...(placement.length > 0 && { regionPlacement: placement }),
        ...(seeded !== undefined && { initialState: seeded }),
      }
    })
    const includeStored = request.includeStored !== false
    return async (job) => {
      const results =
        targets.length === 0
          ? []
          : // Under a limit (a cap, a what-if row's max_reserved) a recorded out-of-memory is served
            // as its request, as the lab served it: the compare view fails where the row failed.
            await (servesOomRequests(input.trace, targets, cap, device) > 0 ? replayServingOoms : replayTrace)(input.trace, targets, {
              ...(cap !== undefined && { cap }),
              layout: true,
              // The maps draw no splits or merges (src-shared/wire.ts): not collected at all.
              structureEvents: false,
              // Each target's preview cut in its own thread (previewOf below takes it).
              ...(request.previewAt !== undefined && { previewAt: request.previewAt }),
              signal: job.signal,
              // Several strategies replay side by side: the phase names them all.
              onProgress: (p) =>
                job.progress(targets.length === 1 ? `replaying ${p.label}` : `replaying ${targets.length} strategies side by side`, p.fraction),
            })
      const stored = includeStored ? input.strategies.filter((s) => s.layout) : []
      const sent = replaySent(input.trace, stored, results)
      // The preview (each map cut to what it shows at one event, src-shared/wire.ts layoutAt) is
      // made now: it is asked for first. The whole bundle is packed when it is asked for.
      const at = request.previewAt === 'peak' ? openingPeak(sent[0], input.trace.events.kind.length) : request.previewAt
      const cuts = at !== undefined && at < input.trace.events.kind.length ? sent.map((s) => previewOf(s, at)) : undefined
      const preview = cuts && packReplay(cuts, undefined, device)
      let bundle: Bundle | undefined
      return {
        bundle: () => (bundle ??= packReplay(sent, undefined, device)),
        ...(preview && { preview }),
        ...(cuts?.some((c) => c.previewAt !== undefined) && { cutAt: at }),
      }
    }
  }

  /**
   * Runs the what-if lab (services/whatif/whatif.ts) on an opened trace as a job: every
   * configuration is checked here first, so a bad one fails the call naming it; progress names
   * the configuration that finished a replay. The job's result is a WhatifReport (`whatif:result`).
   */
  startWhatif(request: WhatifRequest, page = DEFAULT_PAGE): { jobId: string } {
    const { input } = this.trace(request?.traceId)
    const { confs, cap, device } = checkedWhatif(request)
    return this.startJob<WhatifReport>(
      page,
      'what-if: starting',
      async (job) => {
        try {
          const result = await runWhatif(input, {
            ...(confs.length > 0 && { confs }),
            ...(cap !== undefined && { capBytes: cap }),
            ...(device !== undefined && { deviceBytes: device }),
            signal: job.signal,
            onProgress: (p) => job.progress(`what-if: ${p.done} of about ${p.total} replays · ${p.label}`, Math.min(0.99, p.fraction)),
          })
          return whatifReport(result)
        } catch (e) {
          if (e instanceof WhatifError) throw new ApiError('BAD_INPUT', e.message.replace(/^--conf /, 'configuration '))
          throw e
        }
      },
      request.traceId,
    )
  }

  whatifResult(jobId: string): WhatifReport {
    return this.jobs.result<WhatifReport>(jobId)
  }

  /** A file of a job of many ranks, its bytes handed over (ranks-job.ts); `ranks:open` names it by the key. */
  stageRankFile(name: string, bytes: Uint8Array, page = DEFAULT_PAGE): Promise<{ key: string }> {
    return this.rankJobs.stage(uploadName(name), bytes, page)
  }

  /** A file of a job of many ranks that a host has written (a streamed upload): the session owns it from here. */
  stageUploadedRankFile(path: string, name: string, page = DEFAULT_PAGE): Promise<{ key: string }> {
    return this.rankJobs.adopt(path, uploadName(name), page)
  }

  /** Reads the staged files as one job of many ranks; the job's result is a RanksSummary (`ranks:result`). */
  openRanks(keys: readonly string[], page = DEFAULT_PAGE): { jobId: string } {
    return this.rankJobs.open(keys, page, (phase, work) => this.startJob<RanksSummary>(page, phase, work))
  }

  /** Opens the job the host was started with: its files are the user's, read where they are and never deleted. */
  openInitialRanks(page = DEFAULT_PAGE): { jobId: string } {
    const files = this.options.initialJob
    if (!files) throw new ApiError('NOT_FOUND', 'ranks: this host was started with no job (`vramscope serve DIR` or several files start it with one)')
    const keys = files.map((f) => this.rankJobs.stageInPlace(f, basename(f), page))
    return this.openRanks(keys, page)
  }

  ranksResult(jobId: string): RanksSummary {
    return this.jobs.result<RanksSummary>(jobId)
  }

  /** Opens one rank of a job as a trace, like any file (its opening replays start with it). */
  openRank(ranksId: string, rank: number, page = DEFAULT_PAGE): { jobId: string } {
    const { path, name } = this.rankJobs.file(ranksId, rank)
    return this.startOpenJob(page, `opening rank ${rank}: ${name}`, (job) => this.open(path, name, job, false))
  }

  /** The what-if lab over every rank of a job: the report ranks the settings that fit every rank (`ranks:whatifResult`). */
  startRanksWhatif(request: RanksWhatifRequest, page = DEFAULT_PAGE): { jobId: string } {
    this.rankJobs.require(request.ranksId)
    const { confs, cap, device } = checkedWhatif(request)
    return this.startJob<RanksWhatifReport>(page, 'what-if over every rank: starting', (job) =>
      this.rankJobs
        .whatif(
          request.ranksId,
          { ...(confs.length > 0 && { confs }), ...(cap !== undefined && { capBytes: cap }), ...(device !== undefined && { deviceBytes: device }) },
          job,
        )
        .catch((e: unknown) => {
          if (e instanceof WhatifError) throw new ApiError('BAD_INPUT', e.message.replace(/^--conf /, 'configuration '))
          throw e
        }),
    )
  }

  ranksWhatifResult(jobId: string): RanksWhatifReport {
    return this.jobs.result<RanksWhatifReport>(jobId)
  }

  /**
   * A replay job's bundle, or with `strategy` its strategy of that index alone (wire.ts,
   * strategyBundle); with `preview`, its preview where the job made one (ReplayRequest.previewAt),
   * else the same bundle.
   */
  async replayResult(jobId: string, strategy?: number, preview = false, wait = false): Promise<Bundle> {
    // A page that asks with `wait` is answered once the job has ended: no status calls between;
    // one that failed or was cancelled says why, as its status would have.
    if (wait) {
      const status = await this.jobs.settled(jobId)
      if (status.state !== 'done')
        throw new ApiError(status.state === 'cancelled' ? 'CANCELLED' : 'BAD_INPUT', status.error?.message ?? `the replay ${status.state}`)
    }
    const outcome = this.jobs.result<ReplayOutcome>(jobId)
    const bundle = preview && outcome.preview ? outcome.preview : outcome.bundle()
    return strategy === undefined ? bundle : strategyBundle(bundle, strategy)
  }

  jobResult(jobId: string): TraceSummary {
    return this.jobs.result<TraceSummary>(jobId)
  }

  private startJob<T>(page: string, phase: string, work: (job: JobContext) => Promise<T>, traceId?: string): { jobId: string } {
    return { jobId: this.jobs.start({ page, ...(traceId !== undefined && { traceId }) }, phase, work) }
  }
}

/**
 * A what-if request's configurations and sizes, checked once, at the edge, as the CLI checks
 * --conf: a bad one fails the call naming it (one trace's lab and a job's over every rank alike).
 */
function checkedWhatif(request: Pick<WhatifRequest, 'confs' | 'cap' | 'device'>): { confs: string[]; cap: number | undefined; device: number | undefined } {
  const confs = (request.confs ?? []).map((c) => c.trim()).filter((c) => c !== '')
  // Checked here, at the edge, as the CLI checks --conf: in PyTorch's syntax, and leaving the
  // model a limit above 0 B of the device (the one given, else the one the lab assumes).
  let deviceForCheck = DEFAULT_DEVICE_BYTES
  try {
    if (request.device !== undefined && request.device.trim() !== '') deviceForCheck = parseByteSize(request.device.trim()) || DEFAULT_DEVICE_BYTES
  } catch {
    // size('device') below names what is wrong with it.
  }
  confs.forEach((text, i) => {
    if (text === 'recorded') return
    try {
      confModel(parsePytorchConf(text), 0, deviceForCheck)
    } catch (e) {
      if (e instanceof ConfError) throw new ApiError('BAD_INPUT', `configuration ${i + 1} '${shownValue(text)}': ${e.message}`)
      throw e
    }
  })
  const size = (what: 'cap' | 'device', text: string | undefined): number | undefined => {
    if (text === undefined || text.trim() === '') return undefined
    let bytes: number
    try {
      bytes = parseByteSize(text.trim())
    } catch (e) {
      throw new ApiError('BAD_INPUT', `${what}: ${(e as Error).message}`)
    }
    if (bytes <= 0) throw new ApiError('BAD_INPUT', `${what}: must be more than 0 bytes, got '${text}'`)
    return bytes
  }
  return { confs, cap: size('cap', request.cap), device: size('device', request.device) }
}

/** The lab's result as the API sends it: no NaN, and each row with the replay that shows it. */
export function whatifReport(r: WhatifResult): WhatifReport {
  const finite = (v: number): number | null => (Number.isFinite(v) ? v : null)
  const { rows, eventsReplayed: _e, eventsPerSecondPerCore: _r, fidelity, ...rest } = r
  return {
    ...rest,
    rows: rows.map(({ replays: _n, ...row }) => ({ ...row, fragmentationAtPeak: finite(row.fragmentationAtPeak), replay: rowReplay(row, r.limit.bytes) })),
    ...(fidelity && { fidelity: { ...fidelity, peakReservedError: finite(fidelity.peakReservedError) ?? 0 } }),
  }
}

/**
 * The part of the parsed strategies a replay request names (ReplayRequest.targets): whole numbers
 * from 0, as the contract's schema checked them at the host's edge (dispatch.ts), not again here.
 */
function chosenTargets<T>(specs: T[], targets: ReplayRequest['targets']): T[] {
  if (targets === undefined || targets === null) return specs
  const { first, count } = targets
  return specs.slice(first, count === undefined ? undefined : first + count)
}

/** The allocator's recorded reserved curve, bucketed for the summary (TraceSummary.recordedReserved). */
function recordedReservedSummary(series: RecordedSeries, events: number): NonNullable<TraceSummary['recordedReserved']> {
  const b = bucketStepSeries(series.index, series.bytes, events, SUMMARY_BUCKETS)
  return { end: Array.from(b.end), max: Array.from(b.max, (v) => (Number.isNaN(v) ? null : v)), peak: b.peak }
}
