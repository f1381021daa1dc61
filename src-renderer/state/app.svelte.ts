// The app's shared state: what is open, the strategies replayed on it, the playhead, the selection.
// Views read it and call its methods; nothing else holds state that two views need.
import type {
  AppInfo,
  JobStatus,
  OpeningJobs,
  RecentFile,
  RecordPytorchRequest,
  RecordRequest,
  ReplayRequest,
  TraceSummary,
} from '../../src-shared/contract.ts'
import { MAX_STATUS_WAIT_MS } from '../../src-shared/job-wait.ts'
import { firstCount, firstReplay, restReplay } from '../../src-shared/opening.ts'
import type { WhatifReport, WhatifReportRow } from '../../src-shared/whatif-report.ts'
import { ApiCallError, createClient, PROGRESS_MS, waitForJob, type Client, type FetchRequest } from '../api/client.ts'
import { allocBands } from '../viz/alloc-timeline.ts'
import type { ColorBy } from '../viz/categories.ts'
import type { StrategyView, TraceData } from '../viz/data.ts'
import type { Theme } from '../viz/palette.ts'
import { follow, stepFollowed, type Followed } from '../viz/events.ts'
import { peakReservedEvent } from '../viz/peak.ts'
import { strategiesNamed } from '../viz/strategy-count.ts'
import type { DecodeRequest, DecodeResponse } from '../workers/decode.worker.ts'

/** While playing, the figures read the playhead at most this often (ms). */
const READOUT_MS = 100
/**
 * How long an open waits for the other maps' replays before it asks for the trace's columns anyway
 * (ms): long enough for a 1 M-event trace's on two cores, short enough that a much larger trace's
 * timeline and event list are not held behind replays of tens of seconds.
 */
const OTHER_MAPS_WAIT_MS = 4000

export type { ColorBy }
export type { Theme }
/** What the main area shows: the strategies side by side, or the what-if lab. */
export type View = 'compare' | 'whatif'

/** The other side of a diff: its name, request figures and replayed strategies. */
export interface DiffSide {
  name: string
  events: number
  allocs: number
  durationNs: number
  strategies: StrategyView[]
}

export interface Selection {
  strategy: number
  block: number
}

/**
 * The decode workers: one to start with, more while several decodes run at once (two, or as many
 * as the cores up to four), each request going to the worker with the fewest in flight.
 */
class Decoder {
  private readonly workers: { worker: Worker; inFlight: number }[] = []
  private readonly most = Math.min(4, Math.max(2, globalThis.navigator?.hardwareConcurrency ?? 2))
  private next = 1
  private waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>()
  /** Milliseconds the worker spent on the last decode. */
  lastMs = 0

  private spawn(): { worker: Worker; inFlight: number } {
    const entry = { worker: new Worker(new URL('../workers/decode.worker.ts', import.meta.url), { type: 'module' }), inFlight: 0 }
    entry.worker.onmessage = (m: MessageEvent<DecodeResponse>) => {
      entry.inFlight--
      const w = this.waiting.get(m.data.id)
      if (!w) return
      this.waiting.delete(m.data.id)
      if (m.data.ok) {
        this.lastMs = m.data.ms
        w.resolve(m.data.value)
      } else w.reject(m.data.code !== undefined ? new ApiCallError(m.data.message, m.data.code) : new Error(m.data.message))
    }
    this.workers.push(entry)
    return entry
  }

  private pick(): { worker: Worker; inFlight: number } {
    const idle = this.workers.reduce<{ worker: Worker; inFlight: number } | undefined>((best, w) => (!best || w.inFlight < best.inFlight ? w : best), undefined)
    if (idle && (idle.inFlight === 0 || this.workers.length >= this.most)) return idle
    return this.spawn()
  }

  /** Starts a worker ahead of the first decode (its script loads and compiles while the host works). */
  warm(): void {
    if (this.workers.length === 0) this.spawn()
  }

  decode<T>(what: DecodeRequest['what'], buffer: ArrayBuffer): Promise<T> {
    return this.send<T>((id) => ({ id, what, buffer }), [buffer])
  }
  /** A replay bundle the worker fetches itself, building the models while it arrives. */
  fetchReplay<T>(request: FetchRequest): Promise<T> {
    return this.send<T>((id) => ({ id, what: 'replay', fetch: request }), [])
  }
  private send<T>(request: (id: number) => DecodeRequest, transfer: Transferable[]): Promise<T> {
    const id = this.next++
    const entry = this.pick()
    return new Promise<T>((resolve, reject) => {
      this.waiting.set(id, { resolve: resolve as (v: unknown) => void, reject })
      entry.inFlight++
      entry.worker.postMessage(request(id), transfer)
    })
  }
}

/** Bytes as a cap the host reads back exactly: "3GiB", "640MiB", else the bytes. */
export function readableSize(bytes: number): string {
  for (const [unit, size] of [
    ['TiB', 1024 ** 4],
    ['GiB', 1024 ** 3],
    ['MiB', 1024 ** 2],
    ['KiB', 1024],
  ] as const)
    if (bytes >= size && bytes % size === 0) return `${bytes / size}${unit}`
  return String(bytes)
}

export class AppState {
  readonly client: Client = createClient()
  private readonly decoder = new Decoder()

  info = $state<AppInfo | null>(null)
  recent = $state<RecentFile[]>([])
  trace = $state.raw<TraceData | null>(null)
  strategies = $state.raw<StrategyView[]>([])
  /**
   * Maps drawn before their histories have crossed, by their strategy's place in the list: each
   * holds only what its map shows at one event (StrategyView.previewAt; src-shared/wire.ts,
   * layoutAt), or is the whole view where its layout could not be cut. The maps show `strategies`
   * first, then the previews past them (shownPreviews); tables, the inspector, search and playback
   * read `strategies` only.
   */
  previews = $state.raw<StrategyView[]>([])
  shownPreviews = $derived(this.previews.slice(this.strategies.length))
  /** Maps drawn, whole or as previews. */
  mapsDrawn = $derived(Math.max(this.strategies.length, this.previews.length))
  /**
   * Every map drawn, whole then previews: what the timeline draws (a preview's metrics, failures
   * and resets are its whole replay's; only its blocks are cut).
   */
  mapViews = $derived(this.shownPreviews.length === 0 ? this.strategies : [...this.strategies, ...this.shownPreviews])
  /** Maps not drawn yet, replaying (on the host) or decoding: their panes show progress until they land. */
  pendingMaps = $state(0)
  /** Every map of the open trace, drawn or to come. */
  mapCount = $derived(this.mapsDrawn + this.pendingMaps)
  /** Strategies to replay, in the CLI's syntax. */
  strategySpec = $state('')
  cap = $state('')
  /** The request event whose state every view shows. */
  event = $state(0)
  playing = $state(false)
  /** The playhead as the figures and texts read it while playing: at most READOUT_MS apart. */
  private playReadout = $state(0)
  private playReadoutAt = 0
  /**
   * The event the figures (map headers, the metrics table's "now" rows, the position) are read
   * at: the playhead, except while playing, when it follows a few times a second. The maps and
   * cursors move every frame; figures changing sixty times a second cannot be read, and each
   * change of text lays out and paints the page again (docs/architecture.md, "Memory maps").
   */
  readoutEvent = $derived(this.playing ? this.playReadout : this.event)
  /** Events per second while playing. */
  speed = $state(200)
  /** A brushed range of events the scrubber and playback keep to, or null for all. */
  range = $state<[number, number] | null>(null)
  selection = $state<Selection | null>(null)
  colorBy = $state<ColorBy>('stream')
  theme = $state<Theme>('light')
  /** A running job (open, replay), for the progress bar and its cancel button. */
  job = $state<JobStatus | null>(null)
  error = $state<string | null>(null)
  showHelp = $state(false)
  /** The record panel (built-in GPU workloads). */
  showRecord = $state(false)
  /** A second trace (or a second run of a file) replayed with the same strategies, for the diff view. */
  diff = $state.raw<DiffSide | null>(null)
  view = $state<View>('compare')
  /** The what-if panel's inputs: device limit, GPU memory, configurations one per line. */
  whatifCap = $state('')
  whatifDevice = $state('')
  whatifConfs = $state('')
  /** The running what-if job (its own progress bar, in the panel), its report, its error. */
  whatifJob = $state<JobStatus | null>(null)
  whatif = $state.raw<WhatifReport | null>(null)
  whatifError = $state<string | null>(null)
  /** Map titles for the strategies of `strategySpec` while it is the spec they were given for. */
  private labelled: { spec: string; labels: string[] } | null = null
  /** Figures of the last load, for the status line and benchmarks. */
  timings = $state<{ openMs: number; replayMs: number; decodeMs: number }>({ openMs: 0, replayMs: 0, decodeMs: 0 })

  /** The block followed through the trace (its events and its address's), or null. */
  followed = $state.raw<Followed | null>(null)
  /** The trace whose bands may be laid out (showBands). */
  private bandsFor = $state.raw<TraceData | null>(null)
  /**
   * Every allocation as a band over time (the allocation timeline, the event list): half a second
   * on this thread for a million events, so laid out once the first maps have landed (or their
   * replay failed), never while the first map's replay ends and its result is fetched.
   */
  bands = $derived(
    this.trace && this.bandsFor === this.trace ? allocBands(this.trace.kind, this.trace.id, this.trace.size, this.trace.device, this.trace.pool) : null,
  )

  /**
   * The summary of the trace being opened, from when the host has read it until its columns have
   * arrived (open()): the toolbar names it and the timeline draws its requested bytes meanwhile.
   */
  opening = $state.raw<TraceSummary | null>(null)
  /** Whether the opening trace's columns have been asked for (they wait for every map's first drawing). */
  columnsAsked = $state(false)
  /** The program's requested bytes over the open trace: from its columns, or its summary while they travel. */
  requested = $derived(this.trace?.requested ?? this.opening?.requested ?? null)

  events = $derived(this.trace?.kind.length ?? this.opening?.events ?? 0)
  lastEvent = $derived(Math.max(0, this.events - 1))

  /** Opens started or failed so far: a first replay shows its progress only while its open is the latest. */
  private opens = 0
  /** Replay jobs whose maps were fetched once they had ended (whenDone): nothing to wait for. */
  private readonly doneJobs = new Set<string>()
  /** The event open() put the playhead at, until the first maps land and move it to their peak (unless the user moved it). */
  private openedAt: number | null = null
  private playStartedAt = 0
  private playStartEvent = 0
  private frame = 0

  async start(): Promise<void> {
    try {
      this.info = await this.client.call('app:info')
      this.strategySpec = this.info.defaultStrategies
      // The recent list is not needed to open the file the host was started with: asked for once
      // that is open (open()), it is asked for now only where the start page shows it.
      if (this.info.initialFile === undefined) this.recent = await this.client.call('trace:recent')
    } catch (e) {
      this.error = `Could not reach the vramscope host: ${(e as Error).message}`
      return
    }
    if (this.info.initialFile !== undefined) await this.openRecent(this.info.initialFile)
  }

  /** Opens something (a sample, a dropped file, a recent file) and replays it with the current strategies. */
  async open(start: () => Promise<{ jobId: string }>): Promise<void> {
    this.stop()
    this.error = null
    // Map titles of a what-if row belong to the trace it was run on.
    this.labelled = null
    const t0 = performance.now()
    try {
      const { jobId } = await start()
      const opened = await waitForJob(this.client, jobId, (s) => (this.job = s))
      const summary = opened.summary ?? (await this.client.call('job:result', { jobId }))
      // The host started the opening's replays as it opened the file (TraceSummary.opening): the
      // page draws them where they are what it would ask for, else asks for its own.
      const opening = this.openingFor(summary)
      // The first map's replay runs on the host while the page draws the summary; its progress
      // shows in the first map's pane (while this open is the latest and has not failed), and its
      // result is fetched, decoded and drawn before the trace's columns are asked for (below).
      const openNumber = ++this.opens
      const last = Math.max(0, summary.events - 1)
      // Its maps are first fetched as a preview, each cut to what it shows at the opening event (a
      // recorded out-of-memory, else the first strategy's peak): kilobytes where the whole is
      // tens of megabytes, drawn before the whole crosses.
      // (A host started with this file builds the same requests, opening.ts, and may have run them already.)
      const firstJob = opening ? Promise.resolve(opening.first) : this.startReplay(firstReplay(summary, this.strategySpec)).then((r) => r.jobId)
      const firstPreview = firstJob.then((jobId) =>
        this.whenDone(
          jobId,
          (s) => {
            if (this.opens === openNumber) this.job = s
          },
          () => this.fetchReplay(jobId, undefined, true),
        ),
      )
      firstPreview.catch(() => {})
      // The trace this one replaces is of no more use, here or on the host.
      const replaced = this.trace?.summary.traceId
      if (replaced !== undefined && replaced !== summary.traceId) void this.client.call('trace:close', { traceId: replaced }).catch(() => {})
      this.trace = null
      // Until the columns arrive, the summary's requested bytes and the maps' panes are drawn.
      this.opening = summary
      this.columnsAsked = false
      // A decode worker starts once that is painted, so its script is loaded when the first map's
      // bundle is ready (the replay takes longer), and not while the page paints.
      requestAnimationFrame(() => setTimeout(() => this.decoder.warm(), 0))
      // The open's job is done: the first replay's progress comes next (replayResult).
      if (this.job?.jobId === jobId) this.job = null
      this.whatif = null
      this.whatifError = null
      this.strategies = []
      this.previews = []
      // A diff is of the trace it was opened beside: another file ends it.
      this.diff = null
      this.pendingMaps = summary.stored.length + this.strategiesInSpec()
      this.selection = null
      this.followed = null
      this.range = null
      // A recorded out-of-memory is what such a file is opened to look at: the playhead starts there
      // and stays. Otherwise at the end until the first map lands, then at its peak of reserved
      // memory (showFirst).
      if (summary.oom) {
        this.event = Math.min(summary.oom.event, last)
        this.openedAt = null
      } else {
        this.event = last
        this.openedAt = this.event
      }
      // The first map is drawn before the trace's columns are asked for: on two cores their 35 MB
      // (a 1 M-event trace) crossing and decoding beside the first replay held it back by seconds.
      // A first replay that failed still lets the trace open: replay() below says why.
      const first = await firstPreview.catch(() => null)
      let rest: Promise<{ jobId: string }> | undefined
      let restPreviews: StrategyView[] | null = null
      if (this.opens === openNumber) {
        if (first) {
          this.showFirst(first)
          // The others replay on the host, their previews cut at the event the first map opened
          // at; the page waits for them (kilobytes), for up to OTHER_MAPS_WAIT_MS, before it asks
          // for the trace's columns and the first map's history (tens of megabytes): on two cores
          // those crossing and decoding beside the replays held every map back by a second
          // (docs/benchmarks.md, "Every map before the columns"). Replays still running then draw
          // their previews when they end (replay()). A host started with this file may have
          // replayed them already (src-shared/opening.ts).
          rest = opening ? Promise.resolve({ jobId: opening.rest }) : this.startReplay(restReplay(summary, this.strategySpec, this.event))
          rest.catch(() => {})
          restPreviews = await this.previewsOf(
            rest,
            this.laterStrategies(summary.stored),
            (s) => {
              if (this.opens === openNumber) this.job = s
            },
            performance.now() + OTHER_MAPS_WAIT_MS,
          )
        }
      }
      // A later open took over while this one waited: it goes no further, and its trace is freed on the host.
      if (this.opens !== openNumber) {
        void this.client.call('trace:close', { traceId: summary.traceId }).catch(() => {})
        return
      }
      if (restPreviews && first) this.showPreviews(restPreviews, first.length)
      // The replays are over, or the wait for them is (their progress was the last shown); what is
      // fetched next shows as the maps' own progress.
      this.job = null
      // The first maps' whole histories cross beside the columns (a preview that could not be cut is whole already).
      const firstViews = first?.every((v) => v.previewAt === undefined) ? Promise.resolve(first) : firstJob.then((jobId) => this.fetchReplay(jobId))
      firstViews.catch(() => {})
      this.columnsAsked = true
      const data = await this.decoder.decode<TraceData>('trace', await this.client.call('trace:data', { traceId: summary.traceId }))
      this.trace = data
      this.opening = null
      this.timings = { ...this.timings, openMs: performance.now() - t0 }
      void this.client.call('trace:recent').then((recent) => (this.recent = recent))
      await this.replay(firstViews, rest, restPreviews ?? undefined)
    } catch (e) {
      // The first replay, if it goes on, no longer shows its progress.
      this.opens++
      this.job = null
      if (this.opening) {
        this.opening = null
        this.pendingMaps = 0
      }
      this.error = e instanceof ApiCallError && e.code === 'CANCELLED' ? null : (e as Error).message
    }
  }

  openSample(name: string) {
    return this.open(() => this.client.call('trace:openSample', { name }))
  }
  openFile(file: File) {
    return this.open(() => this.client.openFile(file))
  }
  /** Records a built-in workload on this host's GPU, then opens the recording like any file. */
  recordWorkload(request: RecordRequest) {
    this.showRecord = false
    return this.open(() => this.client.call('record:workload', request))
  }
  /** Records a PyTorch program at tensor level on this host (record --pytorch), then opens its snapshot. */
  recordPytorch(request: RecordPytorchRequest) {
    this.showRecord = false
    return this.open(() => this.client.call('record:pytorch', request))
  }
  openRecent(key: string) {
    return this.open(() => this.client.call('trace:openRecent', { key }))
  }

  /** How many strategies the spec names (the host's own list tells a name from a parameter). */
  private strategiesInSpec(): number {
    return strategiesNamed(this.strategySpec, this.info?.strategies.map((s) => s.name) ?? [])
  }

  /** How many of the spec's strategies replay after the first job (restReplay), for a trace with these recorded layouts. */
  private laterStrategies(stored: readonly string[]): number {
    return Math.max(0, this.strategiesInSpec() - firstCount(stored))
  }

  /** Starts a replay of `request` (its `previewAt`: ReplayRequest) under the cap set, with a what-if row's labels when its spec is the one replayed. */
  private startReplay(request: ReplayRequest): Promise<{ jobId: string }> {
    return this.client.call('replay:start', {
      ...request,
      ...(this.cap.trim() !== '' && { cap: this.cap.trim() }),
      // A what-if row's spec is the configuration itself: PyTorch's defaults stay defaults.
      ...(this.labelled?.spec === request.strategies && { labels: this.labelled.labels, recordedSettings: false }),
    })
  }

  /** A started job's id once it is done; `status` hears its progress (default: the progress bar, this.job). */
  private async replayJob(started: Promise<{ jobId: string }>, status: (s: JobStatus) => void = (s) => (this.job = s)): Promise<string> {
    const { jobId } = await started
    // A job whose maps were fetched once it had ended (whenDone) needs no more waiting.
    if (!this.doneJobs.has(jobId)) await waitForJob(this.client, jobId, status)
    status({ jobId, state: 'running', fraction: 1, phase: 'drawing' })
    return jobId
  }

  /**
   * The opening's jobs the host started (TraceSummary.opening) where they replay what this page
   * would ask for (its strategies, no cap): else they are cancelled, and undefined.
   */
  private openingFor(summary: TraceSummary): OpeningJobs | undefined {
    const opening = summary.opening
    if (!opening) return undefined
    if (opening.strategies === this.strategySpec && this.cap.trim() === '') return opening
    this.dropOpening(summary)
    return undefined
  }

  /** Cancels the opening's jobs of a trace the page will not draw them for (another spec, a diff). */
  private dropOpening(summary: TraceSummary): void {
    for (const jobId of summary.opening ? [summary.opening.first, summary.opening.rest] : []) void this.client.call('job:cancel', { jobId }).catch(() => {})
  }

  /**
   * `fetch`, a fetch of a job's maps that the host answers once the job has ended (`wait`), with
   * the job's progress reported to `status` while it runs longer than a second (a shorter wait
   * shows none, and costs no call).
   */
  private async whenDone<T>(jobId: string, status: (s: JobStatus) => void, fetch: () => Promise<T>): Promise<T> {
    let ended = false
    const watch = async () => {
      await new Promise((r) => setTimeout(r, MAX_STATUS_WAIT_MS))
      while (!ended) {
        const s = await this.client.call('job:status', { jobId, waitMs: PROGRESS_MS })
        if (ended) return
        status(s)
        if (s.state !== 'running' && s.state !== 'queued') return
      }
    }
    watch().catch(() => {})
    try {
      const result = await fetch()
      this.doneJobs.add(jobId)
      return result
    } finally {
      ended = true
    }
  }

  /**
   * A replay job's maps. `strategies`: how many the job replays, when its maps are to be fetched
   * and decoded one by one, side by side; `previewsFrom`: the job made previews (startReplay's
   * previewAt), which are fetched and drawn first, as the maps of that place in the list on.
   */
  private async replayResult(
    started: Promise<{ jobId: string }>,
    status?: (s: JobStatus) => void,
    strategies?: number,
    previewsFrom?: number,
    shown?: StrategyView[],
  ): Promise<StrategyView[]> {
    const jobId = await this.replayJob(started, status)
    if (strategies === undefined) return this.fetchReplay(jobId)
    // Previews first (unless they are shown already), side by side (one more index than expected, as below).
    let previews = shown
    if (previewsFrom !== undefined && !previews) {
      const trace = this.trace
      previews = await this.fetchPreviews(jobId, strategies)
      if (this.trace === trace && previews.length >= strategies) this.showPreviews(previews, previewsFrom)
    }
    // Each strategy fetched and decoded on its own, side by side (one more index than expected:
    // empty unless the count fell short, and then the rest follow one by one); a preview that
    // could not be cut is its whole view already.
    const fetch = (i: number) => (previews?.[i] && previews[i].previewAt === undefined ? Promise.resolve([previews[i]]) : this.fetchReplay(jobId, i))
    const views = await Promise.all(Array.from({ length: strategies + 1 }, (_, i) => (i < strategies ? fetch(i) : this.fetchReplay(jobId, i))))
    for (let i = views.length; views.at(-1)!.length > 0; i++) views.push(await this.fetchReplay(jobId, i))
    return views.flat()
  }

  /** A finished job's previews, each strategy's fetched side by side (one more index than expected: see replayResult). */
  private async fetchPreviews(jobId: string, strategies: number): Promise<StrategyView[]> {
    return (await Promise.all(Array.from({ length: strategies + 1 }, (_, i) => this.fetchReplay(jobId, i, true)))).flat()
  }

  /**
   * The previews of a started replay once it has ended (`status` hears its progress); null when it
   * failed, or was still running at `until` (performance.now()).
   */
  private async previewsOf(
    started: Promise<{ jobId: string }>,
    strategies: number,
    status: (s: JobStatus) => void,
    until: number,
  ): Promise<StrategyView[] | null> {
    try {
      const { jobId } = await started
      const fetched = this.whenDone(jobId, status, () => this.fetchPreviews(jobId, strategies))
      fetched.catch(() => {})
      const late = new Promise<null>((r) => setTimeout(() => r(null), Math.max(0, until - performance.now())))
      const previews = await Promise.race([fetched, late])
      return previews && previews.length >= strategies ? previews : null
    } catch {
      // The replay itself says what went wrong (replay()).
      return null
    }
  }

  /** A finished replay job's maps (its preview, with `preview`), or with `strategy` that one of them alone (decoded in a worker as it streams in). */
  private async fetchReplay(jobId: string, strategy?: number, preview = false): Promise<StrategyView[]> {
    // The host answers once the job has ended (a done job at once).
    const arg = { jobId, ...(strategy !== undefined && { strategy }), ...(preview && { preview }), wait: true }
    if (this.client.replayResultRequest) return this.decoder.fetchReplay<StrategyView[]>(this.client.replayResultRequest(arg))
    return this.decoder.decode<StrategyView[]>('replay', await this.client.call('replay:result', arg))
  }

  /**
   * Replays the open trace through the strategies of `strategySpec` (plus any recorded layout):
   * first the recorded layouts alone (no replay) or, without any, the first strategy alone, drawn
   * as soon as they are ready; then the others in one more job.
   * `firstViews`: that first job's maps, when open() started it already; `restStarted`: the
   * others' job, when open() started that too, and `restPreviews` its previews, when open() drew them.
   */
  async replay(firstViews?: Promise<StrategyView[]>, restStarted?: Promise<{ jobId: string }>, restPreviews?: StrategyView[]): Promise<void> {
    const trace = this.trace
    if (!trace) return
    this.error = null
    const t0 = performance.now()
    try {
      const count = firstCount(trace.summary.stored)
      const first = await (firstViews ??
        this.replayResult(
          this.startReplay({ traceId: trace.summary.traceId, strategies: this.strategySpec, targets: { first: 0, count }, includeStored: true }),
        ))
      let decodeMs = this.decoder.lastMs
      this.showFirst(first)
      this.showBands()
      // The rest of the spec's strategies (the first job replayed `count` of them).
      this.selection = null
      this.followed = null
      const others = this.laterStrategies(trace.summary.stored)
      // Their previews are cut at the playhead's event (where the first map opened, on an open).
      const rest = await this.replayResult(
        restStarted ?? this.startReplay(restReplay(trace.summary, this.strategySpec, this.event)),
        undefined,
        others,
        first.length,
        restStarted && restPreviews,
      )
      decodeMs += this.decoder.lastMs
      if (rest.length > 0) this.strategies = [...first, ...rest]
      this.previews = []
      this.pendingMaps = 0
      this.timings = { ...this.timings, replayMs: performance.now() - t0, decodeMs }
      this.job = null
    } catch (e) {
      this.pendingMaps = 0
      this.previews = []
      this.job = null
      this.error = e instanceof ApiCallError && e.code === 'CANCELLED' ? null : (e as Error).message
      this.showBands()
    }
  }

  /** Draws the first job's maps; a trace opens at the peak of reserved memory of its first map (the recorded one where there is one). */
  private showFirst(first: StrategyView[]): void {
    if (this.strategies === first || this.previews === first) return
    const cut = first.find((v) => v.previewAt !== undefined)
    if (cut) {
      // A preview: drawn, and the playhead put where it was cut (the first map's peak).
      this.showPreviews(first, 0)
      if (this.openedAt !== null && this.openedAt === this.event) this.seek(cut.previewAt!)
    } else {
      this.pendingMaps = Math.max(0, this.pendingMaps - Math.max(0, first.length - this.previews.length))
      this.strategies = first
      if (this.openedAt !== null && this.openedAt === this.event && first.length > 0) this.jumpToPeak(0)
    }
    this.openedAt = null
  }

  /** Draws previews (or whole views) as the maps from place `from` in the list on, until their whole views land. */
  private showPreviews(views: StrategyView[], from: number): void {
    const drawn = this.mapsDrawn
    const before = Array.from({ length: from }, (_, i) => this.previews[i] ?? this.strategies[i]!)
    this.previews = [...before, ...views]
    this.pendingMaps = Math.max(0, this.pendingMaps - Math.max(0, this.previews.length - drawn))
  }

  /** Lets the open trace's bands be laid out, after the frame that draws what just landed. */
  private showBands(): void {
    const trace = this.trace
    setTimeout(() => {
      if (this.trace === trace) this.bandsFor = trace
    }, 0)
  }

  /**
   * Opens a second trace and replays it through the same strategies (and cap) as the open one, so
   * the diff view can set their figures side by side. The open trace stays as it is.
   */
  async openDiff(start: () => Promise<{ jobId: string }>): Promise<void> {
    if (!this.trace) return
    this.error = null
    try {
      const { jobId } = await start()
      const opened = await waitForJob(this.client, jobId, (s) => (this.job = s))
      const summary = opened.summary ?? (await this.client.call('job:result', { jobId }))
      // The diff replays the open trace's strategies under its cap: not the opening's.
      this.dropOpening(summary)
      const replay = await this.client.call('replay:start', {
        traceId: summary.traceId,
        strategies: this.strategySpec,
        ...(this.cap.trim() !== '' && { cap: this.cap.trim() }),
      })
      await waitForJob(this.client, replay.jobId, (s) => (this.job = s))
      const strategies = await this.decoder.decode<StrategyView[]>('replay', await this.client.call('replay:result', { jobId: replay.jobId }))
      // The diff needs only these figures: the second trace is freed on the host.
      void this.client.call('trace:close', { traceId: summary.traceId }).catch(() => {})
      this.diff = { name: summary.name, events: summary.events, allocs: summary.allocs, durationNs: summary.durationNs, strategies }
      this.job = null
    } catch (e) {
      this.job = null
      this.error = e instanceof ApiCallError && e.code === 'CANCELLED' ? null : (e as Error).message
    }
  }

  /**
   * Runs the what-if lab on the open trace with the panel's inputs: the configurations pasted (one
   * per line; none: the grid) under the device limit. Its progress shows in the panel.
   */
  async runWhatif(options: { grid?: boolean } = {}): Promise<void> {
    const trace = this.trace
    if (!trace || this.whatifJob) return
    this.whatifError = null
    const traceId = trace.summary.traceId
    // grid: the lab's grid under the limit the recording implies (the out-of-memory panel's one click).
    if (options.grid) this.whatifCap = this.whatifConfs = ''
    const confs = this.whatifConfs
      .split('\n')
      .map((line) => line.trim())
      .filter((line) => line !== '' && !line.startsWith('#'))
    try {
      const { jobId } = await this.client.call('whatif:start', {
        traceId,
        ...(confs.length > 0 && { confs }),
        ...(this.whatifCap.trim() !== '' && { cap: this.whatifCap.trim() }),
        ...(this.whatifDevice.trim() !== '' && { device: this.whatifDevice.trim() }),
      })
      this.whatifJob = { jobId, state: 'running', fraction: 0, phase: 'what-if: starting' }
      await waitForJob(this.client, jobId, (s) => (this.whatifJob = s))
      const report = await this.client.call('whatif:result', { jobId })
      // A trace opened meanwhile has its own lab to run.
      if (this.trace?.summary.traceId === traceId) this.whatif = report
    } catch (e) {
      this.whatifError = e instanceof ApiCallError && e.code === 'CANCELLED' ? null : (e as Error).message
    } finally {
      this.whatifJob = null
    }
  }

  async cancelWhatif(): Promise<void> {
    if (this.whatifJob) await this.client.call('job:cancel', { jobId: this.whatifJob.jobId })
  }

  /**
   * Opens a what-if row in the compare view: its configuration replayed (under the lab's limit)
   * beside the recorded layout, or beside PyTorch's defaults where the trace has none.
   */
  async compareWhatifRow(row: WhatifReportRow): Promise<void> {
    const report = this.whatif
    const trace = this.trace
    if (!report || !trace) return
    const defaults = report.rows.find((r) => r.kind === 'pytorch' && r.conf === '')
    const rows = trace.summary.stored.length === 0 && defaults && defaults !== row ? [defaults, row] : [row]
    this.strategySpec = rows.map((r) => r.replay.strategies).join(',')
    this.cap = row.replay.cap !== undefined ? readableSize(Number(row.replay.cap)) : ''
    this.labelled = { spec: this.strategySpec, labels: rows.map((r) => r.replay.label) }
    this.view = 'compare'
    this.strategies = []
    this.pendingMaps = trace.summary.stored.length + rows.length
    await this.replay()
  }

  async cancelJob(): Promise<void> {
    if (this.job) await this.client.call('job:cancel', { jobId: this.job.jobId })
  }

  seek(event: number): void {
    const [lo, hi] = this.range ?? [0, this.lastEvent]
    this.event = Math.round(Math.min(Math.max(event, lo), hi))
    if (this.playing) {
      this.playStartedAt = performance.now()
      this.playStartEvent = this.event
    }
  }

  step(delta: number): void {
    this.pause()
    this.seek(this.event + delta)
  }

  play(): void {
    if (this.playing || !this.trace) return
    const [lo, hi] = this.range ?? [0, this.lastEvent]
    if (this.event >= hi) this.event = lo
    this.playing = true
    this.playStartedAt = performance.now()
    this.playStartEvent = this.event
    this.playReadout = this.event
    this.playReadoutAt = this.playStartedAt
    const tick = (now: number) => {
      if (!this.playing) return
      const target = this.playStartEvent + ((now - this.playStartedAt) / 1000) * this.speed
      const [, end] = this.range ?? [0, this.lastEvent]
      if (target >= end) {
        this.event = end
        this.playing = false
        return
      }
      this.event = Math.floor(target)
      if (now - this.playReadoutAt >= READOUT_MS) {
        this.playReadout = this.event
        this.playReadoutAt = now
      }
      this.frame = requestAnimationFrame(tick)
    }
    this.frame = requestAnimationFrame(tick)
  }

  pause(): void {
    this.playing = false
    cancelAnimationFrame(this.frame)
  }

  stop(): void {
    this.pause()
  }

  toggle(): void {
    if (this.playing) this.pause()
    else this.play()
  }

  setSpeed(speed: number): void {
    this.speed = speed
    if (this.playing) {
      this.playStartedAt = performance.now()
      this.playStartEvent = this.event
    }
  }

  /** Events a change stays highlighted for: about a second of playback, at least a few events. */
  recentWindow = $derived(Math.max(4, Math.round(this.playing ? this.speed * 0.6 : 8)))

  /** Jumps to the event after which strategy `i` (default: the first) held its peak reserved. */
  jumpToPeak(i = 0): void {
    const s = this.strategies[i]
    // A recorded layout's summary counts layout events, not request events: peak.ts finds its peak.
    if (s) this.seek(peakReservedEvent(s, this.events))
  }

  /** The next failure after the playhead (wrapping to the first): any strategy's, or an out-of-memory the program saw when recorded. */
  jumpToFailure(): void {
    const all: number[] = []
    for (const s of this.strategies) for (const f of s.model.failures) all.push(f)
    const kind = this.trace?.kind
    if (kind) for (let i = 0; i < kind.length; i++) if (kind[i] === 3) all.push(i)
    if (all.length === 0) return
    all.sort((a, b) => a - b)
    this.seek(all.find((f) => f > this.event) ?? all[0]!)
  }

  /** The next marker (step boundary) after the playhead, wrapping. */
  jumpToMarker(direction: 1 | -1 = 1): void {
    const t = this.trace
    if (!t) return
    const markers: number[] = []
    for (let i = 0; i < t.kind.length; i++) if (t.kind[i] === 2) markers.push(i)
    if (markers.length === 0) return
    const next = direction > 0 ? (markers.find((m) => m > this.event) ?? markers[0]!) : (markers.findLast((m) => m < this.event) ?? markers.at(-1)!)
    this.seek(next)
  }

  select(selection: Selection | null): void {
    this.selection = selection
  }

  /** Follows a block of a strategy: its alloc and free, and every block that lived at its address. */
  follow(selection: Selection | null): void {
    const trace = this.trace
    const bands = this.bands
    const view = selection ? this.strategies[selection.strategy] : undefined
    this.followed = selection && trace && bands && view ? follow(trace.kind, trace.id, bands, view.model, selection.strategy, selection.block) : null
  }

  /** Moves the playhead to the next (1) or previous (-1) event of what is followed. */
  stepFollow(direction: 1 | -1): void {
    const f = this.followed
    if (!f) return
    const e = stepFollowed(f.events, this.event, direction)
    if (e >= 0) {
      this.pause()
      this.seek(e)
    }
  }
}
