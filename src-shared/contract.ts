// The one API the renderer talks to, whoever hosts it: the web host (`vramscope serve`, HTTP on
// 127.0.0.1 with a token) and the Electron preload both implement it. Every channel is listed here
// with its argument's schema, its result and where it runs (CONTRACT). Code elsewhere writes channel
// names where it makes or answers a call (the channel table src-main/ipc/session-handlers.ts, main's
// ipc-router.ts, the renderer's state and client), typed as Channel (keyof CONTRACT), so a name this
// file lacks does not compile; the one untyped name is the replay:result URL of
// src-renderer/api/client.ts. One dispatcher (src-main/ipc/dispatch.ts) checks arguments against
// these schemas for every host. The renderer imports this file for its types and the channel list
// only: the schemas are functions of the zod functions the dispatcher passes in, so no zod reaches
// a page.
//
// Long work (opening a file, replaying) is a job: the call returns a job id at once, the renderer
// polls `job:status` for progress and may `job:cancel`; a finished job's result is fetched once.
// Large results (event columns, layouts) cross as a column bundle (bundle.ts, keys laid out by
// wire.ts), not as JSON.
import type { z, ZodType } from 'zod'

import type { OomSummary } from './oom.ts'
import type { WhatifReport } from './whatif-report.ts'
import type { RanksSummary, RanksWhatifReport } from './ranks.ts'

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
  /** The files named on the command line as a job of many ranks (`vramscope serve DIR`), to open at start with `ranks:openInitial`: how many. */
  initialJob?: { files: number }
  /** The plain statement on privacy shown in the UI. */
  privacy: string
  /** Built-in GPU workloads that `record:workload` runs (native/cuda/workloads). */
  workloads: WorkloadChoice[]
  /** Whether this host can record (an NVIDIA GPU and driver, a CUDA build); why not when it cannot. */
  recording: { available: boolean; reason?: string }
  /**
   * Whether `record:pytorch` may run a program on this host: the desktop app, or `vramscope serve
   * --allow-record-commands`; why not when it may not.
   */
  recordCommand: { available: boolean; reason?: string }
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

/** A PyTorch program to record at tensor level (`vramscope record --pytorch`), started on this host. */
export interface RecordPytorchRequest {
  /** The command line, split as a shell splits words (quotes and backslashes; no expansion). */
  command: string
  /** The folder it runs in (default the host's home). */
  cwd?: string
  /** max_entries of PyTorch's history ring; default PyTorch's (every event). */
  maxEntries?: number
  /** Seconds between snapshots while it runs (default 60; 0: at an out-of-memory, a cancel and exit). */
  snapshotEvery?: number
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
  kind: 'trace' | 'pytorch-snapshot' | 'rmm-log' | 'kineto-trace' | 'nsys-sqlite' | 'umpire-log'
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
  /** The first out-of-memory the program saw when it was recorded (oom.ts): the app opens at it. */
  oom?: OomSummary
  /**
   * The program's requested bytes over the trace in SUMMARY_BUCKETS buckets (src-shared/requested.ts),
   * as plain arrays: the timeline draws it while the trace's columns are still on their way.
   */
  requested: { end: number[]; max: number[]; min: number[]; peak: number }
  /**
   * The real allocator's reserved bytes over the trace where the source recorded them (a
   * torch.profiler trace's Total Reserved, RequestTrace.recordedReserved), bucketed as `requested`
   * (bucketStepSeries): the timeline draws it beside the replays' reserved curves. NaN (null in
   * JSON) before the curve's first point.
   */
  recordedReserved?: { end: number[]; max: (number | null)[]; peak: number }
  /**
   * The floor (docs/architecture.md#the-floor): the most bytes live at once, as requested and as
   * PyTorch rounds each block (512 B): no allocator reserves less for this trace.
   */
  floor?: { peakLiveBytes: number; peakLiveRoundedBytes: number }
  /** The opening's replays, started by the open itself (where the trace could be replayed). */
  opening?: OpeningJobs
}

/**
 * The replays of a trace's opening (docs/architecture.md, "The opening view"): `first`, the
 * recorded layouts (or the first strategy) cut at the opening event; `rest`, the other
 * strategies cut where the first cut. A page whose strategies are `strategies` (with no cap) draws
 * their results (`replay:result` with `wait`); another cancels them and asks for its own.
 */
export interface OpeningJobs {
  strategies: string
  first: string
  rest: string
}

/**
 * A job as the host's registry (src-main/services/jobs.ts) reports it: `queued` while it waits for
 * one of the slots a page and the host run at once, `running`, then once for all `done`, `failed`
 * or `cancelled` (by the user, or because its trace, its page or the host's session went: a
 * finished job whose trace was closed reads cancelled too, its result freed).
 */
export interface JobStatus {
  jobId: string
  state: 'queued' | 'running' | 'done' | 'failed' | 'cancelled'
  /** 0 to 1. */
  fraction: number
  /** What is being done now: "reading", "replaying caching (pytorch)". */
  phase: string
  error?: { message: string; code?: string }
  /** A done job that opened a trace (an open, a recording): its summary, what `job:result` answers. */
  summary?: TraceSummary
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
  /** Labels for the strategies of the list, in order (each map's title); a strategy without one gets its default label. */
  labels?: string[]
  /**
   * A PyTorch-policy strategy given no settings replays under the snapshot's recorded settings
   * (default true); false: as written (PyTorch's defaults, as a what-if row means them).
   */
  recordedSettings?: boolean
  /**
   * Also make a preview of the result: each map cut to what it shows after this request event
   * ('peak': the event the first replayed strategy peaked at), a small bundle fetched with
   * `replay:result`'s `preview` before the whole one, so the maps are drawn before their histories
   * have crossed (src-shared/wire.ts, layoutAt).
   */
  previewAt?: number | 'peak'
}

/** What the what-if lab over every rank of a job is asked (`ranks:whatif`): as one trace's, for the job's ranks. */
export type RanksWhatifRequest = Omit<WhatifRequest, 'traceId'> & { ranksId: string }

/** What the what-if lab is asked (`whatif:start`): configurations replayed under a device limit. */
export interface WhatifRequest {
  traceId: string
  /**
   * PYTORCH_ALLOC_CONF values in PyTorch's syntax, one configuration each ('recorded': the settings
   * the snapshot was taken with). None, or only empty ones: the lab's grid.
   */
  confs?: string[]
  /**
   * The device limit, as set_per_process_memory_fraction sets it or the GPU's size: "24GiB",
   * "80GB" (decimal) or bytes. None: the limit a recorded out-of-memory implies, else none.
   */
  cap?: string
  /** The GPU's memory, which per_process_memory_fraction is a fraction of (default an H100 80GB's). */
  device?: string
}

export interface RecentFile {
  name: string
  /** What to pass to `trace:openRecent`. */
  key: string
  openedAt: number
}

/** How a channel's result crosses, with its type (`type` is only for the compiler: never set). */
export interface Returns<T> {
  /** 'json': a JSON value; 'bundle': a column bundle (bundle.ts), binary on the wire. */
  kind: 'json' | 'bundle'
  readonly type?: T
}

/**
 * The part of zod the argument schemas are built with. The dispatcher (src-main/ipc/dispatch.ts)
 * passes zod's own functions; this file imports zod's types only, so the renderer and the preload,
 * which import the channel table, carry no zod, and the hosts carry only the zod these need.
 */
export type SchemaKit = Pick<typeof z, 'strictObject' | 'string' | 'number' | 'boolean' | 'undefined' | 'custom' | 'record' | 'array'>

/** What is declared of one channel. */
export interface ChannelSpec<Arg = unknown, Result = unknown> {
  /** The argument's schema, built from the kit it is given. */
  arg: (zod: SchemaKit) => ZodType<Arg>
  result: Returns<Result>
  /**
   * The call starts a job and returns its id at once: 'trace' opens a trace (the job's result is a
   * TraceSummary, from `job:result`), 'replay' replays one (its bundle comes from `replay:result`),
   * 'whatif' runs the what-if lab (its report comes from `whatif:result`, or `ranks:whatifResult`
   * for a job of many ranks), 'ranks' reads a job of many ranks (its RanksSummary from `ranks:result`).
   */
  job?: 'trace' | 'replay' | 'whatif' | 'ranks'
  /**
   * Which process of the desktop app serves it: 'utility', the worker process that holds the
   * native library, the opened traces and the jobs; 'main', the app's own state (recent files, which
   * outlive any worker). `vramscope serve` serves every channel from its worker process.
   */
  runs: 'utility' | 'main'
  /**
   * The argument is a file's bytes: over HTTP they are the request body itself (streamed to disk,
   * the file's name in the x-file-name header), not JSON.
   */
  upload?: true
}

const json = <T>(): Returns<T> => ({ kind: 'json' })
const bundle: Returns<Bundle> = { kind: 'bundle' }
const started = json<{ jobId: string }>()
const none = (zod: SchemaKit) => zod.undefined()
/** Trace, job and recent-file ids. */
const id = (zod: SchemaKit) => zod.string().min(1).max(128)

/** Largest file a window may hand over as bytes (a drop); bigger files go by path. */
export const MAX_OPEN_BYTES = 2 * 1024 ** 3

/** A file handed over as bytes (trace:openBytes, ranks:stage): its name and its bytes. */
const fileFields = (zod: SchemaKit) => ({
  name: zod.string().max(255),
  bytes: zod
    .custom<Uint8Array>((v) => v instanceof Uint8Array, { message: 'must be bytes (a Uint8Array)' })
    .refine((v) => v.byteLength <= MAX_OPEN_BYTES, { message: `at most ${MAX_OPEN_BYTES} bytes` }),
})

/** What the what-if lab is asked besides what it runs on (whatif:start, ranks:whatif). */
const whatifFields = (zod: SchemaKit) => ({
  confs: zod.array(zod.string().max(1024)).max(256).optional(),
  cap: zod.string().max(64).optional(),
  device: zod.string().max(64).optional(),
})

/**
 * Every channel, declared once: its argument's schema (what any host accepts: objects are strict,
 * every string has a length limit), how its result crosses, whether it starts a job, and where the
 * desktop app serves it. The argument and result types derive from here (ChannelArg, ChannelResult).
 */
export const CONTRACT = {
  'app:info': { arg: none, result: json<AppInfo>(), runs: 'utility' },
  /** Opens a bundled sample. Result: a job whose result is a TraceSummary. */
  'trace:openSample': { arg: (zod) => zod.strictObject({ name: zod.string().min(1).max(255) }), result: started, job: 'trace', runs: 'utility' },
  /** Opens a file by path (Electron's dialog and drops; the web host only for its FILE and recent files). */
  'trace:openPath': { arg: (zod) => zod.strictObject({ path: zod.string().min(1).max(4096) }), result: started, job: 'trace', runs: 'utility' },
  /** Opens a file's bytes (a browser's drop or file input). */
  'trace:openBytes': {
    arg: (zod) => zod.strictObject(fileFields(zod)),
    result: started,
    job: 'trace',
    runs: 'utility',
    upload: true,
  },
  'trace:openRecent': { arg: (zod) => zod.strictObject({ key: id(zod) }), result: started, job: 'trace', runs: 'main' },
  'trace:recent': { arg: none, result: json<RecentFile[]>(), runs: 'main' },
  /** The request trace's columns and tables (wire.ts, packTraceData). */
  'trace:data': { arg: (zod) => zod.strictObject({ traceId: id(zod) }), result: bundle, runs: 'utility' },
  /** Starts a replay; the job's result is fetched with `replay:result`. */
  'replay:start': {
    arg: (zod): ZodType<ReplayRequest> =>
      zod.strictObject({
        traceId: id(zod),
        strategies: zod.string().min(1).max(4096),
        cap: zod.string().max(64).optional(),
        includeStored: zod.boolean().optional(),
        targets: zod.strictObject({ first: zod.number().int().min(0), count: zod.number().int().min(0).optional() }).optional(),
        labels: zod.array(zod.string().min(1).max(256)).max(64).optional(),
        recordedSettings: zod.boolean().optional(),
        previewAt: zod
          .custom<number | 'peak'>(
            (v) => v === 'peak' || (Number.isSafeInteger(v) && (v as number) >= 0),
            "previewAt: a request event (an integer from 0) or 'peak'",
          )
          .optional(),
      }),
    result: started,
    job: 'replay',
    runs: 'utility',
  },
  /** A finished replay's strategies, recorded and replayed (wire.ts, packReplay). */
  /**
   * A finished replay's strategies as one bundle, or with `strategy` the job's strategy of that
   * index alone (none past the last: a bundle of no strategies), so a page can fetch and decode
   * several side by side. With `preview`, the job's preview (ReplayRequest.previewAt) instead, where
   * it made one. With `wait`, answered once the job has ended (a job still running is waited for,
   * so a page fetches an opening's maps with no status calls between).
   */
  'replay:result': {
    arg: (zod) =>
      zod.strictObject({
        jobId: id(zod),
        strategy: zod.number().int().min(0).max(4096).optional(),
        preview: zod.boolean().optional(),
        wait: zod.boolean().optional(),
      }),
    result: bundle,
    runs: 'utility',
  },
  /**
   * Starts the what-if lab on an opened trace: each PyTorch allocator configuration (or the grid)
   * replayed under the device limit, its smallest fitting limit searched; progress names the
   * configuration replayed. A configuration PyTorch would refuse fails the call, naming it.
   */
  'whatif:start': {
    arg: (zod): ZodType<WhatifRequest> => zod.strictObject({ traceId: id(zod), ...whatifFields(zod) }),
    result: started,
    job: 'whatif',
    runs: 'utility',
  },
  /** A finished what-if job's report: the rows ranked, the recorded settings, the implied limit, fidelity. */
  'whatif:result': { arg: (zod) => zod.strictObject({ jobId: id(zod) }), result: json<WhatifReport>(), runs: 'utility' },
  /**
   * Hands over one file of a job of many ranks (a snapshot, or the stats beside one): written to
   * the page's folder on the host; `ranks:open` names it by the key. Over HTTP the bytes are the body.
   */
  'ranks:stage': {
    arg: (zod) => zod.strictObject(fileFields(zod)),
    result: json<{ key: string }>(),
    runs: 'utility',
    upload: true,
  },
  /**
   * Reads the staged files (every one the page staged for the job, stats included) as one job of
   * many ranks, one rank at a time; the job's result is a RanksSummary (`ranks:result`).
   */
  'ranks:open': { arg: (zod) => zod.strictObject({ keys: zod.array(id(zod)).min(1).max(256) }), result: started, job: 'ranks', runs: 'utility' },
  /** Opens the job of many ranks the host was started with (AppInfo.initialJob), as `ranks:open` does. */
  'ranks:openInitial': { arg: none, result: started, job: 'ranks', runs: 'utility' },
  'ranks:result': { arg: (zod) => zod.strictObject({ jobId: id(zod) }), result: json<RanksSummary>(), runs: 'utility' },
  /** Opens one rank of a job as a trace (the job's result is its TraceSummary, as for any open). */
  'ranks:openRank': {
    arg: (zod) => zod.strictObject({ ranksId: id(zod), rank: zod.number().int().min(0).max(Number.MAX_SAFE_INTEGER) }),
    result: started,
    job: 'trace',
    runs: 'utility',
  },
  /** Starts the what-if lab over every rank of a job: the settings ranked by whether they fit every rank. */
  'ranks:whatif': {
    arg: (zod): ZodType<RanksWhatifRequest> => zod.strictObject({ ranksId: id(zod), ...whatifFields(zod) }),
    result: started,
    job: 'whatif',
    runs: 'utility',
  },
  'ranks:whatifResult': { arg: (zod) => zod.strictObject({ jobId: id(zod) }), result: json<RanksWhatifReport>(), runs: 'utility' },
  /**
   * Records a built-in workload on the GPU in a process of its own (a CUDA fault there never takes
   * the host down); the job's result (`job:result`) is the recording, opened as a trace.
   */
  'record:workload': {
    arg: (zod): ZodType<RecordRequest> =>
      zod.strictObject({
        workload: zod.string().min(1).max(64),
        strategy: zod.string().min(1).max(1024).optional(),
        params: zod.record(zod.string().max(64), zod.string().max(256)).optional(),
      }),
    result: started,
    job: 'trace',
    runs: 'utility',
  },
  /**
   * Records a PyTorch program at tensor level (record --pytorch) into a folder of the recordings
   * directory; the job's result is the snapshot of its process with the highest peak reserved
   * (the only one, outside torchrun), opened as a trace. Refused unless info's recordCommand allows it.
   */
  'record:pytorch': {
    arg: (zod): ZodType<RecordPytorchRequest> =>
      zod.strictObject({
        command: zod.string().min(1).max(4096),
        cwd: zod.string().min(1).max(4096).optional(),
        maxEntries: zod.number().int().min(1).max(Number.MAX_SAFE_INTEGER).optional(),
        snapshotEvery: zod.number().int().min(0).max(86_400).optional(),
      }),
    result: started,
    job: 'trace',
    runs: 'utility',
  },
  /** Frees an open trace and its replays' results (a newer file replaced it in the page). */
  'trace:close': { arg: (zod) => zod.strictObject({ traceId: id(zod) }), result: json<{ closed: boolean }>(), runs: 'utility' },
  /**
   * A page of the web host is still there (its client calls this now and then): a page that stops
   * calling is closed after the host's idle time. The desktop app's windows never call it.
   */
  'page:alive': { arg: none, result: json<{ ok: true }>(), runs: 'utility' },
  /** The page is going away (its client calls this as it unloads): its traces and jobs are freed. */
  'page:close': { arg: none, result: json<{ closed: number }>(), runs: 'utility' },
  /**
   * waitMs (at most 1000, every host): answer once the job settles or that long has passed, so a
   * poller learns of the end at once.
   */
  'job:status': { arg: (zod) => zod.strictObject({ jobId: id(zod), waitMs: zod.number().min(0).optional() }), result: json<JobStatus>(), runs: 'utility' },
  'job:result': { arg: (zod) => zod.strictObject({ jobId: id(zod) }), result: json<TraceSummary>(), runs: 'utility' },
  /**
   * `cancelled`: whether this call cancelled the job (false for one that had ended: `state` says
   * how; no `state` for a job the host does not know).
   */
  'job:cancel': { arg: (zod) => zod.strictObject({ jobId: id(zod) }), result: json<{ cancelled: boolean; state?: JobStatus['state'] }>(), runs: 'utility' },
} as const satisfies Record<string, ChannelSpec>

export type Channel = keyof typeof CONTRACT
/** A channel's argument; `void` where it takes none (the call is made without one). */
export type ChannelArg<C extends Channel> =
  z.output<ReturnType<(typeof CONTRACT)[C]['arg']>> extends infer A ? (undefined extends A ? (A extends undefined ? void : A) : A) : never
export type ChannelResult<C extends Channel> = (typeof CONTRACT)[C]['result'] extends Returns<infer T> ? T : never
/** Every channel's argument and result types. */
export type Channels = { [C in Channel]: { arg: ChannelArg<C>; result: ChannelResult<C> } }
/** The channels whose result is a bundle; the channels the desktop app's main process serves. */
export type BundleChannel = { [C in Channel]: (typeof CONTRACT)[C]['result'] extends Returns<Bundle> ? C : never }[Channel]
export type MainChannel = { [C in Channel]: (typeof CONTRACT)[C]['runs'] extends 'main' ? C : never }[Channel]

/** A decoded column bundle: JSON metadata plus named typed arrays. */
export interface Bundle {
  meta: unknown
  arrays: Record<string, BundleArray>
}

export type BundleArray = Uint8Array | Uint16Array | Uint32Array | Int32Array | Float32Array | Float64Array | BigUint64Array

export const CHANNELS = Object.keys(CONTRACT) as readonly Channel[]

/** Channels whose result is a bundle (binary on the wire). */
export const BUNDLE_CHANNELS: ReadonlySet<Channel> = new Set(CHANNELS.filter((c) => specOf(c).result.kind === 'bundle'))

/** What the contract declares of `channel`, as the general shape every entry has. */
export function specOf(channel: Channel): ChannelSpec {
  return CONTRACT[channel]
}

/** Whether `name` is a channel (not merely a property every object has, such as "toString"). */
export function isChannel(name: unknown): name is Channel {
  return typeof name === 'string' && Object.hasOwn(CONTRACT, name)
}

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

/** Error codes an API call can fail with, besides the native library's own. */
export type ApiErrorCode = 'BAD_INPUT' | 'NOT_FOUND' | 'CANCELLED' | 'UNAUTHORIZED' | 'INTERNAL'
