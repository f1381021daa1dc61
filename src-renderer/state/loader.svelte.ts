// The loader: what is open and how it opens. It reaches the host (the transport client), opens a
// trace (its summary, then its maps as previews, then its columns and whole maps: the opening),
// replays it with the strategies asked for, and hands bundles to the decode workers (decoder.ts).
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
import { ApiCallError, createClient, PROGRESS_MS, waitForJob, type Client } from '../api/client.ts'
import { allocBands } from '../viz/alloc-timeline.ts'
import type { StrategyView, TraceData } from '../viz/data.ts'
import { strategiesNamed } from '../viz/strategy-count.ts'
import { Decoder } from './decoder.ts'
import type { Playback } from './playback.svelte.ts'

/**
 * How long an open waits for the other maps' replays before it asks for the trace's columns anyway
 * (ms): long enough for a 1 M-event trace's on two cores, short enough that a much larger trace's
 * timeline and event list are not held behind replays of tens of seconds.
 */
const OTHER_MAPS_WAIT_MS = 4000

/** What the other rooms forget when the loader opens a trace or replays it again (AppState). */
export interface LoaderRooms {
  /** A trace is opening: no selection, follow, range, what-if report or diff of the one it replaces. */
  opened(): void
  /** Its strategies replay again: no selection or follow of the maps they replace. */
  replayed(): void
}

export class Loader {
  private readonly playback: Playback
  private readonly rooms: LoaderRooms

  constructor(playback: Playback, rooms: LoaderRooms) {
    this.playback = playback
    this.rooms = rooms
  }

  readonly client: Client = createClient()
  readonly decoder = new Decoder()

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
  /** A running job (open, replay), for the progress bar and its cancel button. */
  job = $state<JobStatus | null>(null)
  error = $state<string | null>(null)
  /** Map titles for the strategies of `strategySpec` while it is the spec they were given for. */
  labelled: { spec: string; labels: string[] } | null = null
  /** Figures of the last load, for the status line and benchmarks. */
  timings = $state<{ openMs: number; replayMs: number; decodeMs: number }>({ openMs: 0, replayMs: 0, decodeMs: 0 })

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
  /** The real allocator's reserved bytes as the source recorded them (a profiler trace's), from the summary; null without. */
  recordedReserved = $derived((this.opening ?? this.trace?.summary)?.recordedReserved ?? null)

  /** The trace the toolbar names: the open one, or the one being opened. */
  shown = $derived(this.opening ?? this.trace?.summary ?? null)
  // The device the replayed strategies ran on (the host's one rule, src-main/services/replay/device.ts), said as the lab says it.
  replayDevice = $derived(this.strategies.find((s) => s.device)?.device)

  events = $derived(this.trace?.kind.length ?? this.opening?.events ?? 0)
  lastEvent = $derived(Math.max(0, this.events - 1))

  /** Opens started or failed so far: a first replay shows its progress only while its open is the latest. */
  private opens = 0
  /** Replay jobs whose maps were fetched once they had ended (whenDone): nothing to wait for. */
  private readonly doneJobs = new Set<string>()
  /** The event open() put the playhead at, until the first maps land and move it to their peak (unless the user moved it). */
  private openedAt: number | null = null

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

  /**
   * Opens another trace and replays it through the open one's strategies and cap (a diff's other
   * side, a job's other rank), not through its opening's; `onStatus` hears both jobs. The other
   * trace stays open on the host: the caller closes it once it has what it needs.
   */
  async replayAnother(
    start: () => Promise<{ jobId: string }>,
    onStatus: (s: JobStatus) => void,
  ): Promise<{ summary: TraceSummary; strategies: StrategyView[] }> {
    const client = this.client
    const { jobId } = await start()
    const opened = await waitForJob(client, jobId, onStatus)
    const summary = opened.summary ?? (await client.call('job:result', { jobId }))
    this.dropOpening(summary)
    const replay = await client.call('replay:start', {
      traceId: summary.traceId,
      strategies: this.strategySpec,
      ...(this.cap.trim() !== '' && { cap: this.cap.trim() }),
    })
    await waitForJob(client, replay.jobId, onStatus)
    const strategies = await this.decoder.decode<StrategyView[]>('replay', await client.call('replay:result', { jobId: replay.jobId }))
    return { summary, strategies }
  }

  /**
   * Lets the open trace go, here and on the host (a job of many ranks replaces it): nothing is
   * open after, and what was selected, asked of the lab or diffed goes with it.
   */
  closeOpen(): void {
    this.playback.stop()
    const open = this.trace?.summary.traceId ?? this.opening?.traceId
    if (open !== undefined) void this.client.call('trace:close', { traceId: open }).catch(() => {})
    this.opens++
    this.trace = null
    this.opening = null
    this.strategies = []
    this.previews = []
    this.pendingMaps = 0
    this.rooms.opened()
  }

  /** Opens something (a sample, a dropped file, a recent file) and replays it with the current strategies. */
  async open(start: () => Promise<{ jobId: string }>): Promise<void> {
    this.playback.stop()
    this.error = null
    // Map titles of a what-if row belong to the trace it was run on.
    this.labelled = null
    const t0 = performance.now()
    // This open is the latest from here on: one started, or a close (a job of many ranks), while it
    // waits takes over, and this one then goes no further.
    const openNumber = ++this.opens
    try {
      const { jobId } = await start()
      const opened = await waitForJob(this.client, jobId, (s) => {
        if (this.opens === openNumber) this.job = s
      })
      const summary = opened.summary ?? (await this.client.call('job:result', { jobId }))
      if (this.opens !== openNumber) {
        void this.client.call('trace:close', { traceId: summary.traceId }).catch(() => {})
        return
      }
      // The host started the opening's replays as it opened the file (TraceSummary.opening): the
      // page draws them where they are what it would ask for, else asks for its own.
      const opening = this.openingFor(summary)
      // The first map's replay runs on the host while the page draws the summary; its progress
      // shows in the first map's pane (while this open is the latest and has not failed), and its
      // result is fetched, decoded and drawn before the trace's columns are asked for (below).
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
      this.strategies = []
      this.previews = []
      this.pendingMaps = summary.stored.length + this.strategiesInSpec()
      // What was selected, followed, brushed, asked of the lab or diffed belongs to the trace replaced.
      this.rooms.opened()
      // A recorded out-of-memory is what such a file is opened to look at: the playhead starts there
      // and stays. Otherwise at the end until the first map lands, then at its peak of reserved
      // memory (showFirst).
      if (summary.oom) {
        this.playback.event = Math.min(summary.oom.event, last)
        this.openedAt = null
      } else {
        this.playback.event = last
        this.openedAt = this.playback.event
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
          rest = opening ? Promise.resolve({ jobId: opening.rest }) : this.startReplay(restReplay(summary, this.strategySpec, this.playback.event))
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
      // Closed (a job of many ranks) or replaced while its columns crossed: it stays closed.
      if (this.opens !== openNumber) {
        void this.client.call('trace:close', { traceId: summary.traceId }).catch(() => {})
        return
      }
      this.trace = data
      this.opening = null
      this.timings = { ...this.timings, openMs: performance.now() - t0 }
      void this.client.call('trace:recent').then((recent) => (this.recent = recent))
      await this.replay(firstViews, rest, restPreviews ?? undefined)
    } catch (e) {
      // An open another took over fails quietly: what shows is the other's.
      if (this.opens !== openNumber) return
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
    return this.open(() => this.client.call('record:workload', request))
  }
  /** Records a PyTorch program at tensor level on this host (record --pytorch), then opens its snapshot. */
  recordPytorch(request: RecordPytorchRequest) {
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
  dropOpening(summary: TraceSummary): void {
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
      // A trace closed or replaced while its maps replayed keeps none of them.
      if (this.trace !== trace) return
      this.showFirst(first)
      this.showBands()
      // The rest of the spec's strategies (the first job replayed `count` of them).
      this.rooms.replayed()
      const others = this.laterStrategies(trace.summary.stored)
      // Their previews are cut at the playhead's event (where the first map opened, on an open).
      const rest = await this.replayResult(
        restStarted ?? this.startReplay(restReplay(trace.summary, this.strategySpec, this.playback.event)),
        undefined,
        others,
        first.length,
        restStarted && restPreviews,
      )
      decodeMs += this.decoder.lastMs
      if (this.trace !== trace) return
      if (rest.length > 0) this.strategies = [...first, ...rest]
      this.previews = []
      this.pendingMaps = 0
      this.timings = { ...this.timings, replayMs: performance.now() - t0, decodeMs }
      this.job = null
    } catch (e) {
      if (this.trace !== trace) return
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
      if (this.openedAt !== null && this.openedAt === this.playback.event) this.playback.seek(cut.previewAt!)
    } else {
      this.pendingMaps = Math.max(0, this.pendingMaps - Math.max(0, first.length - this.previews.length))
      this.strategies = first
      if (this.openedAt !== null && this.openedAt === this.playback.event && first.length > 0) this.playback.jumpToPeak(0)
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

  async cancelJob(): Promise<void> {
    if (this.job) await this.client.call('job:cancel', { jobId: this.job.jobId })
  }
}
