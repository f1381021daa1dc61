// Allocators from the native library, with every argument checked here first: a bad argument is a
// TypeError (wrong type) or RangeError (wrong value) whose message begins with the argument's name,
// thrown before any C++ runs. Errors from the library itself keep their stable `code`.
import type {
  AllocatorStats,
  Allocator as NativeAllocator,
  BackingKind,
  BackingOptions,
  Layout,
  OpColumns,
  ParamInfo,
  RunOpsResult,
  StrategyInfo,
  StrategyParams,
  TraceColumns,
} from '../../../native/index.js'
import { loadNative } from '../../native.ts'

export type {
  AllocatorStats,
  BackingKind,
  BackingOptions,
  Layout,
  NativeError,
  NativeErrorCode,
  OpColumns,
  ParamInfo,
  ParamValue,
  RunOpsResult,
  StrategyInfo,
  StrategyParams,
  TraceColumns,
} from '../../../native/index.js'

export const BACKING_KINDS: readonly BackingKind[] = ['simulated', 'cuda_malloc', 'cuda_vmm', 'cuda_async']

/** Layout.blocks.state values (native block_state). */
export const BlockState = { live: 0, free: 1, pending: 2, unusable: 3 } as const

/** runOps() op kinds and per-op statuses (native run_op_kind / run_op_status). */
export const RunOpKind = { alloc: 0, free: 1, setTime: 2 } as const
export const RunOpStatus = { ok: 0, outOfMemory: 1, invalidFree: 2, doubleFree: 3, skipped: 4 } as const

const MAX_U64 = (1n << 64n) - 1n

// The checks below are exported for the other services (replay), so that every argument error reads
// the same way.

/** A TypeError or RangeError that also carries code INVALID_ARGUMENT, like the library's own. */
export function badArgument(kind: 'type' | 'range', message: string): TypeError | RangeError {
  const error = kind === 'type' ? new TypeError(message) : new RangeError(message)
  Object.defineProperty(error, 'code', { value: 'INVALID_ARGUMENT', enumerable: true })
  return error
}

export function describe(value: unknown): string {
  if (typeof value === 'bigint') return `${value}n`
  if (typeof value === 'string') return JSON.stringify(value)
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'an array'
  if (typeof value === 'object') return 'an object'
  return String(value)
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false
  const proto: unknown = Object.getPrototypeOf(value)
  return proto === Object.prototype || proto === null
}

/** A byte count or similar: a non-negative safe integer, or a bigint below 2^64. */
export function checkCount(name: string, value: unknown, allowBigint: boolean): void {
  if (typeof value === 'bigint') {
    if (!allowBigint) throw badArgument('type', `${name} must be a number, got ${describe(value)}`)
    if (value < 0n || value > MAX_U64) throw badArgument('range', `${name} must be from 0 to 2^64 - 1, got ${describe(value)}`)
    return
  }
  if (typeof value !== 'number') throw badArgument('type', `${name} must be a ${allowBigint ? 'number or bigint' : 'number'}, got ${describe(value)}`)
  if (!Number.isInteger(value)) throw badArgument('range', `${name} must be an integer, got ${describe(value)}`)
  if (value < 0) throw badArgument('range', `${name} must not be negative, got ${describe(value)}`)
  if (!Number.isSafeInteger(value)) throw badArgument('range', `${name} must be at most 2^53 - 1 (pass a bigint for more), got ${describe(value)}`)
}

function checkStream(name: string, value: unknown): number {
  if (value === undefined) return 0
  checkCount(name, value, false)
  return value as number
}

function checkAddress(name: string, value: unknown): bigint {
  if (typeof value !== 'bigint') throw badArgument('type', `${name} must be a bigint (as allocate() returns it), got ${describe(value)}`)
  if (value < 0n || value > MAX_U64) throw badArgument('range', `${name} must be from 0n to 2^64 - 1, got ${describe(value)}`)
  return value
}

let strategyCache: readonly StrategyInfo[] | undefined

/** Every strategy the library has, in a fixed order, with its parameters. */
export function listStrategies(): readonly StrategyInfo[] {
  strategyCache ??= Object.freeze(loadNative().strategies())
  return strategyCache
}

export function findStrategy(name: unknown): StrategyInfo {
  if (typeof name !== 'string') throw badArgument('type', `strategy must be a string, got ${describe(name)}`)
  const all = listStrategies()
  const info = all.find((s) => s.name === name)
  if (!info) throw badArgument('range', `strategy: unknown strategy ${describe(name)} (known: ${all.map((s) => s.name).join(', ')})`)
  return info
}

function checkParamValue(strategy: string, info: ParamInfo, value: unknown): void {
  const name = `params.${info.name}`
  if (typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'boolean')
    throw badArgument('type', `${name} must be a string, number or boolean, got ${describe(value)}`)
  switch (info.kind) {
    case 'size':
    case 'uint':
      if (typeof value === 'boolean') throw badArgument('type', `${name} is a ${info.kind} of strategy '${strategy}', got ${describe(value)}`)
      if (typeof value === 'number') checkCount(name, value, false)
      break
    case 'double':
      if (typeof value === 'boolean' || (typeof value === 'number' && !Number.isFinite(value)))
        throw badArgument('range', `${name} must be a finite number, got ${describe(value)}`)
      break
    case 'bool':
      if (typeof value === 'number' || (typeof value === 'string' && value !== 'true' && value !== 'false'))
        throw badArgument('type', `${name} must be true or false, got ${describe(value)}`)
      break
    case 'string':
      if (typeof value !== 'string') throw badArgument('type', `${name} must be a string, got ${describe(value)}`)
      break
    case 'size_list':
      if (typeof value === 'boolean') throw badArgument('type', `${name} must be a list of sizes such as "256,1KiB,4KiB", got ${describe(value)}`)
      if (typeof value === 'number') checkCount(name, value, false)
      break
  }
}

export function checkParams(strategy: StrategyInfo, params: unknown): StrategyParams {
  if (params === undefined) return {}
  if (!isPlainObject(params)) throw badArgument('type', `params must be a plain object, got ${describe(params)}`)
  for (const [key, value] of Object.entries(params)) {
    const info = strategy.params.find((p) => p.name === key)
    if (!info) {
      const known = strategy.params.map((p) => p.name).join(', ')
      throw badArgument(
        'range',
        `params.${key}: strategy '${strategy.name}' has no parameter '${key}'` + (known ? ` (it takes: ${known})` : ' (it takes none)'),
      )
    }
    checkParamValue(strategy.name, info, value)
  }
  return params as StrategyParams
}

function checkBacking(backing: unknown): BackingKind {
  if (typeof backing !== 'string') throw badArgument('type', `backing must be a string, got ${describe(backing)}`)
  if (!(BACKING_KINDS as readonly string[]).includes(backing))
    throw badArgument('range', `backing: unknown backing ${describe(backing)} (${BACKING_KINDS.join(', ')})`)
  return backing as BackingKind
}

const BACKING_OPTION_NAMES = ['capacity', 'granularity', 'completionDelayNs', 'releaseThreshold', 'device'] as const

function checkBackingOptions(options: unknown): BackingOptions {
  if (options === undefined) return {}
  if (!isPlainObject(options)) throw badArgument('type', `options must be a plain object, got ${describe(options)}`)
  for (const [key, value] of Object.entries(options)) {
    if (!(BACKING_OPTION_NAMES as readonly string[]).includes(key))
      throw badArgument('range', `options.${key}: no such backing option (${BACKING_OPTION_NAMES.join(', ')})`)
    if (value === undefined) continue
    checkCount(`options.${key}`, value, false)
  }
  const { granularity, capacity } = options as BackingOptions
  if (granularity !== undefined && (granularity < 256 || (granularity & (granularity - 1)) !== 0 || granularity > 2 ** 30))
    throw badArgument('range', `options.granularity must be a power of two from 256 B to 1 GiB, got ${granularity}`)
  if (capacity === 0) throw badArgument('range', 'options.capacity must be more than 0 bytes')
  return options as BackingOptions
}

function checkOps(ops: unknown): OpColumns {
  if (typeof ops !== 'object' || ops === null) throw badArgument('type', `ops must be an object of typed arrays, got ${describe(ops)}`)
  const o = ops as Record<string, unknown>
  const columns: [keyof OpColumns, new (n: number) => ArrayBufferView, string][] = [
    ['kind', Uint8Array, 'Uint8Array'],
    ['size', Float64Array, 'Float64Array'],
    ['stream', Uint32Array, 'Uint32Array'],
    ['target', Uint32Array, 'Uint32Array'],
  ]
  for (const [name, type, typeName] of columns)
    if (!(o[name] instanceof type)) throw badArgument('type', `ops.${name} must be a ${typeName}, got ${describe(o[name])}`)
  const { kind, size, target } = o as unknown as OpColumns
  const n = kind.length
  for (const [name] of columns)
    if ((o[name] as Uint8Array).length !== n)
      throw badArgument('range', `ops.${name} has ${(o[name] as Uint8Array).length} entries, ops.kind has ${n}: every column needs one per op`)
  for (let i = 0; i < n; i++) {
    const k = kind[i]!
    if (k === RunOpKind.alloc || k === RunOpKind.setTime) {
      const s = size[i]!
      if (!Number.isSafeInteger(s) || s < 0) throw badArgument('range', `ops.size[${i}] must be a non-negative integer, got ${s}`)
    } else if (k === RunOpKind.free) {
      const t = target[i]!
      if (t >= i || kind[t] !== RunOpKind.alloc) throw badArgument('range', `ops.target[${i}] must be the index of an earlier alloc op, got ${t}`)
    } else {
      throw badArgument('range', `ops.kind[${i}] must be 0 (alloc), 1 (free) or 2 (setTime), got ${k}`)
    }
  }
  return ops as OpColumns
}

/**
 * One strategy on one backing. Memory goes back when dispose() is called (or when the object is
 * garbage-collected, for the simulated backing, where there is no memory to hold).
 */
export class Allocator {
  readonly info: StrategyInfo
  readonly #native: NativeAllocator

  constructor(strategy: string, params?: StrategyParams, backing: BackingKind = 'simulated', options?: BackingOptions) {
    this.info = findStrategy(strategy)
    const checkedParams = checkParams(this.info, params)
    const checkedBacking = checkBacking(backing)
    const checkedOptions = checkBackingOptions(options)
    const { Allocator: Native } = loadNative()
    this.#native = new Native(this.info.name, checkedParams, checkedBacking, checkedOptions)
  }

  get strategy(): string {
    return this.#native.strategy
  }
  get backing(): BackingKind {
    return this.#native.backing
  }
  get supportsReset(): boolean {
    return this.#native.supportsReset
  }
  get threadSafe(): boolean {
    return this.#native.threadSafe
  }
  get disposed(): boolean {
    return this.#native.disposed
  }

  /** Returns the block's address, 0n for 0 bytes. Throws OUT_OF_MEMORY with the state unchanged. */
  allocate(size: number | bigint, stream?: number): bigint {
    checkCount('size', size, true)
    return this.#native.allocate(size, checkStream('stream', stream))
  }

  /** Freeing on another stream than the block's leaves it pending until that stream's event. */
  deallocate(address: bigint, stream?: number): void {
    this.#native.deallocate(checkAddress('address', address), checkStream('stream', stream))
  }

  recordStream(address: bigint, stream: number): void {
    if (stream === undefined) throw badArgument('type', 'stream is required')
    this.#native.recordStream(checkAddress('address', address), checkStream('stream', stream))
  }

  processDeferred(): number {
    return this.#native.processDeferred()
  }
  synchronizeDeferred(): void {
    this.#native.synchronizeDeferred()
  }
  stats(): AllocatorStats {
    return this.#native.stats()
  }
  walk(): Layout {
    return this.#native.walk()
  }
  trim(): void {
    this.#native.trim()
  }
  /** Frees every block at once; UNSUPPORTED where the strategy has no reset (see supportsReset). */
  reset(): void {
    this.#native.reset()
  }

  /** The simulated backing's clock; stream events complete as it advances. */
  setTime(ns: number | bigint): void {
    checkCount('ns', ns, true)
    this.#native.setTime(ns)
  }

  setTracing(on: boolean): void {
    if (typeof on !== 'boolean') throw badArgument('type', `on must be a boolean, got ${describe(on)}`)
    this.#native.setTracing(on)
  }
  /** Events recorded since the last call; `op` indexes traceOpNames(). */
  takeTrace(): TraceColumns {
    return this.#native.takeTrace()
  }

  /**
   * Applies a whole sequence of operations on a worker thread. Until the promise settles, every
   * other call on this allocator throws BUSY.
   */
  runOps(ops: OpColumns): Promise<RunOpsResult> {
    return this.#native.runOps(checkOps(ops))
  }

  dispose(): void {
    this.#native.dispose()
  }
}

export function builtWithCuda(): boolean {
  return loadNative().builtWithCuda()
}

export function cudaDeviceAvailable(): { available: true; reason: null } | { available: false; reason: string } {
  return loadNative().cudaDeviceAvailable()
}

let traceOpNameCache: readonly string[] | undefined
/** Names of trace ops, indexed by TraceColumns.op. */
export function traceOpNames(): readonly string[] {
  traceOpNameCache ??= Object.freeze(loadNative().traceOpNames())
  return traceOpNameCache
}
