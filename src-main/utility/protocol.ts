// The messages between the app (Electron's main process, or a Node parent in tests and the CLI)
// and the worker process that hosts the native module and the AppSession. The same messages run
// over Electron's utilityProcess (parentPort) and Node's child_process.fork (IPC channel): each
// side sees only a `HostTransport` / `HostPort`, never the process API underneath.
import { CHANNELS, specOf, type Channel, type JobStatus, type MainChannel } from '../../src-shared/contract.ts'
import type { SessionOptions } from '../services/app-session.ts'
import type { BundleFile } from './bundle-file.ts'

/**
 * The channels the worker serves: every channel the contract runs in the utility process. Recent
 * files are the app's (persisted by main, not by a worker that may be restarted at any time), so
 * the channels that run in main stay there.
 */
export type WorkerChannel = Exclude<Channel, MainChannel>

export const WORKER_CHANNELS: readonly WorkerChannel[] = CHANNELS.filter((c): c is WorkerChannel => specOf(c).runs === 'utility')

/**
 * What the worker's AppSession is created with (sent once, before any call). The desktop app keeps
 * its allow-list in main; the web host, which has no process of its own for recent files, gives
 * it here and sets `everyChannel`: its worker serves every channel of the contract.
 */
export type WorkerInit = SessionOptions & { everyChannel?: boolean }

/** What a host (the web host; the desktop app's main: prefetchPath) asks of its worker's session besides the contract's channels. */
export type SessionRequest =
  /** Opens a file the host wrote (an upload) as `page`'s; the session deletes it once opened or failed. */
  | { op: 'openUploadedFile'; path: string; name: string; page: string }
  /** Stages a file the host wrote (an upload) for `page`'s job of many ranks; the session moves it into the page's folder. */
  | { op: 'stageUploadedRankFile'; path: string; name: string; page: string }
  | { op: 'prefetchInitial' }
  /** Opens a file a window is about to open, and replays its first maps (AppSession.prefetchPath). */
  | { op: 'prefetchPath'; path: string }
  | { op: 'closeIdlePages'; idleMs: number }

/** Parent → worker. `page`: the web host's page the call comes from (what it opens is that page's). */
export type WorkerRequest =
  | { type: 'init'; options: WorkerInit }
  | { type: 'call'; id: number; channel: Channel; arg: unknown; page?: string }
  | { type: 'session'; id: number; request: SessionRequest }

/**
 * Worker → parent. A bundle result is its encoded bytes in an ArrayBuffer of its own, or, where
 * the port has a folder for them and the bundle is large, a file there (bundle-file.ts).
 */
export type WorkerMessage =
  | { type: 'ready'; pid: number }
  | { type: 'reply'; id: number; ok: true; value: unknown }
  | { type: 'reply'; id: number; ok: true; bundle: ArrayBuffer }
  | { type: 'reply'; id: number; ok: true; file: BundleFile }
  | { type: 'reply'; id: number; ok: false; error: { code: string; message: string } }
  /** A job's status whenever it changes, and once more when it settles. */
  | { type: 'job'; status: JobStatus }

/** How a worker process ended. `signal` is null where the platform gives only a code (Electron). */
export interface WorkerExit {
  code: number | null
  signal: string | null
  /** Electron's reason from `child-process-gone` ('crashed', 'oom', 'killed', …) when known. */
  reason?: string
}

/** The parent's handle on one worker process. */
export interface HostTransport {
  readonly pid: number | undefined
  /** The folder the worker writes large bundles to (bundle-file.ts), where it has one. */
  readonly bundleDir?: string
  post(message: WorkerRequest): void
  onMessage(listener: (message: WorkerMessage) => void): void
  /** Called once, however the process ended (including failing to start). */
  onExit(listener: (exit: WorkerExit) => void): void
  kill(): void
}

/** The worker's handle on its parent. */
export interface HostPort {
  /** A private folder for large bundles (bundle-file.ts), where the parent reads files; none: bundles go as bytes. */
  readonly bundleDir?: string
  /** `transfer`: buffers the port may move rather than copy, where its process API can. */
  post(message: WorkerMessage, transfer?: ArrayBuffer[]): void
  onMessage(listener: (message: WorkerRequest) => void): void
}
