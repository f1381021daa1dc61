// The web host's session in a worker process: `vramscope serve` runs its AppSession in the worker
// the desktop app uses (src-main/utility/, forked with child_process here), so opening, importing
// and replaying never run on the event loop that answers the pages. The worker serves every
// channel (serve has no main process of its own to keep recent files); a worker that dies is
// replaced on the next call, as in the desktop app.
import { rm } from 'node:fs/promises'
import { dirname } from 'node:path'

import { CHANNELS, type AppInfo, type Channel, type JobStatus } from '../../src-shared/contract.ts'
import type { Handlers } from '../ipc/dispatch.ts'
import type { SessionOptions } from '../services/app-session.ts'
import { WorkerClient } from '../utility/client.ts'
import { forkNodeWorker } from '../utility/node-transport.ts'
import type { WebSession } from './server.ts'

/** The longest a `job:status` call with waitMs holds its answer back (as AppSession does). */
const MAX_STATUS_WAIT_MS = 1000
/** How often a held `job:status` looks at the status the worker pushes. */
const STATUS_LOOK_MS = 20
/** How often uploads handed to the worker are looked at, to remove those it left behind. */
const UPLOAD_WATCH_MS = 1000

export class WorkerSession implements WebSession {
  private lastInfo: AppInfo | undefined
  private refreshingInfo: Promise<AppInfo> | undefined
  /** Uploads handed to the worker and not yet settled: removed here too, should the worker die first. */
  private readonly uploads = new Map<string, string>()
  private uploadWatch: NodeJS.Timeout | undefined

  constructor(readonly client: WorkerClient) {}

  handlers(page: string): Partial<Handlers> {
    const forwarded: Partial<Record<Channel, (arg: unknown) => Promise<unknown>>> = {}
    for (const channel of CHANNELS) forwarded[channel] = (arg) => this.client.call(channel, arg, page)
    // The client answers a job's status from what the worker pushed, at once: held here until the
    // job settles or waitMs passes, so a page that polls without pausing does not spin.
    forwarded['job:status'] = (arg) => this.statusAfter(arg as { jobId: string; waitMs?: number }, page)
    forwarded['app:info'] = () => this.info()
    return forwarded as Partial<Handlers>
  }

  /**
   * Starts the worker and keeps its first `app:info` answer (vramscope serve calls it as it
   * starts), so the first page's first call is answered at once, not behind the open it sets off.
   */
  warm(): Promise<AppInfo> {
    return this.info()
  }

  /**
   * The worker's last answer to `app:info`, asked again behind it: a worker busy with one page's
   * import does not hold up another page's start. Only the first call waits for the worker.
   */
  private info(): Promise<AppInfo> {
    if (!this.refreshingInfo) {
      const refresh = this.client.call('app:info', undefined).then((info) => (this.lastInfo = info))
      this.refreshingInfo = refresh
      refresh.then(
        () => (this.refreshingInfo = undefined),
        () => (this.refreshingInfo = undefined),
      )
    }
    return this.lastInfo !== undefined ? Promise.resolve(this.lastInfo) : this.refreshingInfo!
  }

  private async statusAfter({ jobId, waitMs }: { jobId: string; waitMs?: number }, page: string): Promise<JobStatus> {
    const until = Date.now() + Math.min(waitMs ?? 0, MAX_STATUS_WAIT_MS)
    for (;;) {
      const status = await this.client.call('job:status', { jobId }, page)
      if (status.state !== 'running' || Date.now() >= until) return status
      await new Promise((r) => setTimeout(r, STATUS_LOOK_MS))
    }
  }

  /** Calls carry their page to the worker, which notes it there. */
  seen(): void {}

  closeIdlePages(idleMs: number): void {
    void this.client.session({ op: 'closeIdlePages', idleMs }).catch(() => {})
  }

  prefetchInitial(): void {
    void this.client.session({ op: 'prefetchInitial' }).catch(() => {})
  }

  async openUploadedFile(path: string, name: string, page: string): Promise<{ jobId: string }> {
    const started = (await this.client.session({ op: 'openUploadedFile', path, name, page })) as { jobId: string }
    this.uploads.set(started.jobId, dirname(path))
    this.uploadWatch ??= setInterval(() => void this.removeSettledUploads(), UPLOAD_WATCH_MS).unref()
    return started
  }

  /** Removes the folders of uploads whose open has settled (the worker removes them too; this is for one that died). */
  private async removeSettledUploads(all = false): Promise<void> {
    const settled = [...this.uploads].filter(([jobId]) => all || this.client.knownJob(jobId)?.state !== 'running')
    for (const [jobId] of settled) this.uploads.delete(jobId)
    if (this.uploads.size === 0) {
      clearInterval(this.uploadWatch)
      this.uploadWatch = undefined
    }
    await Promise.all(settled.map(([, dir]) => rm(dir, { recursive: true, force: true })))
  }

  async close(): Promise<void> {
    await this.client.close()
    await this.removeSettledUploads(true)
  }
}

/**
 * A session in a worker process forked from this one (vramscope serve): from `entry`, the bundled
 * worker (worker-build.ts), else from the TypeScript sources through tsx.
 */
export function workerSession(options: SessionOptions, onCrash?: (message: string) => void, entry?: string): WorkerSession {
  return new WorkerSession(
    new WorkerClient({
      spawn: () => forkNodeWorker(entry !== undefined ? { entry } : {}),
      init: { ...options, everyChannel: true },
      ...(onCrash && { onCrash: (e) => onCrash(e.message) }),
    }),
  )
}
