// Main's side of the API contract, written without Electron so it can be tested in Node: a call is
// (sender, channel, payload) → reply. The sender must be the main frame of one of the app's own
// pages; then the one dispatcher (src-main/ipc/dispatch.ts) checks the payload against its
// channel's schema and calls main's handler. What is Electron's stays here: recent files (they
// outlive any worker), the files the user chose, and the rule that a window may open by path only
// those (dialog, command line, file association, recent files). Everything else goes to the worker.
import { specOf, type AppInfo, type MainChannel, type RecentFile } from '../../src-shared/contract.ts'
import { dispatch, type Handlers } from '../ipc/dispatch.ts'
import { isBundleFile, takeBundleFile } from '../utility/bundle-file.ts'
import type { WorkerClient } from '../utility/client.ts'
import { WORKER_CHANNELS, type WorkerChannel } from '../utility/protocol.ts'
import { isAppUrl } from './security.ts'

/** What main knows about the frame that sent a message (from event.senderFrame). */
export interface SenderInfo {
  /** The BrowserWindow's id, or undefined when the sender is in no window of the app. */
  windowId: number | undefined
  /** The sending frame's URL; empty when the frame is gone. */
  frameUrl: string
  /** Whether the sender is its page's main frame (not an iframe). */
  isMainFrame: boolean
}

export type IpcReply = { ok: true; value: unknown } | { ok: false; error: { code: string; message: string } }

/** The recent-files list main keeps on disk (recent-files.ts). */
export interface RecentStore {
  list(): RecentFile[]
  pathOf(key: string): string | undefined
  add(path: string): Promise<void>
}

export interface RouterOptions {
  worker: Pick<WorkerClient, 'call'>
  recent: RecentStore
  /** The dev server's URL under `electron-vite dev`; its origin is trusted like app://. */
  devServerUrl?: string
  /** A window opened a trace (from a path when `path` is given): the menu and recent list follow. */
  onOpened?: (windowId: number, path: string | undefined) => void
  /** Where failures of bookkeeping (saving recent files) are reported. */
  log?: (message: string) => void
}

/** Why a message from `sender` is refused, or undefined if it may be served. */
export function senderRejection(sender: SenderInfo, devServerUrl?: string): string | undefined {
  if (sender.windowId === undefined) return 'the sender is not a window of vramscope'
  if (!sender.isMainFrame) return 'the sender is a subframe, not the page itself'
  if (!isAppUrl(sender.frameUrl, devServerUrl)) return `the sender's page (${sender.frameUrl.slice(0, 200) || 'none'}) is not vramscope's own`
  return undefined
}

interface OpenJob {
  windowId: number
  path: string | undefined
}

export class IpcRouter {
  /** Files the user chose this session, by the key a window passes to `trace:openRecent`. */
  private readonly chosen = new Map<string, string>()
  private readonly initialKeys = new Map<number, string>()
  private readonly withTrace = new Set<number>()
  private readonly openJobs = new Map<string, OpenJob>()

  constructor(private readonly options: RouterOptions) {}

  /** Lets windows open `path` (the user chose it); returns the key to open it with. */
  choose(path: string): string {
    for (const [key, p] of this.chosen) if (p === path) return key
    const key = `chosen-${this.chosen.size + 1}-${Math.random().toString(36).slice(2, 10)}`
    this.chosen.set(key, path)
    return key
  }

  /** The file a window opens when its page starts (AppInfo.initialFile). */
  setInitialFile(windowId: number, path: string): void {
    this.initialKeys.set(windowId, this.choose(path))
  }

  hasTrace(windowId: number): boolean {
    return this.withTrace.has(windowId)
  }

  forgetWindow(windowId: number): void {
    this.initialKeys.delete(windowId)
    this.withTrace.delete(windowId)
  }

  async handle(sender: SenderInfo, channel: unknown, payload: unknown): Promise<IpcReply> {
    const refused = senderRejection(sender, this.options.devServerUrl)
    if (refused !== undefined) return { ok: false, error: { code: 'UNAUTHORIZED', message: `refused: ${refused}` } }
    try {
      return { ok: true, value: await dispatch(this.handlers(sender.windowId!), channel as string, payload) }
    } catch (e) {
      const error = e as Error & { code?: unknown }
      return { ok: false, error: { code: typeof error.code === 'string' ? error.code : 'INTERNAL', message: error.message ?? String(e) } }
    }
  }

  /**
   * What main does with each channel for window `windowId`: the channels that run in main, its
   * own; the others go to the worker, those that open a trace noted for the recent list, and
   * app:info and trace:openPath with main's part added (the window's file, the allow-list).
   */
  private handlers(windowId: number): Handlers {
    const worker = this.options.worker
    const forwarded: Partial<Record<WorkerChannel, (arg: unknown) => Promise<unknown>>> = {}
    for (const channel of WORKER_CHANNELS)
      forwarded[channel] =
        specOf(channel).job === 'trace'
          ? async (arg) => this.track(windowId, undefined, (await worker.call(channel, arg)) as { jobId: string })
          : async (arg) => {
              const result = await worker.call(channel, arg)
              // A worker that wrote a bundle to a file (a Node fork; the app's utility process sends bytes).
              return isBundleFile(result) ? takeBundleFile(result) : result
            }
    const own: Pick<Handlers, MainChannel | 'app:info' | 'trace:openPath' | 'job:result'> = {
      'app:info': async () => {
        const info = await worker.call('app:info', undefined)
        const initial = this.initialKeys.get(windowId)
        const { initialFile: _workerInitial, ...rest } = info
        return { ...rest, host: 'electron', ...(initial !== undefined && { initialFile: initial }) } satisfies AppInfo
      },
      'trace:recent': () => this.options.recent.list(),
      'trace:openRecent': async ({ key }) => {
        const path = this.chosen.get(key) ?? this.options.recent.pathOf(key)
        if (path === undefined) throw Object.assign(new Error(`recent: no recent file ${JSON.stringify(key)}`), { code: 'NOT_FOUND' })
        return this.track(windowId, path, await worker.call('trace:openPath', { path }))
      },
      'trace:openPath': async ({ path }) => {
        const known = [...this.chosen.values()].includes(path) || this.options.recent.list().some((r) => this.options.recent.pathOf(r.key) === path)
        if (!known)
          throw Object.assign(new Error('path: a window opens only files you chose (File › Open, the command line, a file association or recent files)'), {
            code: 'BAD_INPUT',
          })
        return this.track(windowId, path, await worker.call('trace:openPath', { path }))
      },
      'job:result': async (arg) => {
        const summary = await worker.call('job:result', arg)
        await this.opened(arg.jobId)
        return summary
      },
    }
    return { ...(forwarded as Handlers), ...own }
  }

  private track(windowId: number, path: string | undefined, started: { jobId: string }): { jobId: string } {
    this.openJobs.set(started.jobId, { windowId, path })
    return started
  }

  /** An open job's result was fetched: it succeeded, so the file joins the recent list. */
  private async opened(jobId: string): Promise<void> {
    const job = this.openJobs.get(jobId)
    if (!job) return
    this.openJobs.delete(jobId)
    this.withTrace.add(job.windowId)
    if (job.path !== undefined) await this.options.recent.add(job.path).catch((e: Error) => this.options.log?.(`recent files: ${e.message}`))
    this.options.onOpened?.(job.windowId, job.path)
  }
}
