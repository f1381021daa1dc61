// The app's side of the worker process: calls with ids over a HostTransport, a cache of every job's
// latest status (pushed by the worker, which `job:status` is answered from, waiting as the
// worker's registry would: services/jobs.ts), and recovery. If the worker dies (a crash, a CUDA
// fault, a kill), every pending call rejects with a WorkerExitedError that says how it ended and
// what it was doing, its running jobs read as failed with the same words, and the next call starts
// a fresh one; closed on purpose, its jobs read cancelled.
import { specOf, type BundleChannel, type Channel, type ChannelResult, type JobStatus, type TraceSummary } from '../../src-shared/contract.ts'
import { isLive, waitSettled } from '../../src-shared/job-wait.ts'
import type { BundleFile } from './bundle-file.ts'
import type { HostTransport, SessionRequest, WorkerExit, WorkerInit, WorkerMessage, WorkerRequest } from './protocol.ts'

/** A call (or a job) lost because the worker process ended. */
export class WorkerExitedError extends Error {
  readonly code = 'WORKER_EXITED'
  constructor(
    message: string,
    readonly exit: WorkerExit,
  ) {
    super(message)
  }
}

/**
 * The worker's result for a channel: bundles arrive as the bytes of one ArrayBuffer, or as a file
 * the caller now owns (a worker forked by Node, for large bundles: bundle-file.ts).
 */
export type WorkerResult<C extends Channel> = C extends BundleChannel ? ArrayBuffer | BundleFile : ChannelResult<C>

interface Pending {
  resolve(value: unknown): void
  reject(error: Error): void
}

interface Worker {
  transport: HostTransport
  generation: number
  pending: Map<number, Pending>
  /** close() asked for this exit: no crash to report. */
  closing: boolean
}

interface KnownJob {
  generation: number
  status: JobStatus
  /** Resolves once a status that is not live arrives (or the worker ends). */
  settled: Promise<void>
  settle: () => void
}

function knownJob(generation: number, status: JobStatus): KnownJob {
  let settle = () => {}
  const settled = new Promise<void>((resolve) => (settle = resolve))
  if (!isLive(status)) settle()
  return { generation, status, settled, settle }
}

export interface WorkerClientOptions {
  /** Starts one worker process (utilityProcess.fork in the app, child_process.fork in tests). */
  spawn: () => HostTransport
  init: WorkerInit
  /** Told when a worker ends without being asked to (the app shows it in its windows). */
  onCrash?: (error: WorkerExitedError) => void
}

const JOBS_KEPT = 256

/** "killed by signal SIGKILL", "exited with code 3", "crashed (Electron: oom, code 9)". */
export function describeExit(exit: WorkerExit): string {
  const how = exit.signal !== null ? `was killed by signal ${exit.signal}` : exit.code !== null ? `exited with code ${exit.code}` : 'ended'
  return exit.reason !== undefined && exit.reason !== 'clean-exit' ? `${how} (${exit.reason})` : how
}

export class WorkerClient {
  private worker: Worker | undefined
  private generation = 0
  private nextId = 1
  private readonly jobs = new Map<string, KnownJob>()
  /** Which worker holds each opened trace: a trace dies with its worker. */
  private readonly traces = new Map<string, number>()
  /** Generations that ended, with what to tell the user about them. */
  private readonly ended = new Map<number, WorkerExitedError>()

  constructor(private readonly options: WorkerClientOptions) {}

  /** The running worker's process id, if one is running. */
  get pid(): number | undefined {
    return this.worker?.transport.pid
  }

  /** The running worker's folder for bundle files, where it has one. */
  get bundleDir(): string | undefined {
    return this.worker?.transport.bundleDir
  }

  /** Generation of the running worker (1 for the first, +1 after each restart); 0 before any. */
  get workerGeneration(): number {
    return this.worker?.generation ?? 0
  }

  /** One call of the contract; `page`: the web host's page it comes from (what it opens is that page's). */
  async call<C extends Channel>(channel: C, arg: unknown, page?: string): Promise<WorkerResult<C>> {
    const a = (arg ?? {}) as Record<string, unknown>
    this.checkAlive(channel, a)
    if (channel === 'job:status') {
      const known = this.jobs.get(a['jobId'] as string)
      if (known) {
        if (isLive(known.status)) await waitSettled(known.settled, a['waitMs'] as number | undefined)
        return { ...known.status } as WorkerResult<C>
      }
    }
    const worker = this.ensureWorker()
    const value = await this.send(worker, (id) => ({ type: 'call', id, channel, arg, ...(page !== undefined && { page }) }))
    this.note(channel, worker.generation, value)
    return value as WorkerResult<C>
  }

  /** The web host's requests besides the channels (protocol.ts, SessionRequest); an upload's open is a job like any. */
  async session(request: SessionRequest): Promise<unknown> {
    const worker = this.ensureWorker()
    const value = await this.send(worker, (id) => ({ type: 'session', id, request }))
    if (request.op === 'openUploadedFile') this.note('trace:openBytes', worker.generation, value)
    return value
  }

  private send(worker: Worker, message: (id: number) => WorkerRequest): Promise<unknown> {
    const id = this.nextId++
    return new Promise<unknown>((resolve, reject) => {
      worker.pending.set(id, { resolve, reject })
      try {
        worker.transport.post(message(id))
      } catch (e) {
        worker.pending.delete(id)
        reject(e as Error)
      }
    })
  }

  /** A job's latest status as the worker last reported it, if the job is known here. */
  knownJob(jobId: string): JobStatus | undefined {
    const known = this.jobs.get(jobId)
    return known && { ...known.status }
  }

  /** Ends the worker (no crash is reported); the next call starts a fresh one. */
  async close(): Promise<void> {
    const worker = this.worker
    if (!worker) return
    worker.closing = true
    await new Promise<void>((resolve) => {
      worker.transport.onExit(() => resolve())
      worker.transport.kill()
    })
  }

  /** Calls about a trace or job of a worker that has died fail with how it died. */
  private checkAlive(channel: Channel, arg: Record<string, unknown>): void {
    let generation: number | undefined
    if (typeof arg['traceId'] === 'string') generation = this.traces.get(arg['traceId'])
    if (typeof arg['jobId'] === 'string') generation = this.jobs.get(arg['jobId'])?.generation
    const died = generation !== undefined ? this.ended.get(generation) : undefined
    if (!died || channel === 'job:status' || channel === 'job:cancel') return
    const what = typeof arg['traceId'] === 'string' ? 'this trace was opened' : 'this job ran'
    throw new WorkerExitedError(`${what} in a worker process that has since ended: ${died.message}`, died.exit)
  }

  private note(channel: Channel, generation: number, value: unknown): void {
    if (channel === 'job:result') this.traces.set((value as TraceSummary).traceId, generation)
    if (!specOf(channel).job) return
    const { jobId } = value as { jobId: string }
    // The worker's first status push may have arrived before this reply.
    if (!this.jobs.has(jobId)) this.jobs.set(jobId, knownJob(generation, { jobId, state: 'running', fraction: 0, phase: 'starting' }))
    if (this.jobs.size > JOBS_KEPT)
      for (const [id, job] of this.jobs) {
        if (this.jobs.size <= JOBS_KEPT) break
        if (!isLive(job.status)) this.jobs.delete(id)
      }
  }

  private ensureWorker(): Worker {
    if (this.worker) return this.worker
    const transport = this.options.spawn()
    const worker: Worker = { transport, generation: ++this.generation, pending: new Map(), closing: false }
    this.worker = worker
    transport.onMessage((message) => this.receive(worker, message))
    transport.onExit((exit) => this.exited(worker, exit))
    transport.post({ type: 'init', options: this.options.init })
    return worker
  }

  private receive(worker: Worker, message: WorkerMessage): void {
    switch (message.type) {
      case 'ready':
        return
      case 'job': {
        const known = this.jobs.get(message.status.jobId)
        if (!known) this.jobs.set(message.status.jobId, knownJob(worker.generation, message.status))
        else {
          known.status = message.status
          if (!isLive(message.status)) known.settle()
        }
        return
      }
      case 'reply': {
        const pending = worker.pending.get(message.id)
        if (!pending) return
        worker.pending.delete(message.id)
        if (!message.ok) pending.reject(Object.assign(new Error(message.error.message), { code: message.error.code }))
        else pending.resolve('file' in message ? message.file : 'bundle' in message ? message.bundle : message.value)
      }
    }
  }

  private exited(worker: Worker, exit: WorkerExit): void {
    if (this.worker === worker) this.worker = undefined
    const running = [...this.jobs.values()].filter((j) => j.generation === worker.generation && isLive(j.status))
    const doing = running.map((j) => `${j.status.phase} (${Math.round(j.status.fraction * 100)} %)`).join(', ')
    const pid = worker.transport.pid !== undefined ? ` (pid ${worker.transport.pid})` : ''
    const message =
      `the worker process that reads and replays traces${pid} ${describeExit(exit)}` +
      (doing !== '' ? ` while ${doing}` : '') +
      '. Open the trace again: the next request starts a fresh worker.'
    const error = new WorkerExitedError(worker.closing ? `the worker process${pid} was closed` : message, exit)
    this.ended.set(worker.generation, error)
    const cancelled = { code: 'CANCELLED', message: `cancelled: ${error.message}` }
    for (const job of running) {
      // Closed on purpose (the host is going away), its jobs were cancelled; a crash failed them.
      job.status = worker.closing
        ? { ...job.status, state: 'cancelled', error: cancelled }
        : { ...job.status, state: 'failed', error: { code: error.code, message: error.message } }
      job.settle()
    }
    // A finished job's result went with the worker: it is no longer done.
    for (const job of this.jobs.values())
      if (job.generation === worker.generation && job.status.state === 'done') job.status = { ...job.status, state: 'cancelled', error: cancelled }
    for (const pending of worker.pending.values()) pending.reject(error)
    worker.pending.clear()
    if (!worker.closing) this.options.onCrash?.(error)
  }
}
