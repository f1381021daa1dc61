// The app's shared state, in rooms: the loader (what is open, how it opens and replays: loader.svelte.ts,
// its decode workers decoder.ts), the playhead (playback.svelte.ts), the selection and the block
// followed (selection.svelte.ts), the what-if lab (whatif.svelte.ts), the diff (diff.svelte.ts) and a
// job of many ranks (ranks.svelte.ts).
// AppState composes them and holds the UI's own flags; views read `app.xxx` (forwarded to its room
// here) and call its methods; nothing else holds state that two views need.
import type { RecordPytorchRequest, RecordRequest } from '../../src-shared/contract.ts'
import type { WhatifReportRow } from '../../src-shared/whatif-report.ts'
import type { ColorBy } from '../viz/categories.ts'
import { exportFileStem } from '../viz/export.ts'
import { exportPng, exportSvg } from '../viz/export-page.ts'
import { formatCount } from '../viz/format.ts'
import { frameLegend } from '../viz/categories.ts'
import type { Theme } from '../viz/palette.ts'
import { Diffing, type DiffSide } from './diff.svelte.ts'
import { Loader } from './loader.svelte.ts'
import { Playback } from './playback.svelte.ts'
import { RankJob } from './ranks.svelte.ts'
import { Selecting, type Selection } from './selection.svelte.ts'
import { readableSize, WhatifLab } from './whatif.svelte.ts'

export type { ColorBy }
export type { Theme }
export type { DiffSide }
export type { Selection }
export { readableSize }
/** What the main area shows: the strategies side by side, the what-if lab, or a job's ranks. */
export type View = 'compare' | 'whatif' | 'job'

export class AppState {
  readonly playback: Playback = new Playback(() => this.loader)
  readonly loader: Loader = new Loader(this.playback, {
    opened: () => {
      this.selecting.clear()
      this.playback.range = null
      this.lab.clear()
      // A diff is of the trace it was opened beside: another file ends it.
      this.diffing.side = null
    },
    replayed: () => this.selecting.clear(),
  })
  readonly selecting: Selecting = new Selecting(() => this.loader, this.playback)
  readonly lab: WhatifLab = new WhatifLab(this.loader.client, () => this.loader.trace)
  readonly diffing: Diffing = new Diffing(this.loader)
  readonly ranks: RankJob = new RankJob(this.loader)

  colorBy = $state<ColorBy>('stream')
  theme = $state<Theme>('light')
  showHelp = $state(false)
  /** The record panel (built-in GPU workloads). */
  showRecord = $state(false)
  view = $state<View>('compare')

  // The loader's: what is open, its maps, the job running, the last error (loader.svelte.ts).
  get client() {
    return this.loader.client
  }
  get info() {
    return this.loader.info
  }
  get recent() {
    return this.loader.recent
  }
  get trace() {
    return this.loader.trace
  }
  get strategies() {
    return this.loader.strategies
  }
  get previews() {
    return this.loader.previews
  }
  get shownPreviews() {
    return this.loader.shownPreviews
  }
  get mapsDrawn() {
    return this.loader.mapsDrawn
  }
  get mapViews() {
    return this.loader.mapViews
  }
  get pendingMaps() {
    return this.loader.pendingMaps
  }
  get mapCount() {
    return this.loader.mapCount
  }
  get strategySpec() {
    return this.loader.strategySpec
  }
  set strategySpec(spec: string) {
    this.loader.strategySpec = spec
  }
  get cap() {
    return this.loader.cap
  }
  set cap(cap: string) {
    this.loader.cap = cap
  }
  get job() {
    return this.loader.job
  }
  set job(job: Loader['job']) {
    this.loader.job = job
  }
  get error() {
    return this.loader.error
  }
  set error(error: string | null) {
    this.loader.error = error
  }
  /** The trace the toolbar names: the open one, or the one being opened. */
  get shown() {
    return this.loader.shown
  }
  /** The device the replayed strategies ran on. */
  get replayDevice() {
    return this.loader.replayDevice
  }
  get timings() {
    return this.loader.timings
  }
  get bands() {
    return this.loader.bands
  }
  get opening() {
    return this.loader.opening
  }
  get columnsAsked() {
    return this.loader.columnsAsked
  }
  get requested() {
    return this.loader.requested
  }
  get recordedReserved() {
    return this.loader.recordedReserved
  }
  get events() {
    return this.loader.events
  }
  get lastEvent() {
    return this.loader.lastEvent
  }

  /** Asks the host what it has, and opens what it was started with: a file, or a job of many ranks. */
  start = async () => {
    await this.loader.start()
    if (this.loader.info?.initialJob) {
      this.view = 'job'
      await this.ranks.openInitial()
    }
  }
  open = (start: () => Promise<{ jobId: string }>) => this.loader.open(start)
  // A file opened on its own ends a job of many ranks.
  openSample = (name: string) => (this.ranks.clear(), this.loader.openSample(name))
  openFile = (file: File) => (this.ranks.clear(), this.loader.openFile(file))
  openRecent = (key: string) => (this.ranks.clear(), this.loader.openRecent(key))
  /** Files dropped or picked together: one file opens as itself, several as one job of many ranks. */
  openFiles = async (files: readonly File[]) => {
    if (files.length === 0) return
    if (files.length === 1) return this.openFile(files[0]!)
    this.view = 'job'
    await this.ranks.open(files)
    if (!this.ranks.summary && this.view === 'job') this.view = 'compare'
  }
  /** One rank of the job, its maps in the compare view. */
  showRank = async (rank: number) => {
    this.view = 'compare'
    await this.ranks.show(rank)
  }
  replay = () => this.loader.replay()
  cancelJob = () => this.loader.cancelJob()
  /** Records a built-in workload on this host's GPU, then opens the recording like any file. */
  recordWorkload(request: RecordRequest) {
    this.showRecord = false
    return this.loader.recordWorkload(request)
  }
  /** Records a PyTorch program at tensor level on this host (record --pytorch), then opens its snapshot. */
  recordPytorch(request: RecordPytorchRequest) {
    this.showRecord = false
    return this.loader.recordPytorch(request)
  }

  // The playhead's (playback.svelte.ts).
  get event() {
    return this.playback.event
  }
  get playing() {
    return this.playback.playing
  }
  get readoutEvent() {
    return this.playback.readoutEvent
  }
  get speed() {
    return this.playback.speed
  }
  get range() {
    return this.playback.range
  }
  set range(range: [number, number] | null) {
    this.playback.range = range
  }
  get recentWindow() {
    return this.playback.recentWindow
  }
  seek = (event: number) => this.playback.seek(event)
  step = (delta: number) => this.playback.step(delta)
  play = () => this.playback.play()
  pause = () => this.playback.pause()
  stop = () => this.playback.stop()
  toggle = () => this.playback.toggle()
  setSpeed = (speed: number) => this.playback.setSpeed(speed)
  jumpToPeak = (i = 0) => this.playback.jumpToPeak(i)
  jumpToFailure = () => this.playback.jumpToFailure()
  jumpToMarker = (direction: 1 | -1 = 1) => this.playback.jumpToMarker(direction)

  // The selection's (selection.svelte.ts).
  get selection() {
    return this.selecting.selection
  }
  get followed() {
    return this.selecting.followed
  }
  select = (selection: Selection | null) => this.selecting.select(selection)
  follow = (selection: Selection | null) => this.selecting.follow(selection)
  stepFollow = (direction: 1 | -1) => this.selecting.stepFollow(direction)

  // The what-if lab's (whatif.svelte.ts) and the diff's (diff.svelte.ts).
  get whatifCap() {
    return this.lab.cap
  }
  set whatifCap(cap: string) {
    this.lab.cap = cap
  }
  get whatifDevice() {
    return this.lab.device
  }
  set whatifDevice(device: string) {
    this.lab.device = device
  }
  get whatifConfs() {
    return this.lab.confs
  }
  set whatifConfs(confs: string) {
    this.lab.confs = confs
  }
  get whatifJob() {
    return this.lab.job
  }
  get whatif() {
    return this.lab.report
  }
  get whatifError() {
    return this.lab.error
  }
  runWhatif = (options: { grid?: boolean } = {}) => this.lab.run(options)
  cancelWhatif = () => this.lab.cancel()
  get diff() {
    return this.diffing.side
  }
  set diff(side: DiffSide | null) {
    this.diffing.side = side
  }
  openDiff = (start: () => Promise<{ jobId: string }>) => this.diffing.open(start)

  /**
   * Opens a what-if row in the compare view: its configuration replayed (under the lab's limit)
   * beside the recorded layout, or beside PyTorch's defaults where the trace has none.
   */
  async compareWhatifRow(row: WhatifReportRow): Promise<void> {
    const report = this.lab.report
    const loader = this.loader
    const trace = loader.trace
    if (!report || !trace) return
    const defaults = report.rows.find((r) => r.kind === 'pytorch' && r.conf === '')
    const rows = trace.summary.stored.length === 0 && defaults && defaults !== row ? [defaults, row] : [row]
    loader.strategySpec = rows.map((r) => r.replay.strategies).join(',')
    loader.cap = row.replay.cap !== undefined ? readableSize(Number(row.replay.cap)) : ''
    loader.labelled = { spec: loader.strategySpec, labels: rows.map((r) => r.replay.label) }
    this.view = 'compare'
    loader.strategies = []
    loader.pendingMaps = trace.summary.stored.length + rows.length
    await loader.replay()
  }

  /** The maps as on screen, their titles and the metrics at the playhead, downloaded as one file. */
  exportView(format: 'png' | 'svg'): void {
    const t = this.trace
    if (!t || this.strategies.length === 0) return
    const source = {
      heading: `${t.summary.name} · event ${formatCount(this.event)} of ${formatCount(this.lastEvent)}`,
      fileStem: exportFileStem(t.summary.name, this.event),
      strategies: this.strategies,
      event: this.event,
      legend: frameLegend(t, this.colorBy),
    }
    try {
      if (format === 'png') exportPng(source).catch((e: Error) => (this.error = `Export failed: ${e.message}`))
      else exportSvg(source)
    } catch (e) {
      this.error = `Export failed: ${(e as Error).message}`
    }
  }
}
