// The worker's side: one AppSession (and with it the native module) behind a HostPort. Each call
// is dispatched (src-main/ipc/dispatch.ts: checked against the contract, then the session) and
// answered with a reply of the same id; every change of every job's status (the session's job
// registry tells of each, services/jobs.ts) is pushed to the parent, so the parent can answer
// `job:status` itself and still knows how far a job got if this process dies. Nothing here looks a
// job up on a timer: a job that ends while it is watched can make nothing throw.
import { encodeBundleParts } from '../../src-shared/bundle.ts'
import { concatBytes } from '../../src-shared/bytes.ts'
import { CHANNELS, specOf, type Bundle, type Channel, type JobStatus } from '../../src-shared/contract.ts'
import { dispatch, type Handlers } from '../ipc/dispatch.ts'
import { sessionHandlers } from '../ipc/session-handlers.ts'
import { AppSession, DEFAULT_PAGE } from '../services/app-session.ts'
import { isLive } from '../../src-shared/job-wait.ts'
import { BUNDLE_FILE_MIN_BYTES, writeBundleFile } from './bundle-file.ts'
import { WORKER_CHANNELS, type HostPort, type SessionRequest, type WorkerInit, type WorkerRequest } from './protocol.ts'

/** Progress of a running job is pushed at most this often; a job's start, wait and end at once. */
const PROGRESS_PUSH_MS = 50

function errorOf(e: unknown): { code: string; message: string } {
  const error = e as Error & { code?: unknown }
  return { code: typeof error.code === 'string' ? error.code : 'INTERNAL', message: error.message ?? String(e) }
}

/** The session's handlers for `page`: the channels that run in the worker (main serves the others), or every one. */
function workerHandlers(session: AppSession, page: string, everyChannel: boolean): Partial<Handlers> {
  const all = sessionHandlers(session, page)
  return Object.fromEntries((everyChannel ? CHANNELS : WORKER_CHANNELS).map((c) => [c, all[c]]))
}

/** Serves calls on `port` until the process ends; `createSession` is for tests that stub it. */
export function serveWorker(port: HostPort, createSession: (init: WorkerInit) => AppSession = (init) => new AppSession(init)): void {
  let session: AppSession | undefined
  let everyChannel = false
  const queued: WorkerRequest[] = []

  // Statuses to push: each job's latest, sent together at most every PROGRESS_PUSH_MS while only
  // progress changed, at once when a job changes state (queued, running, ended).
  const unsent = new Map<string, JobStatus>()
  const lastState = new Map<string, JobStatus['state']>()
  let pushTimer: NodeJS.Timeout | undefined
  function pushUnsent(): void {
    clearTimeout(pushTimer)
    pushTimer = undefined
    for (const status of unsent.values())
      try {
        port.post({ type: 'job', status })
      } catch {
        // A parent gone away takes this process with it (worker.ts); nothing to tell it.
      }
    unsent.clear()
  }
  function jobChanged(changed: JobStatus): void {
    // A done open's status carries its trace's summary, as the session's own job:status answers it.
    const status = session!.withSummary(changed)
    unsent.set(status.jobId, status)
    const stateChanged = lastState.get(status.jobId) !== status.state
    if (isLive(status)) lastState.set(status.jobId, status.state)
    else lastState.delete(status.jobId)
    if (stateChanged) pushUnsent()
    else pushTimer ??= setTimeout(pushUnsent, PROGRESS_PUSH_MS)
  }

  /** A call as the contract says it crosses: a bundle goes as its bytes (in pieces: encodeBundleParts). */
  async function call(channel: Channel, arg: unknown, page = DEFAULT_PAGE): Promise<{ value: unknown } | { parts: Uint8Array[] }> {
    session!.seen(page)
    const result = await dispatch(workerHandlers(session!, page, everyChannel), channel, arg)
    const spec = specOf(channel)
    if (spec.result.kind === 'bundle') return { parts: encodeBundleParts(result as Bundle) }
    return { value: result }
  }

  /** The web host's requests besides the channels (a staged rank's file is moved before the answer). */
  function sessionRequest(request: SessionRequest): unknown {
    const s = session!
    switch (request.op) {
      case 'openUploadedFile':
        return s.openUploadedFile(request.path, request.name, request.page)
      case 'stageUploadedRankFile':
        return s.stageUploadedRankFile(request.path, request.name, request.page)
      case 'prefetchInitial':
      case 'prefetchPath': {
        const before = s.prefetchedJob
        if (request.op === 'prefetchPath') s.prefetchPath(request.path)
        else s.prefetchInitial()
        const after = s.prefetchedJob
        if (after === undefined || after === before) return null
        // The open started (a host may note it); null when an earlier prefetch still waits to be taken.
        return { jobId: after }
      }
      case 'closeIdlePages':
        return s.closeIdlePages(request.idleMs) ?? null
    }
  }

  async function handle(request: WorkerRequest): Promise<void> {
    if (request.type === 'init') {
      const { everyChannel: every, ...options } = request.options
      session = createSession(options)
      session.jobs.subscribe(jobChanged)
      everyChannel = every === true
      return
    }
    if (!session) {
      // The parent always sends init first; hold anything that overtook it.
      queued.push(request)
      return
    }
    try {
      if (request.type === 'session') {
        port.post({ type: 'reply', id: request.id, ok: true, value: await sessionRequest(request.request) })
        return
      }
      const out = await call(request.channel, request.arg, request.page)
      if ('parts' in out) {
        const bytes = out.parts.reduce((n, p) => n + p.byteLength, 0)
        if (port.bundleDir !== undefined && bytes >= BUNDLE_FILE_MIN_BYTES) {
          try {
            port.post({ type: 'reply', id: request.id, ok: true, file: await writeBundleFile(port.bundleDir, out.parts, bytes) })
            return
          } catch {
            // No room for it on disk (or the folder is gone): it goes as bytes, as it always can.
          }
        }
        // One buffer that holds exactly the bundle: it can be moved, not copied.
        const buffer = concatBytes(out.parts, true).buffer as ArrayBuffer
        port.post({ type: 'reply', id: request.id, ok: true, bundle: buffer }, [buffer])
      } else port.post({ type: 'reply', id: request.id, ok: true, value: out.value })
    } catch (e) {
      port.post({ type: 'reply', id: request.id, ok: false, error: errorOf(e) })
    }
  }

  port.onMessage((request) => {
    void handle(request).then(() => {
      if (session && queued.length > 0) for (const r of queued.splice(0)) void handle(r)
    })
  })
  port.post({ type: 'ready', pid: process.pid })
}
