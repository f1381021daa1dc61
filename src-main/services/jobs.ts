// The job registry: every long piece of a session's work (opening a file, a replay, the what-if
// lab, a recording) runs as a job here, and the registry owns its start, its status (at once or
// once it settles), its cancel and its end. A job outlives nothing it depends on: when its trace,
// its page or the session goes, it ends `cancelled` and its result is freed, and its status stays
// readable as a tombstone (a bounded number of them), so no reader, on a timer or not, is told
// "no such job" about a job it was handed. Running jobs are bounded per page and in all; the rest
// wait their turn, in order (`queued`). Nothing here knows about a transport: a host learns of each
// change through subscribe() (docs/architecture.md#jobs).
import { randomUUID } from 'node:crypto'

import { ApiError } from '../../src-shared/api-error.ts'
import type { JobStatus } from '../../src-shared/contract.ts'
import { isLive, waitSettled } from '../../src-shared/job-wait.ts'
import { InputError } from './input-error.ts'

/** Jobs of one page that run at once (DEFAULT_PAGE's are bounded only in all); the next wait. */
export const MAX_RUNNING_PER_PAGE = 3
/** Jobs that run at once in a session, every page together. */
export const MAX_RUNNING = 6
/** Jobs one page may have waiting, and the session in all: one more is refused (BUSY). */
export const MAX_QUEUED_PER_PAGE = 64
export const MAX_QUEUED = 256
/** Finished jobs whose results are kept: an older one's result is freed, its job then reads cancelled. */
export const RESULTS_KEPT = 64
/** Ended jobs whose statuses are kept (a few hundred bytes each), for readers that come late. */
export const ENDED_KEPT = 4096

/** The words a waiting job's phase starts with (describeQueue). */
const WAITING = /^waiting for \d+ jobs? to end: /

/** What a job's work sees of its job. */
export interface JobContext {
  readonly jobId: string
  /** Aborted when the job is cancelled or what it depends on goes. */
  readonly signal: AbortSignal
  /** The page the job belongs to now (a prefetched open is handed to the page that takes it). */
  readonly page: string
  /** What the job is doing now, and how far it got (0 to 1; left out: unchanged). */
  progress(phase: string, fraction?: number): void
}

export interface JobLimits {
  maxRunningPerPage?: number
  maxRunning?: number
  maxQueuedPerPage?: number
  maxQueued?: number
  resultsKept?: number
  endedKept?: number
}

interface Job {
  status: JobStatus
  page: string
  /** The trace it depends on: a replay's, the trace an open opened. Closing it ends the job. */
  traceId?: string
  controller: AbortController
  /** Until it starts. */
  work?: (job: JobContext) => Promise<unknown>
  /** Whether its work is running (holding a slot), which may outlast a cancel by a few milliseconds. */
  holdsSlot: boolean
  result?: unknown
  /** Resolves when the status leaves queued and running; never rejects. */
  ended: Promise<void>
  end: () => void
}

export class JobRegistry {
  private readonly jobs = new Map<string, Job>()
  /** Jobs waiting for a slot, oldest first. */
  private readonly queue: Job[] = []
  /** Ended jobs in the order they ended (the oldest's tombstone goes first), and those with a result. */
  private readonly endedOrder = new Set<string>()
  private readonly withResult = new Set<string>()
  private readonly slotsOf = new Map<string, number>()
  private running = 0
  private readonly listeners = new Set<(status: JobStatus) => void>()
  private readonly limits: Required<JobLimits>

  /** `defaultPage`: the page of a host that does not tell pages apart, bounded only in all. */
  constructor(
    limits: JobLimits = {},
    private readonly defaultPage = '',
  ) {
    this.limits = {
      maxRunningPerPage: limits.maxRunningPerPage ?? MAX_RUNNING_PER_PAGE,
      maxRunning: limits.maxRunning ?? MAX_RUNNING,
      maxQueuedPerPage: limits.maxQueuedPerPage ?? MAX_QUEUED_PER_PAGE,
      maxQueued: limits.maxQueued ?? MAX_QUEUED,
      resultsKept: limits.resultsKept ?? RESULTS_KEPT,
      endedKept: limits.endedKept ?? ENDED_KEPT,
    }
  }

  /**
   * Told of every change of every job's status (a copy), as it happens: started, queued,
   * progress, ended, a finished job's end when what it depended on went. A listener that throws
   * is ignored. Returns the unsubscribe.
   */
  subscribe(listener: (status: JobStatus) => void): () => void {
    this.listeners.add(listener)
    return () => this.listeners.delete(listener)
  }

  /**
   * Starts `work` as a job of `page` (depending on `traceId` where given), now if a slot is free,
   * else once one is. Throws BUSY when the page, or the session, has too many jobs waiting.
   */
  start<T>(owner: { page: string; traceId?: string }, phase: string, work: (job: JobContext) => Promise<T>): string {
    const { maxQueuedPerPage, maxQueued } = this.limits
    if (!this.hasSlot(owner.page)) {
      if (this.queue.length >= maxQueued)
        throw new ApiError('BUSY', `vramscope has ${this.queue.length} jobs waiting to run; wait for some to end or cancel them`)
      if (owner.page !== this.defaultPage && this.queue.filter((j) => j.page === owner.page).length >= maxQueuedPerPage)
        throw new ApiError('BUSY', `this page has ${maxQueuedPerPage} jobs waiting to run; wait for some to end or cancel them`)
    }
    const jobId = randomUUID()
    let end = () => {}
    const ended = new Promise<void>((resolve) => (end = resolve))
    const job: Job = {
      status: { jobId, state: 'queued', fraction: 0, phase },
      page: owner.page,
      ...(owner.traceId !== undefined && { traceId: owner.traceId }),
      controller: new AbortController(),
      work,
      holdsSlot: false,
      ended,
      end,
    }
    this.jobs.set(jobId, job)
    if (this.hasSlot(job.page)) this.run(job)
    else {
      this.queue.push(job)
      this.describeQueue()
    }
    return jobId
  }

  /** A job's status now. Throws NOT_FOUND only for an id it never gave out (or long forgotten). */
  status(jobId: string): JobStatus {
    return { ...this.job(jobId).status }
  }

  /** A job's status once it has ended or `waitMs` has passed (waitSettled), whichever is first. */
  async statusAfter(jobId: string, waitMs: number | undefined): Promise<JobStatus> {
    const job = this.job(jobId)
    if (isLive(job.status)) await waitSettled(job.ended, waitMs)
    return { ...job.status }
  }

  /** Waits for a job to end (the replays started ahead of a page wait for the open; tests). */
  async settled(jobId: string): Promise<JobStatus> {
    const job = this.job(jobId)
    await job.ended
    return { ...job.status }
  }

  /** A finished job's result; BAD_INPUT, saying what became of it, for any other. */
  result<T>(jobId: string): T {
    const job = this.job(jobId)
    if (job.status.state !== 'done') {
      const why = job.status.error?.message
      throw new ApiError('BAD_INPUT', `job: ${jobId} is ${job.status.state}, not done${why !== undefined && why !== job.status.state ? ` (${why})` : ''}`)
    }
    return job.result as T
  }

  /** A job's result if it is done and kept, else undefined (never throws). */
  resultIfDone<T>(jobId: string): T | undefined {
    const job = this.jobs.get(jobId)
    return job?.status.state === 'done' ? (job.result as T) : undefined
  }

  /**
   * Cancels a job that is waiting or running: it reads `cancelled` at once, its work's signal is
   * aborted (a replay's threads stop within milliseconds, services/replay/replay.ts) and its slot
   * is free once the work has returned. `cancelled` false, with its state, for a job that had
   * ended already; without a state for an id never given out.
   */
  cancel(jobId: string, reason = 'cancelled'): { cancelled: boolean; state?: JobStatus['state'] } {
    const job = this.jobs.get(jobId)
    if (!job) return { cancelled: false }
    if (!isLive(job.status)) return { cancelled: false, state: job.status.state }
    this.stop(job, reason)
    return { cancelled: true, state: job.status.state }
  }

  /**
   * Ends every job of `page` or depending on `traceId` (what it needed is gone, `reason` says
   * why): waiting and running ones are cancelled, finished ones read cancelled and their results
   * are freed; failed ones stay failed. Returns how many changed.
   */
  endFor(which: { page: string } | { traceId: string }, reason: string): number {
    let changed = 0
    for (const job of this.jobs.values()) {
      if ('page' in which ? job.page !== which.page : job.traceId !== which.traceId) continue
      if (isLive(job.status)) this.stop(job, reason)
      else if (job.status.state === 'done') this.tombstone(job, reason)
      else continue
      changed++
    }
    return changed
  }

  /** Hands a job to `page` (a prefetched open, a replay started ahead); false if it has ended other than done. */
  handTo(jobId: string, page: string): boolean {
    const job = this.jobs.get(jobId)
    if (!job || (!isLive(job.status) && job.status.state !== 'done')) return false
    if (job.holdsSlot) {
      this.release(job.page)
      this.slotsOf.set(page, (this.slotsOf.get(page) ?? 0) + 1)
    }
    job.page = page
    return true
  }

  /** Makes a job depend on `traceId` (an open, on the trace it opened): closing the trace ends it. */
  dependOn(jobId: string, traceId: string): void {
    const job = this.jobs.get(jobId)
    if (job) job.traceId = traceId
  }

  /** How many jobs wait, run (hold a slot) and are known in all: for tests and diagnostics. */
  counts(): { queued: number; running: number; known: number } {
    return { queued: this.queue.length, running: this.running, known: this.jobs.size }
  }

  private job(jobId: string): Job {
    const job = this.jobs.get(jobId)
    if (!job) throw new ApiError('NOT_FOUND', `job: no job ${JSON.stringify(jobId)}`)
    return job
  }

  private hasSlot(page: string): boolean {
    if (this.running >= this.limits.maxRunning) return false
    return page === this.defaultPage || (this.slotsOf.get(page) ?? 0) < this.limits.maxRunningPerPage
  }

  private release(page: string): void {
    const n = (this.slotsOf.get(page) ?? 0) - 1
    if (n > 0) this.slotsOf.set(page, n)
    else this.slotsOf.delete(page)
  }

  private run(job: Job): void {
    const work = job.work!
    job.work = undefined
    job.holdsSlot = true
    this.running++
    this.slotsOf.set(job.page, (this.slotsOf.get(job.page) ?? 0) + 1)
    job.status.state = 'running'
    job.status.phase = job.status.phase.replace(WAITING, '')
    this.changed(job)
    const registry = this
    const context: JobContext = {
      jobId: job.status.jobId,
      signal: job.controller.signal,
      get page() {
        return job.page
      },
      progress(phase, fraction) {
        if (job.status.state !== 'running') return
        job.status.phase = phase
        if (fraction !== undefined) job.status.fraction = fraction
        registry.changed(job)
      },
    }
    void (async () => {
      let outcome: { ok: true; value: unknown } | { ok: false; error: unknown }
      try {
        outcome = { ok: true, value: await work(context) }
      } catch (error) {
        outcome = { ok: false, error }
      }
      job.holdsSlot = false
      this.running--
      this.release(job.page)
      if (job.status.state === 'running') {
        if (outcome.ok) {
          job.result = outcome.value
          this.finish(job, { state: 'done', fraction: 1 })
          this.withResult.add(job.status.jobId)
          this.freeOldResults()
        } else if (job.controller.signal.aborted) this.finish(job, { state: 'cancelled', error: { message: 'cancelled', code: 'CANCELLED' } })
        else {
          const error = outcome.error as Error & { code?: unknown }
          const code = error instanceof InputError ? 'BAD_INPUT' : typeof error?.code === 'string' ? error.code : 'INTERNAL'
          this.finish(job, { state: 'failed', error: { message: error?.message ?? String(error), code } })
        }
      }
      this.pump()
    })()
  }

  /** Starts the waiting jobs that have a slot now, oldest first. */
  private pump(): void {
    let started = false
    for (let i = 0; i < this.queue.length && this.running < this.limits.maxRunning;) {
      const job = this.queue[i]!
      if (!this.hasSlot(job.page)) {
        i++
        continue
      }
      this.queue.splice(i, 1)
      this.run(job)
      started = true
    }
    if (started) this.describeQueue()
  }

  /** A waiting job's phase says how many wait before it. */
  private describeQueue(): void {
    this.queue.forEach((job, ahead) => {
      const phase = job.status.phase.replace(WAITING, '')
      job.status.phase = `waiting for ${this.running + ahead} job${this.running + ahead === 1 ? '' : 's'} to end: ${phase}`
      this.changed(job)
    })
  }

  /** Cancels a live job: out of the queue, or its work aborted; it reads cancelled from now on. */
  private stop(job: Job, reason: string): void {
    if (job.status.state === 'queued') {
      const at = this.queue.indexOf(job)
      if (at >= 0) this.queue.splice(at, 1)
      job.work = undefined
      job.status.phase = job.status.phase.replace(WAITING, '')
    }
    job.controller.abort(new Error(reason))
    this.finish(job, { state: 'cancelled', error: { message: reason, code: 'CANCELLED' } })
    this.pump()
  }

  /** A finished job whose trace or page went: it reads cancelled and its result is freed. */
  private tombstone(job: Job, reason: string): void {
    job.result = undefined
    this.withResult.delete(job.status.jobId)
    job.status = {
      jobId: job.status.jobId,
      state: 'cancelled',
      fraction: job.status.fraction,
      phase: job.status.phase,
      error: { message: reason, code: 'CANCELLED' },
    }
    this.changed(job)
  }

  private finish(job: Job, to: Pick<JobStatus, 'state'> & Partial<JobStatus>): void {
    job.status = { ...job.status, ...to }
    this.endedOrder.add(job.status.jobId)
    job.end()
    this.changed(job)
    // The oldest tombstones go once there are more than the registry keeps.
    for (const id of this.endedOrder) {
      if (this.endedOrder.size <= this.limits.endedKept) break
      this.endedOrder.delete(id)
      this.withResult.delete(id)
      this.jobs.delete(id)
    }
  }

  private freeOldResults(): void {
    for (const id of this.withResult) {
      if (this.withResult.size <= this.limits.resultsKept) break
      const job = this.jobs.get(id)
      if (job) this.tombstone(job, `its result was freed: vramscope keeps the results of the last ${this.limits.resultsKept} jobs`)
    }
  }

  private changed(job: Job): void {
    const status = { ...job.status }
    for (const listener of this.listeners)
      try {
        listener(status)
      } catch {
        // A listener's failure is its own: the job and the other listeners go on.
      }
  }
}
