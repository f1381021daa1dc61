// The worker's side: one AppSession (and with it the native module) behind a HostPort. Each call
// is answered with a reply of the same id; every job the session starts is watched and its status
// pushed to the parent as it changes, so the parent can answer `job:status` itself and still knows
// how far a job got if this process dies.
import { encodeBundle } from '../../src-shared/bundle.ts'
import type { JobStatus, RecordRequest, ReplayRequest } from '../../src-shared/contract.ts'
import { AppSession } from '../services/app-session.ts'
import type { HostPort, WorkerChannel, WorkerInit, WorkerRequest } from './protocol.ts'

/** How often a running job's status is looked at (and pushed when it changed). */
const JOB_POLL_MS = 50

type Arg = Record<string, unknown>

function errorOf(e: unknown): { code: string; message: string } {
  const error = e as Error & { code?: unknown }
  return { code: typeof error.code === 'string' ? error.code : 'INTERNAL', message: error.message ?? String(e) }
}

/** Serves calls on `port` until the process ends; `createSession` is for tests that stub it. */
export function serveWorker(port: HostPort, createSession: (init: WorkerInit) => AppSession = (init) => new AppSession(init)): void {
  let session: AppSession | undefined
  const queued: WorkerRequest[] = []

  function watchJob(jobId: string): void {
    const s = session!
    let last = ''
    const push = (status: JobStatus) => {
      const text = JSON.stringify(status)
      if (text === last) return
      last = text
      port.post({ type: 'job', status })
    }
    push(s.jobStatus(jobId))
    const timer = setInterval(() => push(s.jobStatus(jobId)), JOB_POLL_MS)
    void s.settled(jobId).then((status) => {
      clearInterval(timer)
      push(status)
    })
  }

  function job(result: { jobId: string }): { jobId: string } {
    watchJob(result.jobId)
    return result
  }

  async function call(channel: WorkerChannel, arg: Arg): Promise<{ value: unknown } | { bundle: Uint8Array }> {
    const s = session!
    switch (channel) {
      case 'app:info':
        return { value: await s.info() }
      case 'trace:openSample':
        return { value: job(s.openSample(arg['name'] as string)) }
      case 'trace:openPath':
        return { value: job(s.openPath(arg['path'] as string)) }
      case 'trace:openBytes':
        return { value: job(s.openBytes(arg['name'] as string, arg['bytes'] as Uint8Array)) }
      case 'trace:data':
        return { bundle: encodeBundle(s.traceData(arg['traceId'] as string)) }
      case 'replay:start':
        return { value: job(s.startReplay(arg as unknown as ReplayRequest)) }
      case 'replay:result':
        return { bundle: encodeBundle(s.replayResult(arg['jobId'] as string)) }
      case 'record:workload':
        return { value: job(s.recordWorkload(arg as unknown as RecordRequest)) }
      case 'job:status':
        return { value: s.jobStatus(arg['jobId'] as string) }
      case 'job:result':
        return { value: s.jobResult(arg['jobId'] as string) }
      case 'job:cancel':
        return { value: s.cancel(arg['jobId'] as string) }
    }
  }

  async function handle(request: WorkerRequest): Promise<void> {
    if (request.type === 'init') {
      session = createSession(request.options)
      return
    }
    if (!session) {
      // The parent always sends init first; hold anything that overtook it.
      queued.push(request)
      return
    }
    try {
      const out = await call(request.channel, (request.arg ?? {}) as Arg)
      if ('bundle' in out) {
        // encodeBundle's buffer holds exactly the bundle: it can be moved, not copied.
        const buffer = out.bundle.buffer as ArrayBuffer
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
