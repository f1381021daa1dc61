// The web host's session in a worker process: `vramscope serve` runs its AppSession in the worker
// the desktop app uses (src-main/utility/, forked with child_process here), so opening, importing
// and replaying never run on the event loop that answers the pages. The worker serves every
// channel (serve has no main process of its own to keep recent files); a worker that dies is
// replaced on the next call, as in the desktop app.
import { rm } from 'node:fs/promises'
import { dirname } from 'node:path'

import { CHANNELS, type AppInfo, type Channel } from '../../src-shared/contract.ts'
import type { Handlers } from '../ipc/dispatch.ts'
import type { SessionOptions } from '../services/app-session.ts'
import { isLive } from '../../src-shared/job-wait.ts'
import { WorkerClient } from '../utility/client.ts'
import { forkNodeWorker } from '../utility/node-transport.ts'
import type { WebSession } from './server.ts'

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
    // The client answers `job:status` from what the worker pushed, held until the job settles or
    // waitMs passes, as the worker would: a page that polls without pausing does not spin.
    for (const channel of CHANNELS) forwarded[channel] = (arg) => this.client.call(channel, arg, page)
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

  /** A file of a job of many ranks uploaded: the worker's session moves it into the page's folder (and removes the upload's). */
  async stageUploadedRankFile(path: string, name: string, page: string): Promise<{ key: string }> {
    return (await this.client.session({ op: 'stageUploadedRankFile', path, name, page })) as { key: string }
  }

  /** Removes the folders of uploads whose open has settled (the worker removes them too; this is for one that died). */
  private async removeSettledUploads(all = false): Promise<void> {
    const settled = [...this.uploads].filter(([jobId]) => {
      const known = all ? undefined : this.client.knownJob(jobId)
      return known === undefined || !isLive(known)
    })
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
