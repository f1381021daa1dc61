// Types of what the native addon (build/Release/vramscope.node, built from native/binding/)
// exports. Only src-main/native.ts loads it; everything else goes through src-main/services/,
// which validates arguments first.
//
// Bytes and counts are numbers: exact below 2^53 (8 PiB). Addresses are bigints (device addresses
// may use all 64 bits).

import type { DeviceCalls, ReplayFigures } from '../src-shared/summary.ts'

export type BackingKind = 'simulated' | 'cuda_malloc' | 'cuda_vmm' | 'cuda_async'

/** The `code` of every error the addon throws. */
export type NativeErrorCode =
  | 'OUT_OF_MEMORY' // a request did not fit: `requested` and `available` say by how much
  | 'INVALID_FREE' // an address this allocator never handed out: `address`
  | 'DOUBLE_FREE' // an address already freed: `address`
  | 'INVALID_ARGUMENT' // a bad parameter value, strategy or backing name
  | 'UNSUPPORTED' // the strategy needs what the backing lacks, reset() where there is none...
  | 'NO_CUDA_DEVICE' // a CUDA backing where there is no driver or device
  | 'DEVICE_ERROR' // a CUDA call failed
  | 'BUSY' // runOps() is still working on this allocator
  | 'DISPOSED' // dispose() was called
  | 'CANCELLED' // replay() was asked to stop (its options.cancelFlag raised, or options.shouldCancel returned true)
  | 'HOST_OUT_OF_MEMORY'
  | 'INTERNAL'

export interface NativeError extends Error {
  code: NativeErrorCode
  requested?: number
  available?: number
  address?: bigint
}

export type ParamKind = 'size' | 'uint' | 'double' | 'bool' | 'string' | 'size_list'

export interface ParamInfo {
  name: string
  kind: ParamKind
  /** As the library parses it: "2MiB", "512", "true", "pow2". */
  default: string
  description: string
}

export interface StrategyInfo {
  name: string
  description: string
  params: ParamInfo[]
  needsVmm: boolean
  needsAsync: boolean
  supportsReset: boolean
  /** Serves a replay only: it places blocks by a plan of the whole trace (planned), so no Allocator of it takes requests. */
  needsPlan: boolean
  /** The real backing it runs on by default on a GPU. */
  cudaBacking: BackingKind
}

/** Strategy parameters: sizes as "2MiB" or a number of bytes, booleans, preset names... */
export type ParamValue = string | number | boolean
export type StrategyParams = Record<string, ParamValue>

export interface BackingOptions {
  /** Physical bytes the backing may hand out (simulated: default 80 GiB; CUDA: a cap). */
  capacity?: number
  /** Simulated VMM granule, a power of two >= 256 (default 2 MiB). */
  granularity?: number
  /** Simulated: how long queued stream work takes before its event completes (default 10 µs). */
  completionDelayNs?: number
  /** Stream-ordered pool release threshold (cudaMemPoolAttrReleaseThreshold). */
  releaseThreshold?: number
  /** CUDA device ordinal. */
  device?: number
}

export type { DeviceCalls }

export interface AllocatorStats {
  requestedLive: number
  requestedPeak: number
  roundedLive: number
  roundedPeak: number
  reservedLive: number
  reservedPeak: number
  addressSpace: number
  pendingBytes: number
  freeBytes: number
  unusableBytes: number
  largestFreeBlock: number
  /** 1 - largestFreeBlock / freeBytes; 0 when nothing is free. */
  externalFragmentation: number
  internalWaste: number
  liveBlocks: number
  pendingBlocks: number
  allocations: number
  deallocations: number
  failures: number
  deviceCalls: DeviceCalls
}

/** Block states in Layout.blocks.state. */
export type BlockStateCode = 0 | 1 | 2 | 3 // live, free, pending, unusable

export interface Layout {
  /** Memory obtained from the backing; unmapped ones are reserved address space only. */
  regions: { address: BigUint64Array; size: Float64Array; mapped: Uint8Array; kind: Uint32Array }
  /** Blocks tile every mapped region. */
  blocks: { address: BigUint64Array; size: Float64Array; state: Uint8Array; aux: Uint32Array }
}

/** Trace events in columns; `op` indexes traceOpNames(). */
export interface TraceColumns {
  op: Uint8Array
  address: BigUint64Array
  size: Float64Array
  requested: Float64Array
  stream: Float64Array
  aux: Uint32Array
}

/** A sequence of operations for runOps(), one entry per op in each column. */
export interface OpColumns {
  /** 0 alloc `size` bytes on `stream`; 1 free the block of alloc op `target`; 2 set the simulated clock to `size` ns. */
  kind: Uint8Array
  size: Float64Array
  stream: Uint32Array
  target: Uint32Array
}

export interface RunOpsResult {
  /** alloc: the address handed out (0n for 0 bytes or a failure); free: the address freed. */
  address: BigUint64Array
  /** 0 ok, 1 out of memory, 2 invalid free, 3 double free, 4 skipped (a free whose alloc failed). */
  status: Uint8Array
  failures: number
  elapsedNs: number
}

export declare class Allocator {
  constructor(strategy: string, params: StrategyParams, backing: BackingKind, options?: BackingOptions)
  readonly strategy: string
  readonly backing: BackingKind
  readonly supportsReset: boolean
  readonly threadSafe: boolean
  readonly disposed: boolean
  /** 0n for 0 bytes. */
  allocate(size: number | bigint, stream?: number): bigint
  deallocate(address: bigint, stream?: number): void
  recordStream(address: bigint, stream: number): void
  processDeferred(): number
  synchronizeDeferred(): void
  stats(): AllocatorStats
  walk(): Layout
  trim(): void
  reset(): void
  setTime(ns: number | bigint): void
  setTracing(on: boolean): void
  takeTrace(): TraceColumns
  runOps(ops: OpColumns): Promise<RunOpsResult>
  dispose(): void
}

/** The request events replay() reads (src-main/services/trace/model.ts, TraceEvents), one entry per event. */
export interface ReplayEventColumns {
  /** 0 alloc, 1 free, 2 marker, 3 oom (recorded failure: counted, not replayed), 4 trim (the program released cached memory). */
  kind: Uint8Array
  /** Block id, dense from 0 (alloc/free). */
  id: Uint32Array
  /** Bytes (alloc): whole numbers below 2^53. */
  size: Float64Array
  /** Stream index; replayed as simulated stream index + 1. */
  stream: Uint32Array
  /** Nanoseconds: the simulated clock, so that stream-ordered frees complete in the trace's time. */
  time: Float64Array
  /** Optional: the memory pool each alloc is served from, 0 the default pools, k > 0 private pool k (a CUDA graph's mempool). */
  pool?: Uint32Array
}

export interface ReplayTargetSpec {
  /** Unique among the targets. */
  label: string
  strategy: string
  params?: StrategyParams
  /** The target's simulated device (capacity is replaced by options.capacity when that is given). */
  simulated?: {
    capacity?: number
    granularity?: number
    completionDelayNs?: number
    releaseThreshold?: number
    /** Where a recording's driver put each region, in order; region i goes there when free. */
    regionPlacement?: BigUint64Array
  }
  /** Start from this state instead of an empty allocator (caching, preset pytorch, only). */
  initialState?: ReplayInitialState
}

/**
 * An allocator's state when a recording's window opened (docs/architecture.md, "Replay from the
 * recorded state"), as columns. Segments are obtained in order (regionPlacement then puts them at
 * their recorded addresses); every byte of a segment that no live block covers is free. Each live
 * block stands for the alloc event `blockEvent` (the trace's stand-in), which is then not replayed.
 */
export interface ReplayInitialState {
  segmentAddress: BigUint64Array
  /** Bytes, whole numbers below 2^53. */
  segmentSize: Float64Array
  /** Index into the trace's stream table. */
  segmentStream: Uint32Array
  /** Memory pool: 0 the default pools, k a private pool (as ReplayEvents.pool). */
  segmentPool: Uint32Array
  /** Bit 0: PyTorch's small pool; bit 1: a mapped run of an expandable segment. */
  segmentFlags: Uint8Array
  /** Recorded addresses, each inside one segment. */
  blockAddress: BigUint64Array
  /** The block's bytes (its request's are the alloc event's). */
  blockSize: Float64Array
  blockEvent: Uint32Array
}

export interface ReplayOptions {
  /** Device memory cap for every target, bytes; requests that do not fit fail and are counted. */
  capacity?: number
  /** Reset strategies that support it (arena) at markers; default true. */
  resetAtMarkers?: boolean
  /** Metrics buckets (min/max/last each); default 2048, fewer when there are fewer events. */
  buckets?: number
  /** Also one metrics row per event (ReplayResult.full). */
  fullMetrics?: boolean
  /** Collect the layout events; default true. */
  layout?: boolean
  /** With layout, keep split and merge events too; default true (false: they are left out). */
  structureEvents?: boolean
  /** Blocks the fragmentation walks at bucket ends may visit per event (default 2; 0: no limit). */
  walkBudgetPerEvent?: number
  /** The same for walks at new reserved peaks (default 4; 0: no limit). */
  peakWalkBudgetPerEvent?: number
  /** Measure external fragmentation (default true). false: no walks and no re-run to the peak; the buckets' fragmentation columns are NaN, externalFragmentationAtPeak NaN, largestFreeBlockAtPeak and freeBytesAtPeak 0. */
  fragmentation?: boolean
  /** End each target's replay at its first failed allocation (default false): summary.stoppedAtFailure, failures 1, firstFailures[0] the event; events counts those replayed. */
  stopAtFailure?: boolean
  /** Events between progress reports and cancel checks (default 65536). */
  progressInterval?: number
  /**
   * Targets replayed at once (default 0: as many as there are threads; 1: one after another), each
   * on a thread of the process's one pool of replay threads, a thread a core, which every replay in
   * the process shares in the order asked (so replays side by side never run more at once than there
   * are cores, and none takes a thread of libuv's pool). Results keep the targets' order; progress
   * reports of the targets interleave.
   */
  threads?: number
  /**
   * With more targets than threads (default true): each target replays a first slice of its events
   * (a fiftieth), timed, then the rest of each, the one with the most time left first, so the
   * longest does not start last and run alone; every target then holds its working set from its
   * slice to its end, all at once. false: one after another in order, each whole.
   */
  longestFirst?: boolean
  /**
   * With layout: also cut each target's layout to what its map shows after this request event, or
   * 'peak' each target's own reserved peak (ReplayResult.preview; src-shared/wire.ts, cutAt).
   */
  previewAt?: number | 'peak'
  /** Asked at each progress report (on the JS thread); true stops the replay with CANCELLED. */
  shouldCancel?: () => boolean
  /**
   * A flag from cancelFlag(): once raiseCancelFlag() raises it, the replay's threads stop within 64
   * events (one still waiting for a thread stops before it starts) and it rejects with CANCELLED.
   */
  cancelFlag?: CancelFlag
}

export interface ReplayProgress {
  /** Index of the target being replayed. */
  target: number
  targets: number
  /** Events of this target done so far. */
  eventsDone: number
  eventsTotal: number
}

/** What the strategy did (trace ops of traceOpNames()), with the request event that caused it. */
export interface ReplayLayoutColumns {
  op: Uint8Array
  address: BigUint64Array
  size: Float64Array
  requested: Float64Array
  /** Stream index of the trace; 0xFFFFFFFF where the event has none (regions, maps). */
  stream: Uint32Array
  aux: Uint32Array
  /** Index of the request event being replayed when it happened. */
  event: Uint32Array
}

/** Metrics per bucket of consecutive events [end[b - 1], end[b]); bytes as numbers. */
export interface ReplayBuckets {
  end: Uint32Array
  /** Time of the bucket's last event (ns). */
  time: Float64Array
  requestedMin: Float64Array
  requestedMax: Float64Array
  requestedLast: Float64Array
  roundedMin: Float64Array
  roundedMax: Float64Array
  roundedLast: Float64Array
  reservedMin: Float64Array
  reservedMax: Float64Array
  reservedLast: Float64Array
  /** Cumulative, after the bucket's last event. */
  deviceCalls: Float64Array
  /** After the bucket's last event; NaN where the walk budget allowed no walk. */
  externalFragmentation: Float64Array
  largestFreeBlock: Float64Array
  freeBytes: Float64Array
}

/** One row per event, after the event. */
export interface ReplayFullMetrics {
  requested: Float64Array
  rounded: Float64Array
  reserved: Float64Array
  deviceCalls: Float64Array
}

/** A target's summary: its figures (src-shared/summary.ts, the names every TypeScript reader shares) and its arrays and flags. */
export interface ReplaySummary extends ReplayFigures {
  peakMeasuredByRerun: boolean
  firstFailures: Uint32Array
  /** options.stopAtFailure ended this target's replay at its first failure. */
  stoppedAtFailure: boolean
  deviceCallDetail: DeviceCalls
}

export interface ReplayResult {
  label: string
  strategy: string
  /** The parameters as the library received them (text). */
  params: Record<string, string>
  layout: ReplayLayoutColumns
  buckets: ReplayBuckets
  full?: ReplayFullMetrics
  summary: ReplaySummary
  /** ReplayOptions.previewAt's cut, made in the target's thread; absent where the layout has no regions. */
  preview?: ReplayPreview
}

/**
 * A layout cut at request `event`: the layout events kept (ascending), and the joined ranges of
 * the regions not present then, which stand in for their events (src-shared/wire.ts, LayoutCut).
 */
export interface ReplayPreview {
  event: number
  kept: Uint32Array
  goneStart: BigUint64Array
  goneEnd: BigUint64Array
}

export declare function strategies(): StrategyInfo[]
export declare function builtWithCuda(): boolean
export declare function cudaDeviceAvailable():
  | { available: true; reason: null }
  | { available: false; reason: string }
export declare function traceOpNames(): string[]
/** Replays the events through every target in turn on a worker thread. */
export declare function replay(
  events: ReplayEventColumns,
  targets: ReplayTargetSpec[],
  options?: ReplayOptions,
  onProgress?: (progress: ReplayProgress) => void,
): Promise<ReplayResult[]>
/** A cancel flag for replay()'s options.cancelFlag: opaque, shared with the replays given it. */
export interface CancelFlag {
  readonly __cancelFlag: never
}
export declare function cancelFlag(): CancelFlag
/** Raises the flag: every replay (and recording) given it stops at its next check, whatever this thread is doing. */
export declare function raiseCancelFlag(flag: CancelFlag): void
export declare const runOpCodes: {
  kinds: { alloc: number; free: number; setTime: number }
  statuses: { ok: number; outOfMemory: number; invalidFree: number; doubleFree: number; skipped: number }
}

/** A built-in GPU workload (native/cuda/include/vramscope/workloads.hpp). */
export interface WorkloadInfo {
  name: string
  description: string
  params: ParamInfo[]
  /** Kernels on several streams at once. */
  multiStream: boolean
  /** The strategy the workload is (device_bump), or "" when any strategy runs it. */
  fixedStrategy: string
}

export interface WorkloadRecordSpec {
  workload: string
  strategy: string
  strategyParams: StrategyParams
  /** Parameters of the workload, as text ("8MiB", "200"). */
  workloadParams: Record<string, string>
  device: number
  /** Bytes the backing may hand out; 0: the device's free memory. */
  capacity: number
  /**
   * A flag from cancelFlag(): once raiseCancelFlag() raises it, the run stops at its next step or
   * allocation and resolves with stoppedBy "cancelled", what it recorded until then streamed.
   */
  cancelFlag?: CancelFlag
}

/** What a recording run streams, in order, a chunk at a time (about every 50 ms). */
export interface WorkloadChunk {
  /** Request events (model.ts EventKind); a marker's id indexes markerNames. */
  requests: { kind: Uint8Array; id: Uint32Array; size: Float64Array; stream: Uint32Array; time: Float64Array }
  markerNames: string[]
  /** The strategy's layout events at real device addresses; stream is the workload's stream index. */
  layout: {
    op: Uint8Array
    address: BigUint64Array
    size: Float64Array
    requested: Float64Array
    stream: Uint32Array
    time: Float64Array
    /** Host time of the allocate/deallocate call that caused the event. */
    latencyNs: Uint32Array
  }
  steps: { index: Uint32Array; gpuNs: Float64Array; hostNs: Float64Array }
}

export interface WorkloadRecordResult {
  strategy: string
  backing: string
  device: string
  allocations: number
  frees: number
  steps: number
  verifiedBytes: number
  corruptedBytes: number
  outOfMemory: boolean
  /** The out-of-memory or CUDA error that ended the run early, or "cancelled"; "" when it ran to its end. */
  stoppedBy: string
}

export declare function workloads(): WorkloadInfo[]
/** Runs a workload on a worker thread, calling onChunk on the JavaScript thread as it goes. */
export declare function recordWorkload(spec: WorkloadRecordSpec, onChunk: (chunk: WorkloadChunk) => void): Promise<WorkloadRecordResult>
