// Types of what the native addon (build/Release/vramscope.node, built from native/binding/)
// exports. Only src-main/native.ts loads it; everything else goes through src-main/services/,
// which validates arguments first.
//
// Bytes and counts are numbers: exact below 2^53 (8 PiB). Addresses are bigints (device addresses
// may use all 64 bits).

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
  /** As the library parses it: "2MiB", "512", "true", "seed". */
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

export interface DeviceCalls {
  regionAlloc: number
  regionFree: number
  vaReserve: number
  vaRelease: number
  map: number
  unmap: number
  asyncAlloc: number
  asyncFree: number
  eventRecord: number
  synchronize: number
  total: number
}

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

export declare function strategies(): StrategyInfo[]
export declare function builtWithCuda(): boolean
export declare function cudaDeviceAvailable():
  | { available: true; reason: null }
  | { available: false; reason: string }
export declare function traceOpNames(): string[]
export declare const runOpCodes: {
  kinds: { alloc: number; free: number; setTime: number }
  statuses: { ok: number; outOfMemory: number; invalidFree: number; doubleFree: number; skipped: number }
}
