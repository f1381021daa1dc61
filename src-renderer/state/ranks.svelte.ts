// A job of many ranks (src-shared/ranks.ts): the files dropped or picked together, handed to the
// host one at a time (ranks:stage) and read there as one job (ranks:open), whose summary the strip
// draws (views/JobView.svelte); one rank's maps opened through the loader like any file; another
// rank's beside them at the same moment (besideEvent); the what-if lab over every rank.
import type { JobStatus } from '../../src-shared/contract.ts'
import { besideEvent, type RanksSummary, type RanksWhatifReport } from '../../src-shared/ranks.ts'
import { ApiCallError, waitForJob } from '../api/client.ts'
import type { StrategyView, TraceData } from '../viz/data.ts'
import type { Loader } from './loader.svelte.ts'

/** Another rank's map as MemoryMap draws it beside the open rank's. */
export interface BesideMap {
  rank: number
  view: StrategyView
  /** The other rank's event at the playhead's moment. */
  event: number
  trace: TraceData
  floorBytes?: number
}

/** Another rank replayed through the open rank's strategies, with its events' times to align by. */
interface Beside {
  rank: number
  trace: TraceData
  strategies: StrategyView[]
}

export class RankJob {
  private readonly loader: Loader

  constructor(loader: Loader) {
    this.loader = loader
  }

  /** The job, once read; null without one. */
  summary = $state.raw<RanksSummary | null>(null)
  /** The rank whose maps the loader holds (null: none of the job's). */
  shownRank = $state<number | null>(null)
  /** Another rank beside the shown one. */
  beside = $state.raw<Beside | null>(null)
  besideJob = $state<JobStatus | null>(null)
  /** The what-if lab over every rank. */
  report = $state.raw<RanksWhatifReport | null>(null)
  whatifJob = $state<JobStatus | null>(null)
  whatifError = $state<string | null>(null)
  /** The lab's limit and configurations, as the one-trace lab takes them. */
  cap = $state('')
  confs = $state('')

  clear(): void {
    this.summary = null
    this.shownRank = null
    this.beside = null
    this.report = null
    this.whatifError = null
  }

  private fail(e: unknown): void {
    this.loader.job = null
    this.loader.error = e instanceof ApiCallError && e.code === 'CANCELLED' ? null : (e as Error).message
  }

  /** Hands the files to the host one at a time, then reads them there as one job (it replaces what was open). */
  async open(files: readonly File[]): Promise<void> {
    const loader = this.loader
    const client = loader.client
    loader.error = null
    loader.closeOpen()
    this.clear()
    try {
      const keys: string[] = []
      const total = files.reduce((a, f) => a + f.size, 0)
      let sent = 0
      for (const [i, f] of files.entries()) {
        loader.job = { jobId: '', state: 'running', phase: `sending ${f.name} (${i + 1} of ${files.length})`, fraction: total > 0 ? sent / total : 0 }
        keys.push((await client.stageFile(f)).key)
        sent += f.size
      }
      await this.read(client.call('ranks:open', { keys }))
    } catch (e) {
      this.fail(e)
    }
  }

  /** Opens the job the host was started with (`vramscope serve DIR`: AppInfo.initialJob). */
  async openInitial(): Promise<void> {
    this.loader.error = null
    this.clear()
    try {
      await this.read(this.loader.client.call('ranks:openInitial'))
    } catch (e) {
      this.fail(e)
    }
  }

  private async read(started: Promise<{ jobId: string }>): Promise<void> {
    const loader = this.loader
    const { jobId } = await started
    await waitForJob(loader.client, jobId, (s) => (loader.job = s))
    const summary = await loader.client.call('ranks:result', { jobId })
    // A folder of the ranks' what-if outputs is its report already.
    this.report = summary.report ?? null
    this.summary = summary
    loader.job = null
  }

  /** Opens one rank's maps (the loader's open: its opening replays come with it). */
  async show(rank: number): Promise<void> {
    const job = this.summary
    if (!job) return
    this.beside = null
    this.shownRank = rank
    await this.loader.open(() => this.loader.client.call('ranks:openRank', { ranksId: job.ranksId, rank }))
    if (!this.loader.trace && !this.loader.opening) this.shownRank = null
  }

  /**
   * Replays another rank through the shown rank's strategies (and cap) and keeps its maps and its
   * events' times, so its maps stand beside the shown rank's at the same moment; the other rank's
   * trace is freed on the host once its maps are here.
   */
  async setBeside(rank: number | null): Promise<void> {
    const job = this.summary
    const loader = this.loader
    const client = loader.client
    if (!job || rank === null || rank === this.shownRank) {
      this.beside = null
      return
    }
    loader.error = null
    try {
      const { summary, strategies } = await loader.replayAnother(
        () => client.call('ranks:openRank', { ranksId: job.ranksId, rank }),
        (s) => (this.besideJob = s),
      )
      const trace = await loader.decoder.decode<TraceData>('trace', await client.call('trace:data', { traceId: summary.traceId }))
      void client.call('trace:close', { traceId: summary.traceId }).catch(() => {})
      this.beside = { rank, trace, strategies }
      this.besideJob = null
    } catch (e) {
      this.besideJob = null
      this.fail(e)
    }
  }

  /** The other rank's maps at the moment of the shown rank's event `event`. */
  besideMaps(event: number): BesideMap[] {
    const b = this.beside
    const shown = this.loader.trace
    if (!b || !shown) return []
    const at = besideEvent(event, shown.time, b.trace.time)
    const floorBytes = b.trace.summary.floor?.peakLiveRoundedBytes
    return b.strategies.map((view) => ({ rank: b.rank, view, event: at, trace: b.trace, ...(floorBytes !== undefined && { floorBytes }) }))
  }

  /** The what-if lab over every rank: the settings that fit every rank first. */
  async runWhatif(): Promise<void> {
    const job = this.summary
    if (!job) return
    const client = this.loader.client
    this.whatifError = null
    this.report = null
    try {
      const confs = this.confs
        .split('\n')
        .map((c) => c.trim())
        .filter((c) => c !== '')
      const { jobId } = await client.call('ranks:whatif', {
        ranksId: job.ranksId,
        ...(confs.length > 0 && { confs }),
        ...(this.cap.trim() !== '' && { cap: this.cap.trim() }),
      })
      await waitForJob(client, jobId, (s) => (this.whatifJob = s))
      this.report = await client.call('ranks:whatifResult', { jobId })
    } catch (e) {
      this.whatifError = e instanceof ApiCallError && e.code === 'CANCELLED' ? null : (e as Error).message
    } finally {
      this.whatifJob = null
    }
  }

  async cancelWhatif(): Promise<void> {
    const id = this.whatifJob?.jobId
    if (id) await this.loader.client.call('job:cancel', { jobId: id }).catch(() => {})
  }
}
