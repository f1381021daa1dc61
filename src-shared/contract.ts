// The one API the renderer talks to, whoever hosts it: the web host (`vramscope serve`, HTTP on
// 127.0.0.1 with a token) and the Electron preload both implement it. Every channel is listed here
// with its argument and result; no channel name is written anywhere else. The renderer imports this
// file with `import type` only, apart from the CHANNELS table.
//
// Long work (opening a file, replaying) is a job: the call returns a job id at once, the renderer
// polls `job:status` for progress and may `job:cancel`; a finished job's result is fetched once.
// Large results (event columns, layouts) cross as a column bundle (bundle.ts), not as JSON.

/** What the app says about itself on start: shown in the empty state and the about line. */
export interface AppInfo {
  version: string
  /** Bundled traces (resources/samples) the empty state offers. */
  samples: SampleInfo[]
  /** Strategies of the native library with their parameters, for the strategy picker. */
  strategies: StrategyChoice[]
  /** The strategy list (CLI syntax) replayed when a trace is opened. */
  defaultStrategies: string
  /** Where the app runs: 'web' (vramscope serve) or 'electron'. */
  host: 'web' | 'electron'
  /** The file named on the command line, to open at start: its key for `trace:openRecent`. */
  initialFile?: string
  /** The plain statement on privacy shown in the UI. */
  privacy: string
  /** Built-in GPU workloads that `record:workload` runs (native/cuda/workloads). */
  workloads: WorkloadChoice[]
  /** Whether this host can record (an NVIDIA GPU and driver, a CUDA build); why not when it cannot. */
  recording: { available: boolean; reason?: string }
}

export interface WorkloadChoice {
  name: string
  description: string
  params: { name: string; defaultValue: string; description: string }[]
  /** The one strategy it runs on (device_bump), or "" for any. */
  fixedStrategy: string
}

export interface RecordRequest {
  workload: string
  /** One strategy in the CLI's syntax ("caching:preset=pytorch"); default caching. */
  strategy?: string
  /** Workload parameters, as text ("steps" → "50"). */
  params?: Record<string, string>
}

export interface SampleInfo {
  name: string
  title: string
  description: string
  bytes: number
}

export interface StrategyChoice {
  name: string
  params: { name: string; defaultValue: string; description: string }[]
}

/** An opened trace, as the UI first needs it; the event columns come with `trace:data`. */
export interface TraceSummary {
  traceId: string
  /** File name as the user knows it (no directories). */
  name: string
  kind: 'trace' | 'pytorch-snapshot' | 'rmm-log'
  source: string
  events: number
  allocs: number
  frees: number
  markers: number
  durationNs: number
  streams: string[]
  warnings: string[]
  /** Results stored with the input (a trace file's replays, a snapshot's `pytorch (recorded)`). */
  stored: string[]
  gpu?: string
}

export interface JobStatus {
  jobId: string
  state: 'running' | 'done' | 'failed' | 'cancelled'
  /** 0 to 1. */
  fraction: number
  /** What is being done now: "reading", "replaying caching (pytorch)". */
  phase: string
  error?: { message: string; code?: string }
}

export interface ReplayRequest {
  traceId: string
  /** Strategies in the CLI's syntax: "caching:preset=pytorch,slab,buddy:pool_size=4GiB". */
  strategies: string
  /** Device memory cap: "24GiB" or bytes. */
  cap?: string
  /** Also return the results stored with the input (recorded layouts); default true. */
  includeStored?: boolean
  /**
   * Replays only the strategies [first, first + count) of the list (count left out: to its end),
   * labelled as in the whole list: a UI draws the first strategy's map while the others replay.
   */
  targets?: { first: number; count?: number }
}

export interface RecentFile {
  name: string
  /** What to pass to `trace:openRecent`. */
  key: string
  openedAt: number
}

/**
 * Every channel: argument and result. `Bundle` results are column bundles (bundle.ts); `Bytes`
 * arguments are raw file bytes.
 */
export interface Channels {
  'app:info': { arg: void; result: AppInfo }
  /** Opens a bundled sample. Result: a job whose result is a TraceSummary. */
  'trace:openSample': { arg: { name: string }; result: { jobId: string } }
  /** Opens a file by path (Electron's dialog and drops; the web host only for its FILE and recent files). */
  'trace:openPath': { arg: { path: string }; result: { jobId: string } }
  /** Opens a file's bytes (a browser's drop or file input). */
  'trace:openBytes': { arg: { name: string; bytes: Uint8Array }; result: { jobId: string } }
  'trace:openRecent': { arg: { key: string }; result: { jobId: string } }
  'trace:recent': { arg: void; result: RecentFile[] }
  /** The request trace's columns and tables. */
  'trace:data': { arg: { traceId: string }; result: Bundle }
  /** Starts a replay; the job's result is fetched with `replay:result`. */
  'replay:start': { arg: ReplayRequest; result: { jobId: string } }
  /**
   * Records a built-in workload on the GPU in a process of its own (a CUDA fault there never takes
   * the host down); the job's result (`job:result`) is the recording, opened as a trace.
   */
  'record:workload': { arg: RecordRequest; result: { jobId: string } }
  'replay:result': { arg: { jobId: string }; result: Bundle }
  /**
   * waitMs (the web host; at most 1000): answer once the job settles or that long has passed,
   * so a poller learns of the end at once.
   */
  'job:status': { arg: { jobId: string; waitMs?: number }; result: JobStatus }
  'job:result': { arg: { jobId: string }; result: TraceSummary }
  'job:cancel': { arg: { jobId: string }; result: { cancelled: boolean } }
}

export type Channel = keyof Channels
export type ChannelArg<C extends Channel> = Channels[C]['arg']
export type ChannelResult<C extends Channel> = Channels[C]['result']

/** A decoded column bundle: JSON metadata plus named typed arrays. */
export interface Bundle {
  meta: unknown
  arrays: Record<string, BundleArray>
}

export type BundleArray =
  | Uint8Array
  | Uint16Array
  | Uint32Array
  | Int32Array
  | Float32Array
  | Float64Array
  | BigUint64Array

/** Channels whose result is a bundle (binary on the wire). */
export const BUNDLE_CHANNELS: ReadonlySet<Channel> = new Set<Channel>(['trace:data', 'replay:result'])

export const CHANNELS: readonly Channel[] = [
  'app:info',
  'trace:openSample',
  'trace:openPath',
  'trace:openBytes',
  'trace:openRecent',
  'trace:recent',
  'trace:data',
  'replay:start',
  'replay:result',
  'record:workload',
  'job:status',
  'job:result',
  'job:cancel',
]

/**
 * What the desktop app's main process tells a window (its menu, a crashed worker); the web host
 * sends none. The preload exposes each event as a subscribe method that returns an unsubscribe.
 */
export type AppCommand =
  | { command: 'open'; key: string }
  | { command: 'theme'; theme: 'light' | 'dark' }
  | { command: 'shortcuts' }
  /** Show the record panel (built-in GPU workloads). */
  | { command: 'record' }
  | { command: 'export'; format: 'png' | 'svg' }
  | { command: 'show'; view: 'maps' | 'timeline' | 'metrics' | 'peak' | 'diff' }
  | { command: 'error'; message: string }

export interface Events {
  'app:command': AppCommand
}

export type EventName = keyof Events

export const EVENTS: readonly EventName[] = ['app:command']

/** The renderer's view of the API: one async method per channel. */
export type Api = { [C in Channel]: (arg: ChannelArg<C>) => Promise<ChannelResult<C>> }

/** Error codes an API call can fail with, besides the native library's own. */
export type ApiErrorCode = 'BAD_INPUT' | 'NOT_FOUND' | 'CANCELLED' | 'UNAUTHORIZED' | 'INTERNAL'
