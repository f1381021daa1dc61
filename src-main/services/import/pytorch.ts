// Imports a PyTorch memory snapshot (torch.cuda.memory._dump_snapshot: a pickle, protocols 2 to 5,
// or the same structure as JSON) into a request trace (source "pytorch-snapshot") and PyTorch's
// own layout, the result named "pytorch (recorded)", so the real allocator stands beside the
// modelled ones.
//
// device_traces[d] (the allocator's ring buffer of events on device d) becomes request events:
//   alloc          -> alloc, with a dense id per live address, frames -> stack, stream -> streams
//   free_requested -> free of that id (the program let go of the block)
//   oom            -> oom;  snapshot -> a marker;  external_annotations -> markers, by time
// and layout events (native trace_op codes, LayoutTrace columns):
//   alloc -> alloc (size: PyTorch's 512-byte rounding of the request, which the trace does not
//   record); free_requested + free_completed at once -> free; apart -> free_pending ... then
//   free_completed; segment_alloc/free -> region_reserve/release (aux: 1 small pool, 2 large,
//   0 unknown); segment_map/unmap -> map/unmap (expandable segments); oom -> failure.
// Times: time_us -> nanoseconds since the earliest event imported.
//
// A ring buffer that overflowed lost its oldest events: frees of blocks it never saw allocated,
// releases of segments it never saw reserved, and blocks or segments live in `segments` (taken at
// the end) that it never saw created. Each gets a synthesized alloc or reservation at t = 0, and
// meta.warnings says how many.
//
// Two paths. The fast one (pytorch-fast.ts) decodes a pickle held whole in memory straight into
// the columns, building no object per event; it takes only what Python's pickler writes for a
// snapshot and hands anything else back, whereupon the general path below runs from the start
// (the restricted unpickler, then the mapper), which gives the import or the error. Both fill the
// same SnapshotMapper in the same order, so their imports are equal. Before the fast path, where
// the addon is loaded, the native decoder (native/core/snapshot_pickle.cpp, a port of the fast
// path and of SnapshotMapper.apply) does the same in C++ and, where the snapshot's segments and
// annotations allow, the finish too (the merge and the layouts: finishedNatively builds only the
// tables, warnings and properties); elsewhere the mapper adopts its columns (adoptNative) and
// finishes them. It takes no more than the fast path and hands the rest back to it. It runs on the
// calling thread, so the async imports give it only files of at most chunkBytes (4 MiB: a few ms
// here), no longer than one of the fast path's steps between yields; VRAMSCOPE_SNAPSHOT_DECODER=js
// or the option nativeDecoder: false leave it out. A file below `wholeBelow`
// (256 MiB) is read whole for it (memory: the file, and the fast path's memo of 6 bytes an
// entry); a larger one, or one at least `boundedAbove` where that is given, takes the general
// path in bounded memory.
//
// Bounded memory. On the general path a pickle is read in chunks (4 MiB), and the events of device_traces are mapped
// to typed-array columns as the unpickler appends them (ListStream), never kept as objects. Files
// of `boundedAbove` bytes or more (4 MiB) are read twice: a first pass finds which memo entries
// the pickle reads back, so the second stores only those (with the whole memo every event object
// would stay alive). Columns grow in 4096-row chunks that the final copy frees as it goes. Peak
// memory is then about 2 x the output columns (request ~33 and layout ~45 bytes per event), plus
// the memo entries read back (for torch's pickles: the shared frames lists, frame dicts and key
// strings; each is kept to the end once read back), the `segments` list and one chunk, however
// large the file: a 1 GB snapshot of 7.2 M events peaked at 1.4 GB resident here. The async
// imports let the event loop in after every chunk and between finishing steps. The JSON form is
// parsed whole (JSON.parse), so it is limited to 512 MiB and not bounded.
import { open, stat } from 'node:fs/promises'
import { basename } from 'node:path'

import { concatBytes } from '../../../src-shared/bytes.ts'
import { loadNative, type NativeAddon } from '../../native.ts'
import type { NativeSnapshot, NativeSnapshotDevice } from '../../../native/index.js'
import { copyEvents, writeEvent } from '../trace/events-builder.ts'
import { LayoutOp, allocateLayout, type LayoutTrace } from '../../../src-shared/layout.ts'
import { EventKind, allocateEvents, type Frame, type RequestTrace, type TraceEvents } from '../trace/model.ts'
import type { StrategyResult } from '../../../src-shared/results.ts'
import { SnapshotImportError, type SnapshotErrorCode } from './snapshot-error.ts'
import { decodeFast, decodeFastSteps } from './pytorch-fast.ts'
import { MemoReferenceScanner, PickleDict, Unpickler, addDictPairs, decodeLong, decodeUtf8, dictPairs, type PickleValue } from './unpickle.ts'

export const RECORDED_LAYOUT_NAME = 'pytorch (recorded)'

export interface PytorchImportOptions {
  /** The device to import (an index of device_traces), or 'all'. Default: 0, or the first device with data. */
  device?: number | 'all'
  /** What meta.origin says (default: the file's base name). */
  origin?: string
  /** Bytes read at a time (default 4 MiB). */
  chunkBytes?: number
  /**
   * Pickles at least this large get the memo pre-pass that bounds memory (default 4 MiB) when the
   * general path reads them; a file this large is read in chunks, never whole.
   */
  boundedAbove?: number
  /** Files smaller than this are read whole and decoded by the fast path (default 256 MiB). */
  wholeBelow?: number
  /** parsePytorchSnapshot without the fast path (tests and benchmarks compare the two). */
  generalPathOnly?: boolean
  /**
   * Whether the native decoder may take a pickle held whole (default: true, unless the
   * environment has VRAMSCOPE_SNAPSHOT_DECODER=js); false leaves it to the JavaScript paths.
   */
  nativeDecoder?: boolean
  /**
   * Whether the native decoder may finish the import itself (merge, layouts; default true): false
   * leaves the finish to the mapper here (tests compare the two).
   */
  nativeFinish?: boolean
  /** Most nested containers in the pickle (default 200). */
  maxDepth?: number
  /** Called after each chunk; bytesTotal counts every pass over the file, so bytesDone only grows. */
  onProgress?: (progress: { bytesDone: number; bytesTotal: number; phase: 'scan' | 'parse' }) => void
  signal?: AbortSignal
}

export interface PytorchImport {
  trace: RequestTrace
  /** PyTorch's own layout of each imported device, named "pytorch (recorded)" (", cuda:N" with several). */
  recorded: StrategyResult[]
  /** Devices the snapshot has events or segments for. */
  devices: number[]
  format: 'pickle' | 'json'
  /** What the trace's ring buffer lost and what stands in for it, over the imported devices. */
  overflow: OverflowCounts
}

export interface OverflowCounts {
  /** Frees, releases and completions of blocks or segments the trace never saw created. */
  orphanEvents: number
  /** Allocations added at t = 0 (request trace). */
  synthesizedAllocs: number
  /** Blocks added at t = 0 to the recorded layout (allocs of orphans and of live blocks). */
  synthesizedBlocks: number
  /** Segment reservations (or mappings) added at t = 0 to the recorded layout. */
  synthesizedSegments: number
}

const DEFAULT_CHUNK = 4 << 20
/** Measured here: from a few MB up, the pre-pass pays for itself in garbage not collected. */
const DEFAULT_BOUNDED_ABOVE = 4 << 20
/** Reading a file whole costs its size in memory, besides the fast path's memo (6 bytes an entry, about an entry per 20 input bytes for torch's pickles). */
const DEFAULT_WHOLE_BELOW = 256 << 20
/** The unpickler's default limit on nesting, which the fast path must respect too. */
const DEFAULT_MAX_DEPTH = 200
/** JSON.parse needs the text as one string; V8 strings stop short of 2^29 characters. */
const MAX_JSON_BYTES = 512 << 20
/** The request trace's device column is 16 bits. */
const MAX_DEVICE = 65535
/** PyTorch's kMinBlockSize: every block is a multiple of it. */
const MIN_BLOCK = 512

type Dict = PickleDict | Record<string, unknown>

function isDict(value: unknown): value is Dict {
  return value instanceof PickleDict || (typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof Uint8Array))
}

function field(dict: Dict, key: string): unknown {
  if (dict instanceof PickleDict) return dict.get(key)
  return Object.hasOwn(dict, key) ? dict[key] : undefined
}

function describe(value: unknown): string {
  if (value === undefined) return 'missing'
  if (typeof value === 'bigint') return `${value}n`
  if (typeof value === 'string') return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}...` : value)
  if (value === null || typeof value !== 'object') return String(value)
  return Array.isArray(value) ? 'a list' : 'a dict'
}

/** Reads a snapshot file in chunks and imports it. */
export async function importPytorchSnapshot(path: string, options: PytorchImportOptions = {}): Promise<PytorchImport> {
  const file = path
  let size: number
  try {
    size = (await stat(path)).size
  } catch (e) {
    throw new SnapshotImportError(file, 'unreadable', undefined, (e as Error).message)
  }
  const handle = await open(path, 'r').catch((e: Error) => {
    throw new SnapshotImportError(file, 'unreadable', undefined, e.message)
  })
  try {
    const chunkBytes = options.chunkBytes ?? DEFAULT_CHUNK
    if (size > 0 && size < (options.wholeBelow ?? DEFAULT_WHOLE_BELOW) && (options.boundedAbove === undefined || size < options.boundedAbove)) {
      // Read whole (progress: the first of two halves, the decoding the second).
      const whole = new Uint8Array(size)
      for (let at = 0; at < size; ) {
        options.signal?.throwIfAborted()
        const { bytesRead } = await handle.read(whole, at, Math.min(chunkBytes, size - at), at).catch((e: Error) => {
          throw new SnapshotImportError(file, 'unreadable', at, e.message)
        })
        if (bytesRead === 0) throw new SnapshotImportError(file, 'unreadable', at, 'the file became shorter while it was read')
        at += bytesRead
        options.onProgress?.({ bytesDone: at, bytesTotal: 2 * size, phase: 'parse' })
      }
      return await importWhole(whole, file, options, size)
    }
    const buffer = new Uint8Array(Math.max(1, Math.min(chunkBytes, Math.max(size, 1))))
    const readPass = async (consume: (chunk: Uint8Array) => void, done: number, total: number, phase: 'scan' | 'parse') => {
      for (let at = 0; at < size; ) {
        options.signal?.throwIfAborted()
        const { bytesRead } = await handle.read(buffer, 0, Math.min(buffer.length, size - at), at).catch((e: Error) => {
          throw new SnapshotImportError(file, 'unreadable', at, e.message)
        })
        if (bytesRead === 0) throw new SnapshotImportError(file, 'unreadable', at, 'the file became shorter while it was read')
        consume(buffer.subarray(0, bytesRead))
        at += bytesRead
        options.onProgress?.({ bytesDone: done + at, bytesTotal: total, phase })
      }
    }
    return await importFrom(file, size, readPass, options)
  } finally {
    await handle.close()
  }
}

/** Imports a snapshot held in memory, yielding to the event loop between chunks. */
export async function importPytorchSnapshotBytes(bytes: Uint8Array, file: string, options: PytorchImportOptions = {}): Promise<PytorchImport> {
  return importWhole(bytes, file, options, 0)
}

/**
 * A snapshot held whole: the fast path, yielding every chunkBytes of input, else the general path
 * over the same bytes. Progress counts `before` bytes already reported (the file's reading).
 */
async function importWhole(bytes: Uint8Array, file: string, options: PytorchImportOptions, before: number): Promise<PytorchImport> {
  if (bytes.length === 0) throw new SnapshotImportError(file, 'empty', undefined, 'the file is empty')
  const chunkBytes = options.chunkBytes ?? DEFAULT_CHUNK
  const size = bytes.length
  const pause = () => new Promise<void>((resolve) => setImmediate(resolve))
  if (!options.generalPathOnly && detectFormat(bytes.subarray(0, 64), size, file) === 'pickle') {
    // Only as large as one fast path step: the native call does not let the event loop in.
    if (size <= chunkBytes) {
      const native = importNative(bytes, file, options)
      if (native !== null) {
        options.onProgress?.({ bytesDone: before + size, bytesTotal: before + size, phase: 'parse' })
        return 'done' in native ? native.done : native.mapper.finishYielding(native.root, 'pickle', native.protocol)
      }
    }
    const mapper = new SnapshotMapper(file, options, size)
    const steps = decodeFastSteps(bytes, mapper, maxDepthOf(options), chunkBytes)
    for (;;) {
      options.signal?.throwIfAborted()
      const step = steps.next()
      if (step.done) {
        if (step.value !== null) {
          options.onProgress?.({ bytesDone: before + size, bytesTotal: before + size, phase: 'parse' })
          return mapper.finishYielding(step.value.root, 'pickle', step.value.protocol)
        }
        break
      }
      options.onProgress?.({ bytesDone: before + step.value, bytesTotal: before + size, phase: 'parse' })
      await pause()
    }
  }
  // The general path, its passes counted after what was reported so far.
  const base = before + size
  const readPass = async (consume: (chunk: Uint8Array) => void, done: number, total: number, phase: 'scan' | 'parse') => {
    for (let at = 0; at < size; at += chunkBytes) {
      options.signal?.throwIfAborted()
      consume(bytes.subarray(at, Math.min(size, at + chunkBytes)))
      options.onProgress?.({ bytesDone: base + done + Math.min(size, at + chunkBytes), bytesTotal: base + total, phase })
      await pause()
    }
  }
  return importFrom(file, size, readPass, options)
}

function maxDepthOf(options: PytorchImportOptions): number {
  return options.maxDepth ?? DEFAULT_MAX_DEPTH
}

let nativeDecode: NativeAddon['decodeSnapshot'] | null | undefined

/** The addon's decodeSnapshot, or null where the addon (or that function in it) is not there. */
function nativeDecoder(): NativeAddon['decodeSnapshot'] | null {
  if (nativeDecode === undefined) {
    try {
      nativeDecode = process.env['VRAMSCOPE_SNAPSHOT_DECODER'] === 'js' ? null : (loadNative().decodeSnapshot ?? null)
    } catch {
      nativeDecode = null
    }
  }
  return nativeDecode
}

/**
 * The native decoder on a whole pickle: the import where it finished it, else a mapper holding its
 * events and the root for the finish; null where it hands the input back.
 */
function importNative(bytes: Uint8Array, file: string, options: PytorchImportOptions): { done: PytorchImport } | { mapper: SnapshotMapper; root: PickleValue; protocol: number } | null {
  if (options.nativeDecoder === false) return null
  const decode = nativeDecoder()
  if (decode === null) return null
  const mapper = new SnapshotMapper(file, options, bytes.length)
  const device = options.device
  const decoded = decode(bytes, maxDepthOf(options), typeof device === 'number' ? device : device === 'all' ? -1 : -2, options.nativeFinish !== false)
  if (decoded === null) return null
  const text = nativeStrings(bytes, decoded.strings)
  // Finished natively, the tape holds allocator_settings' value alone.
  if (decoded.finished !== undefined) return { done: mapper.finishedNatively(decoded, decoded.finished, text, rootFromTape(decoded, text, bytes), decoded.protocol) }
  mapper.adoptNative(decoded, text)
  return { mapper, root: rootFromTape(decoded, text, bytes), protocol: decoded.protocol }
}

/** The native decoder's strings by id, decoded on first use (its ids are UTF-8 byte ranges of the input). */
function nativeStrings(bytes: Uint8Array, ranges: Uint32Array): (id: number) => string {
  const strings: string[] = []
  return (id) => (strings[id] ??= decodeUtf8(bytes, ranges[2 * id]!, ranges[2 * id + 1]!))
}

/** The root the native decoder read, from its preorder tape, as the fast path builds it (device_traces' lists empty). */
function rootFromTape(decoded: NativeSnapshot, text: (id: number) => string, bytes: Uint8Array): PickleValue {
  const tape = decoded.tape
  const numbers = decoded.tapeNumbers
  const containers: PickleValue[] = []
  let at = 0
  let numberAt = 0
  // Recursive: nesting is bounded by the decoder's depth limit (at most 4092).
  const value = (): PickleValue => {
    switch (tape[at++]) {
      case TapeOp.none:
        return null
      case TapeOp.isTrue:
        return true
      case TapeOp.isFalse:
        return false
      case TapeOp.number:
        return numbers[numberAt++]!
      case TapeOp.string:
        return text(tape[at++]!)
      case TapeOp.long: {
        const from = tape[at++]!
        return decodeLong(bytes, from, tape[at++]!)
      }
      case TapeOp.list:
      case TapeOp.tuple: {
        const n = tape[at++]!
        const list: PickleValue[] = []
        containers.push(list)
        for (let i = 0; i < n; i++) list.push(value())
        return list
      }
      case TapeOp.dict: {
        const n = tape[at++]!
        const dict = new PickleDict()
        containers.push(dict)
        if (n > 0) {
          const pairs: PickleValue[] = []
          for (let i = 0; i < n; i++) pairs.push(value())
          addDictPairs(dict, pairs, 0, n)
        }
        return dict
      }
      default:
        return containers[tape[at++]!]!
    }
  }
  return value()
}

/** snapshot_pickle.hpp's tape_op. */
const enum TapeOp { none = 0, isTrue = 1, isFalse = 2, number = 3, string = 4, long = 5, list = 6, tuple = 7, dict = 8, ref = 9 }

/** The fast path on a whole pickle, or null where it hands the input back (see pytorch-fast.ts). */
function importFast(bytes: Uint8Array, file: string, options: PytorchImportOptions): PytorchImport | null {
  const mapper = new SnapshotMapper(file, options, bytes.length)
  const decoded = decodeFast(bytes, mapper, maxDepthOf(options))
  return decoded === null ? null : mapper.finish(decoded.root, 'pickle', decoded.protocol)
}

/** Imports a snapshot held in memory in one synchronous call (tests, fuzzing, small files). */
export function parsePytorchSnapshot(bytes: Uint8Array, file: string, options: PytorchImportOptions = {}): PytorchImport {
  if (bytes.length === 0) throw new SnapshotImportError(file, 'empty', undefined, 'the file is empty')
  const format = detectFormat(bytes.subarray(0, 64), bytes.length, file)
  if (format === 'json') return fromJson(bytes, file, options)
  if (!options.generalPathOnly) {
    const native = importNative(bytes, file, options)
    if (native !== null) return 'done' in native ? native.done : native.mapper.finish(native.root, 'pickle', native.protocol)
    const fast = importFast(bytes, file, options)
    if (fast !== null) return fast
  }
  let keep: MemoReferenceScanner['references'] | null = null
  if (bytes.length >= (options.boundedAbove ?? DEFAULT_BOUNDED_ABOVE)) {
    const scanner = new MemoReferenceScanner()
    scanner.feed(bytes)
    keep = scanner.references
  }
  const mapper = new SnapshotMapper(file, options, bytes.length)
  const unpickler = newUnpickler(file, bytes.length, mapper, options, keep)
  unpickler.feed(bytes)
  return mapper.finish(unpickler.finish(), 'pickle', unpickler.pickleProtocol)
}

type ReadPass = (consume: (chunk: Uint8Array) => void, done: number, total: number, phase: 'scan' | 'parse') => Promise<void>

async function importFrom(file: string, size: number, readPass: ReadPass, options: PytorchImportOptions): Promise<PytorchImport> {
  if (size === 0) throw new SnapshotImportError(file, 'empty', undefined, 'the file is empty')
  // The first bytes of the first chunk tell a pickle (PROTO, or a protocol 0/1 opcode) from JSON ('{').
  const bounded = size >= (options.boundedAbove ?? DEFAULT_BOUNDED_ABOVE)
  const passes = bounded ? 2 : 1
  let format: 'pickle' | 'json' | null = null
  let scanner: MemoReferenceScanner | null = null
  if (bounded) {
    scanner = new MemoReferenceScanner()
    const scan = scanner
    await readPass((chunk) => {
      if (format === null) format = detectFormat(chunk.subarray(0, 64), size, file)
      if (format === 'pickle') scan.feed(chunk)
    }, 0, size * passes, 'scan')
  }
  const mapper = new SnapshotMapper(file, options, size)
  let unpickler: Unpickler | null = null
  const jsonParts: Uint8Array[] = []
  await readPass((chunk) => {
    if (format === null) format = detectFormat(chunk.subarray(0, 64), size, file)
    if (format === 'json') jsonParts.push(chunk.slice())
    else (unpickler ??= newUnpickler(file, size, mapper, options, scanner && scanner.references)).feed(chunk)
  }, size * (passes - 1), size * passes, 'parse')
  if (format === 'json') return fromJson(concatBytes(jsonParts), file, options)
  const done = unpickler as Unpickler | null
  if (done === null) throw new SnapshotImportError(file, 'empty', undefined, 'the file is empty')
  return mapper.finishYielding(done.finish(), 'pickle', done.pickleProtocol)
}


function detectFormat(head: Uint8Array, size: number, file: string): 'pickle' | 'json' {
  let i = 0
  if (head[0] === 0xef && head[1] === 0xbb && head[2] === 0xbf) i = 3 // UTF-8 byte order mark
  while (i < head.length && (head[i] === 0x20 || head[i] === 0x09 || head[i] === 0x0a || head[i] === 0x0d)) i++
  if (head[i] !== 0x7b /* { */) return 'pickle'
  if (size > MAX_JSON_BYTES) throw new SnapshotImportError(file, 'limit', undefined, `a JSON snapshot of ${size} bytes is larger than the ${MAX_JSON_BYTES} bytes JSON.parse can hold; import the pickle instead, which is streamed`)
  return 'json'
}

function newUnpickler(file: string, size: number, mapper: SnapshotMapper, options: PytorchImportOptions, keep: MemoReferenceScanner['references'] | null): Unpickler {
  return new Unpickler({
    fileName: file,
    totalBytes: size,
    keepMemo: keep,
    ...(options.maxDepth === undefined ? {} : { maxDepth: options.maxDepth }),
    stream: {
      path: ['device_traces', null],
      onItem: (keys, index, item, offset) => mapper.event(keys[1] as number, index, item, offset),
    },
  })
}

function fromJson(bytes: Uint8Array, file: string, options: PytorchImportOptions): PytorchImport {
  let root: unknown
  try {
    root = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes))
  } catch (e) {
    throw new SnapshotImportError(file, 'corrupt', undefined, `not valid JSON: ${(e as Error).message}`)
  }
  return new SnapshotMapper(file, options).finish(root as PickleValue, 'json', undefined)
}

/** Rows per chunk of the column stores below: growing never copies, and the final copy frees as it goes. */
const CHUNK_SHIFT = 12
const CHUNK_ROWS = 1 << CHUNK_SHIFT
const CHUNK_MASK = CHUNK_ROWS - 1
/** The finishing copies let the event loop in after this many chunks (about 10 ms of copying). */
const YIELD_CHUNKS = 128

const EMPTY_EVENTS = allocateEvents(0)

/**
 * Request events in chunks of typed-array columns (TraceEvents), appended one at a time. The first
 * chunk starts at `firstRows` (a guess from the file's size, so a small file does not pay for
 * zeroing a whole chunk) and doubles up to CHUNK_ROWS before the next chunk is added.
 */
class EventChunks {
  readonly chunks: TraceEvents[] = []
  length = 0
  private capacity = 0
  private last: TraceEvents = EMPTY_EVENTS

  constructor(private readonly firstRows = CHUNK_ROWS) {}

  push(kind: number, id: number, size: number, stream: number, device: number, time: number, stack = -1, tag = -1): void {
    const row = this.length
    if (row === this.capacity) this.addRoom()
    writeEvent(this.last, row & CHUNK_MASK, kind, id, size, stream, device, time, stack, tag)
    this.length = row + 1
  }

  /** Takes n rows of columns made elsewhere (the native decoder's): see adoptedChunks. */
  adopt(columns: TraceEvents, n: number): void {
    this.chunks.length = 0
    this.chunks.push(...adoptedChunks(columns, n, eventChunk))
    this.capacity = this.chunks.reduce((rows, c) => rows + c.kind.length, 0)
    this.length = n
    this.last = this.chunks[this.chunks.length - 1] ?? EMPTY_EVENTS
  }

  private addRoom(): void {
    const first = this.chunks.length === 1 && this.capacity < CHUNK_ROWS
    const chunk = eventChunk(this.chunks.length === 0 ? this.firstRows : first ? Math.min(CHUNK_ROWS, 2 * this.capacity) : CHUNK_ROWS)
    if (first) {
      copyEvents(this.last, 0, this.length, chunk, 0)
      this.chunks[0] = chunk
      this.capacity = chunk.kind.length
    } else {
      this.chunks.push(chunk)
      this.capacity += chunk.kind.length
    }
    this.last = chunk
  }

  time(row: number): number {
    return this.chunks[row >>> CHUNK_SHIFT]!.time[row & CHUNK_MASK]!
  }

  /**
   * The first row from `from` on, before `end`, whose time is not at most `limit` (or `end`): the
   * end of a run the merge copies. A loop over the time column, not a call per row: the merge runs
   * once an import, so it is still unoptimized through an app's (and a benchmark's) first imports.
   */
  runEnd(from: number, end: number, limit: number): number {
    let row = from
    while (row < end) {
      const times = this.chunks[row >>> CHUNK_SHIFT]!.time
      const stop = Math.min(end, ((row >>> CHUNK_SHIFT) + 1) << CHUNK_SHIFT)
      for (let i = row & CHUNK_MASK; row < stop; row++, i++) if (!(times[i]! <= limit)) return row
    }
    return row
  }

  /** Copies rows [from, to) to `target` at row `at`; returns the row after them. Chunks wholly copied are let go. */
  moveTo(from: number, to: number, target: TraceEvents, at: number): number {
    for (let row = from; row < to; ) {
      const k = row >>> CHUNK_SHIFT
      const first = row & CHUNK_MASK
      const last = Math.min(CHUNK_ROWS, first + (to - row))
      if (last - first <= SHORT_COPY) copyFewEvents(this.chunks[k]!, first, last, target, at)
      else copyEvents(this.chunks[k]!, first, last, target, at)
      if (last === CHUNK_ROWS) this.chunks[k] = EMPTY_EVENTS
      at += last - first
      row += last - first
    }
    return at
  }
}

/**
 * Runs of rows up to this long are copied row by row: the merge copies one run per marker
 * (annotations interleave), and eight subarrays a run were most of an import's garbage.
 */
const SHORT_COPY = 32

function copyFewEvents(source: TraceEvents, from: number, to: number, target: TraceEvents, at: number): void {
  for (let i = from, j = at; i < to; i++, j++) {
    target.kind[j] = source.kind[i]!
    target.id[j] = source.id[i]!
    target.size[j] = source.size[i]!
    target.stream[j] = source.stream[i]!
    target.device[j] = source.device[i]!
    target.time[j] = source.time[i]!
    target.stack[j] = source.stack[i]!
    target.tag[j] = source.tag[i]!
  }
}

interface LayoutChunk {
  op: Uint8Array
  address: Float64Array
  size: Float64Array
  requested: Float64Array
  stream: Float64Array
  aux: Uint32Array
  time: Float64Array
}

/** Bytes a row of eventsAt's and layoutAt's columns takes (snapshot_wrap.cpp lays its columns out the same way). */
const EVENT_ROW_BYTES = 2 * 8 + 4 * 4 + 2 + 1
const LAYOUT_ROW_BYTES = 5 * 8 + 4 + 1

/** A chunk's columns share one ArrayBuffer (each costs about a microsecond to allocate), the widest first: layoutAt's layout. */
function layoutChunk(n: number): LayoutChunk {
  return layoutAt(new ArrayBuffer(n * LAYOUT_ROW_BYTES), 0, n)
}

/** allocateEvents' columns for a chunk, in one ArrayBuffer laid out as eventsAt's. */
function eventChunk(n: number): TraceEvents {
  const chunk = eventsAt(new ArrayBuffer(n * EVENT_ROW_BYTES), 0, n)
  chunk.stack.fill(-1)
  chunk.tag.fill(-1)
  return chunk
}

const EMPTY_LAYOUT = layoutChunk(0)
/** Rows [from, to) of every column, as views. */
function columnRows<C extends object>(c: C, from: number, to: number): C {
  const rows: Record<string, Uint8Array> = {}
  for (const [key, column] of Object.entries(c)) rows[key] = (column as Uint8Array).subarray(from, to)
  return rows as C
}

/**
 * n rows of columns made elsewhere (the native decoder's) as chunks of CHUNK_ROWS views. push()
 * finds a row by its chunk, so only a first chunk may be short: a short last chunk after whole
 * ones is copied into a whole one from `whole`.
 */
function adoptedChunks<C extends object>(columns: C, n: number, whole: (rows: number) => C): C[] {
  const chunks: C[] = []
  for (let from = 0; from < n; from += CHUNK_ROWS) {
    const rows = Math.min(CHUNK_ROWS, n - from)
    const part = from === 0 && rows === n ? columns : columnRows(columns, from, from + rows)
    if (from === 0 || rows === CHUNK_ROWS) {
      chunks.push(part)
      continue
    }
    const chunk = whole(CHUNK_ROWS)
    for (const [key, column] of Object.entries(part)) (chunk[key as keyof C] as Uint8Array).set(column as Uint8Array)
    chunks.push(chunk)
  }
  return chunks
}

/** Event columns of n rows at byte `at` of `buffer`: eventChunk's, and the native decoder's (snapshot_wrap.cpp). */
function eventsAt(buffer: ArrayBuffer, at: number, n: number): TraceEvents {
  return {
    kind: new Uint8Array(buffer, at + 34 * n, n),
    id: new Uint32Array(buffer, at + 16 * n, n),
    size: new Float64Array(buffer, at, n),
    stream: new Uint32Array(buffer, at + 20 * n, n),
    device: new Uint16Array(buffer, at + 32 * n, n),
    time: new Float64Array(buffer, at + 8 * n, n),
    stack: new Int32Array(buffer, at + 24 * n, n),
    tag: new Int32Array(buffer, at + 28 * n, n),
  }
}

/** A finished layout of n rows at byte `at` of the native decoder's buffer (snapshot_wrap.cpp, finished_object): layoutAt's columns, addresses as 64-bit integers. */
function finalLayoutAt(buffer: ArrayBuffer, at: number, n: number): LayoutTrace {
  return { ...layoutAt(buffer, at, n), address: new BigUint64Array(buffer, at, n) }
}

/** Layout columns of n rows at byte `at` of `buffer`: layoutChunk's, and the native decoder's. */
function layoutAt(buffer: ArrayBuffer, at: number, n: number): LayoutChunk {
  return {
    op: new Uint8Array(buffer, at + 44 * n, n),
    address: new Float64Array(buffer, at, n),
    size: new Float64Array(buffer, at + 8 * n, n),
    requested: new Float64Array(buffer, at + 16 * n, n),
    stream: new Float64Array(buffer, at + 24 * n, n),
    aux: new Uint32Array(buffer, at + 40 * n, n),
    time: new Float64Array(buffer, at + 32 * n, n),
  }
}

/** Layout events in chunks (sized as EventChunks'); addresses kept as numbers (exact: device addresses are below 2^53). */
class LayoutChunks {
  readonly chunks: LayoutChunk[] = []
  length = 0
  private capacity = 0
  private last: LayoutChunk = EMPTY_LAYOUT

  constructor(private readonly firstRows = CHUNK_ROWS) {}

  push(op: number, address: number, size: number, requested: number, stream: number, time: number, aux = 0): void {
    const row = this.length
    if (row === this.capacity) this.addRoom()
    const c = this.last
    const i = row & CHUNK_MASK
    c.op[i] = op
    c.address[i] = address
    c.size[i] = size
    c.requested[i] = requested
    c.stream[i] = stream
    c.aux[i] = aux
    c.time[i] = time
    this.length = row + 1
  }

  private addRoom(): void {
    const first = this.chunks.length === 1 && this.capacity < CHUNK_ROWS
    const chunk = layoutChunk(this.chunks.length === 0 ? this.firstRows : first ? Math.min(CHUNK_ROWS, 2 * this.capacity) : CHUNK_ROWS)
    if (first) {
      const c = this.last
      const n = this.length
      chunk.op.set(c.op.subarray(0, n))
      chunk.address.set(c.address.subarray(0, n))
      chunk.size.set(c.size.subarray(0, n))
      chunk.requested.set(c.requested.subarray(0, n))
      chunk.stream.set(c.stream.subarray(0, n))
      chunk.aux.set(c.aux.subarray(0, n))
      chunk.time.set(c.time.subarray(0, n))
      this.chunks[0] = chunk
      this.capacity = chunk.op.length
    } else {
      this.chunks.push(chunk)
      this.capacity += chunk.op.length
    }
    this.last = chunk
  }

  /** EventChunks.adopt for layout rows. */
  adopt(columns: LayoutChunk, n: number): void {
    this.chunks.length = 0
    this.chunks.push(...adoptedChunks(columns, n, layoutChunk))
    this.capacity = this.chunks.reduce((rows, c) => rows + c.op.length, 0)
    this.length = n
    this.last = this.chunks[this.chunks.length - 1] ?? EMPTY_LAYOUT
  }

  setAux(row: number, aux: number): void {
    this.chunks[row >>> CHUNK_SHIFT]!.aux[row & CHUNK_MASK] = aux
  }

  /** Appends every row to `layout` at row `at`, times made ns from t0; returns the row after them. Lets the chunks go. */
  *moveTo(layout: LayoutTrace, at: number, t0: number): Generator<void, number> {
    for (let k = 0; k < this.chunks.length; k++) {
      if (k % YIELD_CHUNKS === YIELD_CHUNKS - 1) yield
      const c = this.chunks[k]!
      const n = Math.min(CHUNK_ROWS, this.length - k * CHUNK_ROWS)
      layout.op.set(c.op.subarray(0, n), at)
      toAddresses(c.address, 0, n, layout.address, at)
      layout.size.set(c.size.subarray(0, n), at)
      layout.requested.set(c.requested.subarray(0, n), at)
      layout.stream.set(c.stream.subarray(0, n), at)
      layout.aux.set(c.aux.subarray(0, n), at)
      toNanoseconds(c.time, 0, n, layout.time, at, t0)
      this.chunks[k] = EMPTY_LAYOUT
      at += n
    }
    return at
  }
}

/** Where mergeEvents is: the devices' events and the markers (by time) copied so far. */
interface Merge {
  main: EventChunks[]
  out: TraceEvents
  /** Rows of `out` written. */
  at: number
  /** Per device, its next row. */
  cursors: number[]
  /** Index in `order` of the next marker. */
  next: number
  order: number[]
  markerTimes: number[]
  markerIds: number[]
  markerDevices: number[]
  markerStream: number
}

/**
 * Copies runs of events and markers in time order until `out` holds `yieldAt` rows (false) or all
 * of them (true). A plain function, not mergeEvents' generator, for V8 to optimize it early.
 */
function mergeRuns(merge: Merge, yieldAt: number): boolean {
  const { main, out, cursors, order, markerTimes } = merge
  for (;;) {
    // The device whose next event is earliest; a marker goes before events later than it.
    let best = -1
    let bestTime = Infinity
    for (let d = 0; d < main.length; d++) {
      const c = cursors[d]!
      if (c < main[d]!.length && main[d]!.time(c) < bestTime) {
        best = d
        bestTime = main[d]!.time(c)
      }
    }
    if (merge.next < order.length && (markerTimes[order[merge.next]!]! < bestTime || best < 0)) {
      const m = order[merge.next++]!
      const at = merge.at++
      out.kind[at] = EventKind.marker
      out.id[at] = merge.markerIds[m]!
      out.stream[at] = merge.markerStream
      out.device[at] = merge.markerDevices[m]!
      out.time[at] = markerTimes[m]!
      continue
    }
    if (best < 0) return true
    // The run of this device's events up to the next marker or the next other device's event.
    let limit = merge.next < order.length ? markerTimes[order[merge.next]!]! : Infinity
    for (let d = 0; d < main.length; d++) if (d !== best && cursors[d]! < main[d]!.length) limit = Math.min(limit, main[d]!.time(cursors[d]!))
    const part = main[best]!
    const end = part.runEnd(cursors[best]! + 1, Math.min(part.length, cursors[best]! + YIELD_CHUNKS * CHUNK_ROWS), limit)
    merge.at = part.moveTo(cursors[best]!, end, out, merge.at)
    cursors[best] = end
    if (merge.at >= yieldAt) return false
  }
}

/** Times in µs (NaN: none, placed at t = 0) into ns from t0, as the traces hold them. One function for every column, so that it is optimized early. */
function toNanoseconds(from: Float64Array, start: number, end: number, into: Float64Array, at: number, t0: number): void {
  for (let i = start, j = at; i < end; i++, j++) {
    const t = from[i]!
    into[j] = t !== t ? 0 : (t - t0) * 1000
  }
}

const littleEndian = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1

/** Numbers below 2^53 into a BigUint64Array without a BigInt per element (on little-endian hosts). */
function toAddresses(values: Float64Array, from: number, to: number, into: BigUint64Array, at: number): void {
  if (!littleEndian) {
    for (let i = from; i < to; i++) into[at + i - from] = BigInt(values[i]!)
    return
  }
  const words = new Uint32Array(into.buffer, into.byteOffset, into.length * 2)
  for (let i = from; i < to; i++) {
    const v = values[i]!
    const w = 2 * (at + i - from)
    words[w] = v >>> 0
    words[w + 1] = Math.floor(v / 4294967296)
  }
}

/**
 * Device address -> id: open addressing with linear probing over typed arrays. Addresses are
 * doubles above 2^32, which a Map boxes and hashes slowly; the live set of a trace is small and
 * changes with every alloc and free.
 */
class AddressTable {
  private keys = new Float64Array(1024)
  private values = new Int32Array(1024).fill(-1)
  private mask = 1023
  size = 0

  private slot(address: number): number {
    const hash = Math.imul((address >>> 0) ^ Math.imul(Math.floor(address / 4294967296), 0x9e3779b1), 0x85ebca6b)
    return (hash ^ (hash >>> 15)) & this.mask
  }

  /** The id at `address`, or -1. */
  get(address: number): number {
    for (let i = this.slot(address); ; i = (i + 1) & this.mask) {
      const v = this.values[i]!
      if (v < 0 || this.keys[i] === address) return v
    }
  }

  set(address: number, id: number): void {
    if (2 * (this.size + 1) > this.values.length) this.grow()
    let i = this.slot(address)
    while (this.values[i]! >= 0 && this.keys[i] !== address) i = (i + 1) & this.mask
    if (this.values[i]! < 0) this.size++
    this.keys[i] = address
    this.values[i] = id
  }

  delete(address: number): void {
    let i = this.slot(address)
    while (this.values[i]! >= 0 && this.keys[i] !== address) i = (i + 1) & this.mask
    if (this.values[i]! < 0) return
    this.size--
    // Backward-shift deletion: move later entries of the probe run into the hole.
    for (let j = (i + 1) & this.mask; this.values[j]! >= 0; j = (j + 1) & this.mask) {
      const home = this.slot(this.keys[j]!)
      if ((j - home) & this.mask) {
        if (((j - home) & this.mask) >= ((j - i) & this.mask)) {
          this.keys[i] = this.keys[j]!
          this.values[i] = this.values[j]!
          i = j
        }
      }
    }
    this.values[i] = -1
  }

  private grow(): void {
    const keys = this.keys
    const values = this.values
    this.keys = new Float64Array(keys.length * 2)
    this.values = new Int32Array(keys.length * 2).fill(-1)
    this.mask = keys.length * 2 - 1
    this.size = 0
    for (let i = 0; i < keys.length; i++) if (values[i]! >= 0) this.set(keys[i]!, values[i]!)
  }
}

/**
 * Object -> index, for objects a pickle shares (frames lists, frame dicts): a Map emptied when it
 * holds `capacity` entries, so objects the pickle does not share are not all kept alive (a WeakMap
 * of millions of keys costs the garbage collector more than the lookups save).
 */
class IdentityCache {
  private map = new Map<object, number>()
  constructor(private readonly capacity = 1 << 14) {}
  get(key: object): number | undefined {
    return this.map.get(key)
  }
  set(key: object, value: number): void {
    if (this.map.size >= this.capacity) this.map = new Map()
    this.map.set(key, value)
  }
}

/**
 * Where the fields sit in an event dict: found once, then recognised in the next dict by comparing
 * its keys with these by identity (the pickle shares one string object per key), so reading an
 * event costs no lookups.
 */
class EventShape {
  private keys: (PickleValue | undefined)[] = []
  action = -1
  addr = -1
  size = -1
  stream = -1
  time = -1
  frames = -1
  metadata = -1

  match(pairs: readonly PickleValue[]): void {
    const keys = this.keys
    if (pairs.length === keys.length) {
      let i = 0
      while (i < pairs.length && pairs[i] === keys[i]) i += 2
      if (i >= pairs.length) return
    }
    this.learn(pairs)
  }

  private learn(pairs: readonly PickleValue[]): void {
    this.keys = new Array(pairs.length)
    this.action = this.addr = this.size = this.stream = this.time = this.frames = this.metadata = -1
    // A repeated key: the later position wins, as in the dict.
    for (let i = 0; i < pairs.length; i += 2) {
      const key = pairs[i]
      this.keys[i] = key
      if (key === 'action') this.action = i + 1
      else if (key === 'addr') this.addr = i + 1
      else if (key === 'size') this.size = i + 1
      else if (key === 'stream') this.stream = i + 1
      else if (key === 'time_us') this.time = i + 1
      else if (key === 'frames') this.frames = i + 1
      else if (key === 'user_metadata') this.metadata = i + 1
    }
  }
}

/** What one device's events turn into while they arrive. */
class DeviceState {
  readonly events: EventChunks
  readonly layout: LayoutChunks
  /** Stand-ins for what the ring buffer lost, placed at t = 0 before everything else (few, if any). */
  readonly synthEvents = new EventChunks(64)
  readonly synthLayout = new LayoutChunks(64)
  /** This device's ids are dense from 0; the merge offsets them after the devices before it. */
  nextId = 0
  requestedById = new Float64Array(256)
  roundedById = new Float64Array(256)
  /** Request id of each live block by address. */
  readonly live = new AddressTable()
  /** Blocks whose free was requested and whose free_completed has not come: address -> id. */
  readonly pending = new AddressTable()
  /** Reserved segments: address -> size. */
  readonly segments = new Map<number, number>()
  /** Layout row of each reserved segment's region_reserve (to label its pool at the end). */
  readonly reserveRow = new Map<number, number>()
  /** Addresses of segment_map events (expandable segments). */
  readonly mapped: number[] = []
  /** A free_requested whose layout event waits for the next event: one free, or free_pending. */
  held = -1
  heldAddress = 0
  heldSize = 0
  heldStream = 0
  heldTime = 0
  readonly overflow: OverflowCounts = { orphanEvents: 0, synthesizedAllocs: 0, synthesizedBlocks: 0, synthesizedSegments: 0 }
  nextIndex = 0
  constructor(
    readonly device: number,
    firstRows: number,
  ) {
    this.events = new EventChunks(firstRows)
    this.layout = new LayoutChunks(firstRows)
  }
}

/**
 * Turns snapshot events into columns as they arrive (from the streaming unpickler or a parsed
 * JSON document), then, given the rest of the snapshot, completes the traces.
 */
class SnapshotMapper {
  private readonly states = new Map<number, DeviceState>()
  private readonly wanted: number | 'all' | 'default'
  // Tables shared by every device.
  private readonly streamIndex = new Map<unknown, number>()
  private readonly streams: string[] = []
  private readonly frameByObject = new IdentityCache()
  private readonly frameByText = new Map<string, number>()
  private readonly frames: Frame[] = []
  private readonly stackByObject = new IdentityCache()
  private readonly stacksByHash = new Map<number, number[]>()
  private lastFrames: unknown = null
  private lastStack = -1
  private readonly stacks: Uint32Array[] = []
  private readonly tagIndex = new Map<string, number>()
  private readonly tags: string[] = []
  private readonly markers: string[] = []
  private readonly unknownActions = new Map<string, number>()
  private readonly shape = new EventShape()
  /** Events seen per device, imported or not (which devices the snapshot has). */
  private readonly eventCounts: number[] = []
  /** Allocs at an address already live (only a damaged trace has them); the first block is freed. */
  private reallocations = 0
  private earliest = Infinity
  private missingTimes = 0

  /** First chunk of each device's columns: a guess from the file's size (torch writes 60 to 90 bytes an event). */
  private readonly firstRows: number

  constructor(
    private readonly file: string,
    private readonly options: PytorchImportOptions,
    fileBytes = Infinity,
  ) {
    this.firstRows = Math.max(64, Math.min(CHUNK_ROWS, Math.ceil(fileBytes / 90)))
    const d = options.device
    if (d !== undefined && d !== 'all' && !(Number.isInteger(d) && d >= 0 && d < 65536))
      throw new RangeError(`device must be 'all' or an integer from 0 to 65535, got ${String(d)}`)
    this.wanted = d ?? 'default'
  }

  private fail(problem: string, offset?: number, path?: string, code: SnapshotErrorCode = 'not-a-snapshot'): never {
    throw new SnapshotImportError(this.file, code, offset, problem, path)
  }

  private lastState: DeviceState | null = null

  private state(device: number): DeviceState | null {
    if (this.lastState !== null && this.lastState.device === device) return this.lastState
    if (this.wanted !== 'all' && this.wanted !== 'default' && device !== this.wanted) return null
    let s = this.states.get(device)
    if (s === undefined) {
      s = new DeviceState(device, this.firstRows)
      this.states.set(device, s)
    }
    this.lastState = s
    return s
  }

  /** One entry of device_traces[device], in order. */
  event(device: number, index: number, item: PickleValue, offset: number | undefined): void {
    if (device > MAX_DEVICE) this.fail(`more than ${MAX_DEVICE + 1} devices`, offset, where(device, index), 'limit')
    this.eventCounts[device] = (this.eventCounts[device] ?? 0) + 1
    const s = this.state(device)
    if (s === null) return
    let action: unknown, addrValue: unknown, sizeValue: unknown, streamValue: unknown, time: unknown, frames: unknown, metadata: unknown
    if (item instanceof PickleDict) {
      const pairs = dictPairs(item)
      const shape = this.shape
      shape.match(pairs)
      action = shape.action < 0 ? undefined : pairs[shape.action]
      addrValue = shape.addr < 0 ? undefined : pairs[shape.addr]
      sizeValue = shape.size < 0 ? undefined : pairs[shape.size]
      streamValue = shape.stream < 0 ? undefined : pairs[shape.stream]
      time = shape.time < 0 ? undefined : pairs[shape.time]
      frames = shape.frames < 0 ? undefined : pairs[shape.frames]
      metadata = shape.metadata < 0 ? undefined : pairs[shape.metadata]
    } else if (isDict(item)) {
      action = field(item, 'action')
      addrValue = field(item, 'addr')
      sizeValue = field(item, 'size')
      streamValue = field(item, 'stream')
      time = field(item, 'time_us')
      frames = field(item, 'frames')
      metadata = field(item, 'user_metadata')
    } else return this.fail(`an event must be a dict, got ${describe(item)}`, offset, where(device, index))
    if (typeof action !== 'string') this.fail(`'action' must be a string, got ${describe(action)}`, offset, where(device, index))
    const addr = typeof addrValue === 'number' && Number.isSafeInteger(addrValue) && addrValue >= 0 ? addrValue : this.badInteger('addr', addrValue, offset, device, index)
    const size = typeof sizeValue === 'number' && Number.isSafeInteger(sizeValue) && sizeValue >= 0 ? sizeValue : sizeValue === undefined ? 0 : this.badInteger('size', sizeValue, offset, device, index)
    streamValue ??= 0
    if (typeof time !== 'number' || !Number.isFinite(time)) {
      if (time !== undefined) this.fail(`'time_us' must be a finite number, got ${describe(time)}`, offset, where(device, index))
      this.missingTimes++
      time = s.nextIndex // no clock: keep the order
    }
    s.nextIndex++
    const t = time as number
    if (t < this.earliest) this.earliest = t
    if (!Number.isInteger(streamValue) && typeof streamValue !== 'bigint') this.fail(`'stream' must be an integer, got ${describe(streamValue)}`, offset, where(device, index))
    this.apply(s, device, action as string, addr, size, streamValue, t, frames, UNRESOLVED_STACK, metadata, offset, index)
  }

  /** Whether events of this device are imported (state() would give it a DeviceState). */
  wants(device: number): boolean {
    return this.wanted === 'all' || this.wanted === 'default' || device === this.wanted
  }

  /**
   * One event the fast decoder (pytorch-fast.ts) read and checked: the same effects as event() for
   * a dict with these fields. `time` is NaN when the event has none; `stack` is the interned stack
   * (internStack) for alloc and oom, whatever else for other actions.
   */
  decodedEvent(device: number, action: string, addr: number, size: number, stream: number, time: number, stack: number, metadata: string | null): void {
    this.eventCounts[device] = (this.eventCounts[device] ?? 0) + 1
    const s = this.state(device)
    if (s === null) return
    let t = time
    if (t !== t) {
      this.missingTimes++
      t = s.nextIndex
    }
    s.nextIndex++
    if (t < this.earliest) this.earliest = t
    this.apply(s, device, action, addr, size, stream, t, undefined, stack, metadata, undefined, -1)
  }

  /**
   * What an event does to its device's columns, its fields checked. `stack` is the stack's index,
   * or UNRESOLVED_STACK to take it from `frames` (only alloc and oom look at either).
   */
  private apply(s: DeviceState, device: number, action: string, addr: number, size: number, streamValue: unknown, t: number, frames: unknown, stack: number, metadata: unknown, offset: number | undefined, index: number): void {
    const streamNumber = Number(streamValue)

    if (s.held >= 0) {
      if (action === 'free_completed' && addr === s.heldAddress) {
        s.layout.push(LayoutOp.free, addr, s.roundedById[s.held]!, s.heldSize, s.heldStream, s.heldTime)
        s.held = -1
        return
      }
      this.flushHeld(s)
    }

    switch (action) {
      case 'alloc': {
        const previous = s.live.get(addr)
        if (previous >= 0) {
          // Allocated twice without a free between: only a damaged trace does this. Free the first.
          s.events.push(EventKind.free, previous, 0, this.stream(streamValue), device, t)
          s.layout.push(LayoutOp.free, addr, s.roundedById[previous]!, s.requestedById[previous]!, streamNumber, t)
          this.reallocations++
        }
        const id = this.newId(s, size)
        s.live.set(addr, id)
        s.events.push(EventKind.alloc, id, size, this.stream(streamValue), device, t, stack === UNRESOLVED_STACK ? this.stack(frames, offset, device, index) : stack, this.tag(metadata))
        s.layout.push(LayoutOp.alloc, addr, s.roundedById[id]!, size, streamNumber, t)
        return
      }
      case 'free_requested':
      case 'free': {
        let id = s.live.get(addr)
        if (id < 0) id = this.orphanAlloc(s, addr, size, streamValue)
        s.live.delete(addr)
        s.events.push(EventKind.free, id, s.requestedById[id]!, this.stream(streamValue), device, t)
        if (action === 'free') {
          s.layout.push(LayoutOp.free, addr, s.roundedById[id]!, s.requestedById[id]!, streamNumber, t)
        } else {
          s.held = id
          s.heldAddress = addr
          s.heldSize = s.requestedById[id]!
          s.heldStream = streamNumber
          s.heldTime = t
        }
        return
      }
      case 'free_completed': {
        const id = s.pending.get(addr)
        if (id < 0) {
          // Its alloc and free_requested were both lost: in the layout the block was pending at
          // t = 0. The program had let go of it, so the request trace has nothing to add.
          s.synthLayout.push(LayoutOp.alloc, addr, roundedSize(size), size, streamNumber, NaN)
          s.synthLayout.push(LayoutOp.freePending, addr, roundedSize(size), size, streamNumber, NaN)
          s.layout.push(LayoutOp.freeCompleted, addr, roundedSize(size), size, streamNumber, t)
          s.overflow.orphanEvents++
          s.overflow.synthesizedBlocks++
          return
        }
        s.pending.delete(addr)
        s.layout.push(LayoutOp.freeCompleted, addr, s.roundedById[id]!, s.requestedById[id]!, streamNumber, t)
        return
      }
      case 'segment_alloc':
        s.segments.set(addr, size)
        s.reserveRow.set(addr, s.layout.length)
        s.layout.push(LayoutOp.regionReserve, addr, size, size, streamNumber, t)
        return
      case 'segment_free':
        if (!s.segments.has(addr)) {
          s.synthLayout.push(LayoutOp.regionReserve, addr, size, size, streamNumber, NaN)
          s.overflow.orphanEvents++
          s.overflow.synthesizedSegments++
        }
        s.segments.delete(addr)
        s.layout.push(LayoutOp.regionRelease, addr, size, size, streamNumber, t)
        return
      case 'segment_map':
        s.mapped.push(addr)
        s.layout.push(LayoutOp.map, addr, size, size, streamNumber, t)
        return
      case 'segment_unmap':
        s.layout.push(LayoutOp.unmap, addr, size, size, streamNumber, t)
        return
      case 'oom':
        s.events.push(EventKind.oom, 0, size, this.stream(streamValue), device, t, stack === UNRESOLVED_STACK ? this.stack(frames, offset, device, index) : stack, this.tag(metadata))
        s.layout.push(LayoutOp.failure, 0, size, size, streamNumber, t)
        return
      case 'snapshot':
        this.markers.push('snapshot')
        s.events.push(EventKind.marker, this.markers.length - 1, 0, this.stream(streamValue), device, t)
        return
      default:
        this.unknownActions.set(action, (this.unknownActions.get(action) ?? 0) + 1)
    }
  }

  private badInteger(key: string, value: unknown, offset: number | undefined, device: number, index: number): never {
    return this.fail(`'${key}' must be a non-negative integer below 2^53, got ${describe(value)}`, offset, where(device, index))
  }

  private flushHeld(s: DeviceState): void {
    s.layout.push(LayoutOp.freePending, s.heldAddress, s.roundedById[s.held]!, s.heldSize, s.heldStream, s.heldTime)
    s.pending.set(s.heldAddress, s.held)
    s.held = -1
  }

  /** A free of a block the trace never saw allocated: it was allocated before the window, at t = 0. */
  private orphanAlloc(s: DeviceState, addr: number, size: number, streamValue: unknown): number {
    const id = this.newId(s, size)
    s.synthEvents.push(EventKind.alloc, id, size, this.stream(streamValue), s.device, NaN)
    s.synthLayout.push(LayoutOp.alloc, addr, s.roundedById[id]!, size, Number(streamValue), NaN)
    s.overflow.orphanEvents++
    s.overflow.synthesizedAllocs++
    s.overflow.synthesizedBlocks++
    return id
  }

  private newId(s: DeviceState, requested: number, rounded = roundedSize(requested)): number {
    const id = s.nextId++
    if (id === s.requestedById.length) {
      const r = new Float64Array(id * 2)
      r.set(s.requestedById)
      s.requestedById = r
      const b = new Float64Array(id * 2)
      b.set(s.roundedById)
      s.roundedById = b
    }
    s.requestedById[id] = requested
    s.roundedById[id] = rounded
    return id
  }

  /**
   * The tables of a native decoder's import (adoptNative): the frames and stacks are indexed only
   * if the finish looks one up (a block live at the snapshot that the trace never saw allocated).
   */
  adoptNative(decoded: NativeSnapshot, text: (id: number) => string): void {
    this.adoptNativeTables(decoded, text)
    decoded.eventCounts.forEach((count, device) => {
      if (count > 0) this.eventCounts[device] = count
    })
    for (const d of decoded.devices) {
      const s = new DeviceState(d.header[0]!, this.firstRows)
      adoptDevice(s, d)
      this.states.set(s.device, s)
    }
    this.lastState = null
  }

  /** The tables of a native decoder's import (streams, frames, stacks, tags, markers) and its counts for the warnings. */
  private adoptNativeTables(decoded: NativeSnapshot, text: (id: number) => string): void {
    decoded.streams.forEach((value, i) => {
      this.streams.push(String(value))
      this.streamIndex.set(value, i)
    })
    for (let i = 0; i < decoded.frameName.length; i++) this.frames.push({ name: text(decoded.frameName[i]!), filename: text(decoded.frameFile[i]!), line: decoded.frameLine[i]! })
    const starts = decoded.stackStart
    for (let k = 0; k + 1 < starts.length; k++) this.stacks.push(decoded.stackFrames.slice(starts[k]!, starts[k + 1]!))
    this.framesIndexed = this.frames.length === 0
    this.stacksIndexed = this.stacks.length === 0
    decoded.tags.forEach((id, i) => {
      this.tags.push(text(id))
      this.tagIndex.set(text(id), i)
    })
    for (let i = 0; i < decoded.markers; i++) this.markers.push('snapshot')
    for (let i = 0; i < decoded.unknownActions.length; i += 2) this.unknownActions.set(text(decoded.unknownActions[i]!), decoded.unknownActions[i + 1]!)
    this.reallocations = decoded.reallocations
    this.earliest = decoded.earliest
    this.missingTimes = decoded.missingTimes
  }

  /**
   * The import the native decoder finished (NativeSnapshot.finished: the events merged, the
   * layouts built, as finishSteps builds them); here only its tables, names, warnings and properties.
   */
  finishedNatively(decoded: NativeSnapshot, finished: NonNullable<NativeSnapshot['finished']>, text: (id: number) => string, settings: PickleValue, protocol: number): PytorchImport {
    this.adoptNativeTables(decoded, text)
    const h = finished.header
    const buffer = finished.buffer
    let k = 5
    const present = Array.from(h.subarray(k, (k += h[2]!)))
    const selected = Array.from(h.subarray(k, (k += h[3]!)))
    for (const end = k + h[4]!; k < end; k += 2) {
      const name = text(h[k]!)
      this.markers.push(h[k + 1]! >= 0 ? `${name} (${text(h[k + 1]!).toLowerCase()})` : name)
    }
    const plainSettings = plainSettingsOf(settings)
    const overflow: OverflowCounts = { orphanEvents: 0, synthesizedAllocs: 0, synthesizedBlocks: 0, synthesizedSegments: 0 }
    const recorded: StrategyResult[] = []
    for (const device of selected) {
      recorded.push(recordedResult(device, finalLayoutAt(buffer, h[k]!, h[k + 1]!), recorded.length === 0 ? plainSettings : plainSettingsOf(settings), selected.length > 1))
      overflow.orphanEvents += h[k + 2]!
      overflow.synthesizedAllocs += h[k + 3]!
      overflow.synthesizedBlocks += h[k + 4]!
      overflow.synthesizedSegments += h[k + 5]!
      k += 6
    }
    return this.assemble(eventsAt(buffer, h[0]!, h[1]!), recorded, overflow, present, selected, settings, plainSettings, 'pickle', protocol)
  }

  private framesIndexed = true
  private stacksIndexed = true

  private indexFrames(): void {
    this.frames.forEach((f, i) => {
      const text = `${f.name}\u0000${f.filename}\u0000${f.line}`
      if (!this.frameByText.has(text)) this.frameByText.set(text, i)
    })
    this.framesIndexed = true
  }

  private indexStacks(): void {
    this.stacks.forEach((ids, stack) => {
      let hash = ids.length
      for (let i = 0; i < ids.length; i++) hash = Math.imul(hash ^ ids[i]!, 0x9e3779b1)
      const candidates = this.stacksByHash.get(hash)
      if (candidates === undefined) this.stacksByHash.set(hash, [stack])
      else candidates.push(stack)
    })
    this.stacksIndexed = true
  }

  private lastStreamValue: unknown = undefined
  private lastStream = -1

  private stream(value: unknown): number {
    if (value === this.lastStreamValue) return this.lastStream
    let i = this.streamIndex.get(value)
    if (i === undefined) {
      i = this.streams.length
      this.streams.push(String(value))
      this.streamIndex.set(value, i)
    }
    this.lastStreamValue = value
    this.lastStream = i
    return i
  }

  private tag(value: unknown): number {
    if (typeof value !== 'string' || value === '') return -1
    let i = this.tagIndex.get(value)
    if (i === undefined) {
      i = this.tags.length
      this.tags.push(value)
      this.tagIndex.set(value, i)
    }
    return i
  }

  /** Index of the deduplicated stack for a frames list (innermost first, as PyTorch lists them), or -1. */
  private stack(frames: unknown, offset: number | undefined, device: number, index: number): number {
    if (frames === undefined || frames === null) return -1
    if (!Array.isArray(frames)) return this.fail(`'frames' must be a list, got ${describe(frames)}`, offset, where(device, index))
    if (frames.length === 0) return -1
    // The pickle often shares one list per traceback, so identity answers many lookups.
    if (frames === this.lastFrames) return this.lastStack
    let stack = this.stackByObject.get(frames)
    if (stack === undefined) {
      const ids = new Uint32Array(frames.length)
      for (let i = 0; i < frames.length; i++) ids[i] = this.frame(frames[i], offset, device, index)
      stack = this.internStack(ids, ids.length)
      this.stackByObject.set(frames, stack)
    }
    this.lastFrames = frames
    this.lastStack = stack
    return stack
  }

  /** Index of the stack of frame ids ids[0, n) in the stacks table, added if new (the array is not kept). */
  internStack(ids: ArrayLike<number>, n: number): number {
    if (!this.stacksIndexed) this.indexStacks()
    let hash = n
    for (let i = 0; i < n; i++) hash = Math.imul(hash ^ ids[i]!, 0x9e3779b1)
    const candidates = this.stacksByHash.get(hash)
    if (candidates !== undefined) for (const c of candidates) if (sameIds(this.stacks[c]!, ids, n)) return c
    const stack = this.stacks.length
    const kept = new Uint32Array(n)
    for (let i = 0; i < n; i++) kept[i] = ids[i]!
    this.stacks.push(kept)
    if (candidates === undefined) this.stacksByHash.set(hash, [stack])
    else candidates.push(stack)
    return stack
  }

  /** Index of the frame with this name, file and line in the frames table, added if new. */
  frameId(name: string, filename: string, line: number): number {
    if (!this.framesIndexed) this.indexFrames()
    const text = `${name}\u0000${filename}\u0000${line}`
    let i = this.frameByText.get(text)
    if (i === undefined) {
      i = this.frames.length
      this.frames.push({ name, filename, line })
      this.frameByText.set(text, i)
    }
    return i
  }

  private frame(frame: unknown, offset: number | undefined, device: number, index: number): number {
    if (!isDict(frame)) return this.fail(`a frame must be a dict, got ${describe(frame)}`, offset, where(device, index))
    const known = this.frameByObject.get(frame)
    if (known !== undefined) return known
    const name = field(frame, 'name')
    const filename = field(frame, 'filename')
    const line = field(frame, 'line')
    if (typeof name !== 'string' || typeof filename !== 'string' || typeof line !== 'number')
      return this.fail(`a frame needs a string name and filename and a number line, got ${describe(name)}, ${describe(filename)}, ${describe(line)}`, offset, where(device, index))
    const i = this.frameId(name, filename, line)
    this.frameByObject.set(frame, i)
    return i
  }

  /** The whole snapshot is read: add what only its end says, and build the traces. */
  finish(root: PickleValue | unknown, format: 'pickle' | 'json', protocol: number | undefined): PytorchImport {
    const steps = this.finishSteps(root, format, protocol)
    for (;;) {
      const step = steps.next()
      if (step.done) return step.value
    }
  }

  /** finish() with the event loop let in between its steps (each a copy of at most one column set). */
  async finishYielding(root: PickleValue | unknown, format: 'pickle' | 'json', protocol: number | undefined): Promise<PytorchImport> {
    const steps = this.finishSteps(root, format, protocol)
    for (;;) {
      const step = steps.next()
      if (step.done) return step.value
      await new Promise<void>((resolve) => setImmediate(resolve))
    }
  }

  private *finishSteps(root: PickleValue | unknown, format: 'pickle' | 'json', protocol: number | undefined): Generator<void, PytorchImport> {
    if (!isDict(root)) this.fail(`the root must be a dict (a memory snapshot), got ${describe(root)}`)
    const traces = field(root, 'device_traces')
    if (!Array.isArray(traces))
      this.fail(
        traces === undefined
          ? "no 'device_traces': not a memory snapshot (torch.cuda.memory._dump_snapshot writes one; record with torch.cuda.memory._record_memory_history)"
          : `'device_traces' must be a list, got ${describe(traces)}`,
      )
    // Events the unpickler kept (JSON, or a list it did not recognise as streamed) go through the same path.
    traces.forEach((list: unknown, device: number) => {
      if (!Array.isArray(list)) this.fail(`device_traces[${device}] must be a list, got ${describe(list)}`)
      const s = this.states.get(device)
      const first = s === undefined ? 0 : s.nextIndex
      for (let i = 0; i < list.length; i++) this.event(device, first + i, list[i] as PickleValue, undefined)
    })
    const segmentsValue = field(root, 'segments') ?? []
    if (!Array.isArray(segmentsValue)) this.fail(`'segments' must be a list, got ${describe(segmentsValue)}`)
    const segments: Dict[] = segmentsValue.map((seg: unknown, i: number) => {
      if (!isDict(seg)) this.fail(`segments[${i}] must be a dict, got ${describe(seg)}`)
      return seg
    })

    const devices = new Set<number>()
    this.eventCounts.forEach((count, device) => {
      if (count > 0) devices.add(device)
    })
    for (const seg of segments) {
      const d = field(seg, 'device')
      if (typeof d === 'number' && Number.isInteger(d) && d >= 0) devices.add(d)
    }
    const present = [...devices].sort((a, b) => a - b)
    let selected: number[]
    if (this.wanted === 'all') selected = present
    else if (this.wanted === 'default') selected = present.includes(0) || present.length === 0 ? [0] : [present[0]!]
    else {
      if (!present.includes(this.wanted) && present.length > 0)
        throw new SnapshotImportError(this.file, 'not-a-snapshot', undefined, `device ${this.wanted} has no events or segments in this snapshot (it has device${present.length > 1 ? 's' : ''} ${present.join(', ')})`)
      selected = [this.wanted]
    }
    for (const d of selected) this.state(d)
    for (const [d] of this.states) if (!selected.includes(d)) this.states.delete(d)
    this.lastState = null

    const settings = field(root, 'allocator_settings')
    const plainSettings = plainSettingsOf(settings)
    for (const s of this.states.values()) {
      if (s.held >= 0) this.flushHeld(s)
      this.addLiveAtSnapshot(s, segments.filter((seg) => field(seg, 'device') === s.device || (field(seg, 'device') === undefined && s.device === 0)))
    }
    const markerTimes: number[] = []
    const markerIds: number[] = []
    const markerDevices: number[] = []
    this.annotationMarkers(field(root, 'external_annotations'), markerTimes, markerIds, markerDevices)
    const t0 = Number.isFinite(this.earliest) ? this.earliest : 0

    const ordered = [...this.states.values()].sort((a, b) => a.device - b.device)
    yield
    const events = yield* this.mergeEvents(ordered, t0, markerTimes, markerIds, markerDevices)
    const recorded: StrategyResult[] = []
    for (const s of ordered) {
      yield
      // The settings as JSON-ready data once (an object of 16 integer keys costs microseconds to
      // build); the first layout takes them, any other its own copy.
      recorded.push(yield* this.recordedLayout(s, t0, recorded.length === 0 ? plainSettings : plainSettingsOf(settings), ordered.length > 1))
    }

    const overflow: OverflowCounts = { orphanEvents: 0, synthesizedAllocs: 0, synthesizedBlocks: 0, synthesizedSegments: 0 }
    for (const s of ordered) {
      overflow.orphanEvents += s.overflow.orphanEvents
      overflow.synthesizedAllocs += s.overflow.synthesizedAllocs
      overflow.synthesizedBlocks += s.overflow.synthesizedBlocks
      overflow.synthesizedSegments += s.overflow.synthesizedSegments
    }
    return this.assemble(events, recorded, overflow, present, selected, settings, plainSettings, format, protocol)
  }

  /** The import from its finished columns: warnings, properties, tables. */
  private assemble(events: TraceEvents, recorded: StrategyResult[], overflow: OverflowCounts, present: number[], selected: number[], settings: unknown, plainSettings: [string, unknown][], format: 'pickle' | 'json', protocol: number | undefined): PytorchImport {
    const warnings: string[] = []
    if (overflow.orphanEvents + overflow.synthesizedAllocs + overflow.synthesizedBlocks + overflow.synthesizedSegments > 0) {
      warnings.push(
        `the trace's ring buffer overflowed (record with a larger max_entries to keep everything): ${overflow.orphanEvents} events refer to blocks or segments from before the first recorded event; ` +
          `synthesized at t = 0: ${overflow.synthesizedAllocs} allocations in the request trace, ${overflow.synthesizedBlocks} blocks and ${overflow.synthesizedSegments} segments in the recorded layout`,
      )
    }
    if (this.reallocations > 0) warnings.push(`${this.reallocations} allocs at an address already live (a damaged trace): the earlier block was freed there`)
    if (this.missingTimes > 0) warnings.push(`${this.missingTimes} events have no time_us (an old PyTorch?): their times are their order, not nanoseconds`)
    for (const [action, count] of this.unknownActions) warnings.push(`${count} events with the unknown action ${JSON.stringify(action)} were skipped`)
    if (isDict(settings)) {
      const divisions = field(settings, 'roundup_power2_divisions')
      if (isDict(divisions) && [...(divisions instanceof PickleDict ? divisions.values() : Object.values(divisions))].some((v) => typeof v === 'number' && v > 0))
        warnings.push('roundup_power2_divisions is set: the recorded layout rounds blocks to 512 bytes only, so its block sizes are smaller than PyTorch made them')
    }

    const properties: Record<string, string> = {
      'pytorch.format': format,
      'pytorch.devices': present.join(','),
      'pytorch.device': selected.join(','),
    }
    if (protocol !== undefined && protocol >= 0) properties['pickle.protocol'] = String(protocol)
    if (isDict(settings)) entries(settings).forEach(([k, v], i) => (properties[`pytorch.allocator.${String(k)}`] = typeof v === 'string' ? v : JSON.stringify(plainSettings[i]![1])))
    properties['pytorch.overflow.orphan_events'] = String(overflow.orphanEvents)
    properties['pytorch.overflow.synthesized_allocs'] = String(overflow.synthesizedAllocs)
    properties['pytorch.overflow.synthesized_segments'] = String(overflow.synthesizedSegments)

    const trace: RequestTrace = {
      meta: { source: 'pytorch-snapshot', origin: this.options.origin ?? basename(this.file), warnings, properties },
      events,
      tables: { streams: this.streams, frames: this.frames, stacks: this.stacks, tags: this.tags, markers: this.markers },
    }
    return { trace, recorded, devices: present, format, overflow }
  }

  /**
   * external_annotations of the imported devices as markers: their names, times, ids and devices.
   * Out of finishSteps, a generator V8 optimizes only after many imports.
   */
  private annotationMarkers(annotations: unknown, markerTimes: number[], markerIds: number[], markerDevices: number[]): void {
    if (!Array.isArray(annotations)) return
    for (const a of annotations) {
      if (!isDict(a)) continue
      const device = field(a, 'device')
      const time = field(a, 'time_us')
      const name = field(a, 'name')
      if (typeof time !== 'number' || !Number.isFinite(time) || typeof name !== 'string' || !this.states.has(typeof device === 'number' ? device : 0)) continue
      const stage = field(a, 'stage')
      this.markers.push(typeof stage === 'string' ? `${name} (${stage.toLowerCase()})` : name)
      markerTimes.push(time)
      markerIds.push(this.markers.length - 1)
      markerDevices.push(typeof device === 'number' ? device : 0)
      if (time < this.earliest) this.earliest = time
    }
  }

  /** Blocks and segments live at the snapshot that the trace never saw created (ring buffer overflow). */
  private addLiveAtSnapshot(s: DeviceState, segments: Dict[]): void {
    const isAmount = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0
    for (const seg of segments) {
      const address = field(seg, 'address')
      const total = field(seg, 'total_size')
      if (!isAmount(address) || !isAmount(total))
        this.fail(`a segment needs a non-negative integer address and total_size, got ${describe(address)}, ${describe(total)}`, undefined, `segments (device ${s.device})`)
      const given = field(seg, 'stream')
      const streamValue = Number.isInteger(given) || typeof given === 'bigint' ? given : 0
      const streamNumber = Number(streamValue)
      const expandable = field(seg, 'is_expandable') === true
      if (expandable) {
        if (!s.mapped.some((a) => a >= address && a < address + total)) {
          s.synthLayout.push(LayoutOp.map, address, total, total, streamNumber, NaN, poolOf(seg))
          s.overflow.synthesizedSegments++
        }
      } else if (!s.segments.has(address)) {
        s.synthLayout.push(LayoutOp.regionReserve, address, total, total, streamNumber, NaN, poolOf(seg))
        s.segments.set(address, total)
        s.overflow.synthesizedSegments++
      } else {
        const row = s.reserveRow.get(address)
        if (row !== undefined) s.layout.setAux(row, poolOf(seg))
      }
      const blocks = field(seg, 'blocks')
      if (!Array.isArray(blocks)) continue
      let at = address
      for (const block of blocks) {
        if (!isDict(block)) continue
        const size = field(block, 'size')
        if (!isAmount(size)) break
        // Older snapshots give no block addresses: blocks tile their segment in order.
        const listed = field(block, 'address')
        const blockAddress = isAmount(listed) ? listed : at
        at = blockAddress + size
        const state = field(block, 'state')
        const requestedValue = field(block, 'requested_size')
        const requested = isAmount(requestedValue) ? requestedValue : size
        if (state === 'active_allocated' && s.live.get(blockAddress) < 0) {
          const id = this.newId(s, requested, size)
          s.live.set(blockAddress, id)
          s.synthEvents.push(EventKind.alloc, id, requested, this.stream(streamValue), s.device, NaN, this.stack(field(block, 'frames'), undefined, s.device, -1))
          s.synthLayout.push(LayoutOp.alloc, blockAddress, size, requested, streamNumber, NaN)
          s.overflow.synthesizedAllocs++
          s.overflow.synthesizedBlocks++
        } else if (state === 'active_pending_free' && s.pending.get(blockAddress) < 0 && s.live.get(blockAddress) < 0) {
          // Freed by the program before the window, still waiting for its stream at the end.
          s.synthLayout.push(LayoutOp.alloc, blockAddress, size, requested, streamNumber, NaN)
          s.synthLayout.push(LayoutOp.freePending, blockAddress, size, requested, streamNumber, NaN)
          s.overflow.synthesizedBlocks++
        }
      }
    }
  }

  /**
   * The request events of every imported device in one time order (stand-ins at t = 0 first,
   * then each device's events, markers from annotations placed by time), times in ns from t0.
   */
  private *mergeEvents(states: DeviceState[], t0: number, markerTimes: number[], markerIds: number[], markerDevices: number[]): Generator<void, TraceEvents> {
    // Each device numbered its blocks from 0: follow on from the devices before it.
    let base = 0
    for (const s of states) {
      if (base > 0) {
        for (const part of [s.synthEvents, s.events]) {
          for (const c of part.chunks) for (let i = 0; i < c.kind.length; i++) if (c.kind[i] === EventKind.alloc || c.kind[i] === EventKind.free) c.id[i]! += base
        }
      }
      base += s.nextId
    }
    const main = states.map((s) => s.events)
    const total = states.reduce((n, s) => n + s.synthEvents.length + s.events.length, 0) + markerTimes.length
    const out = allocateEvents(total)
    let at = 0
    for (const s of states) at = s.synthEvents.moveTo(0, s.synthEvents.length, out, at)
    const order = markerTimes.map((_, i) => i).sort((a, b) => markerTimes[a]! - markerTimes[b]!)
    const merge: Merge = { main, out, at, cursors: main.map(() => 0), next: 0, order, markerTimes, markerIds, markerDevices, markerStream: order.length > 0 ? this.stream(0) : 0 }
    let yieldAt = YIELD_CHUNKS * CHUNK_ROWS
    while (!mergeRuns(merge, yieldAt)) {
      yield
      yieldAt = merge.at + YIELD_CHUNKS * CHUNK_ROWS
    }
    const time = out.time
    for (let from = 0; from < time.length; from += YIELD_CHUNKS * CHUNK_ROWS) {
      if (from > 0) yield
      toNanoseconds(time, from, Math.min(time.length, from + YIELD_CHUNKS * CHUNK_ROWS), time, from, t0)
    }
    return out
  }

  private *recordedLayout(s: DeviceState, t0: number, settings: [string, unknown][], several: boolean): Generator<void, StrategyResult> {
    const n = s.synthLayout.length + s.layout.length
    const layout = allocateLayout(n)
    const synthRows = yield* s.synthLayout.moveTo(layout, 0, t0)
    yield* s.layout.moveTo(layout, synthRows, t0)
    return recordedResult(s.device, layout, settings, several)
  }
}

/** PyTorch's own layout of one device as a strategy result. */
function recordedResult(device: number, layout: LayoutTrace, settings: [string, unknown][], several: boolean): StrategyResult {
  const params: Record<string, unknown> = { device }
  for (const [k, v] of settings) params[k] = v
  return {
    name: several ? `${RECORDED_LAYOUT_NAME}, cuda:${device}` : RECORDED_LAYOUT_NAME,
    strategy: 'pytorch',
    params,
    layout,
  }
}

/** A DeviceState takes what the native decoder left of its device (NativeSnapshotDevice's header says where each part is). */
function adoptDevice(s: DeviceState, d: NativeSnapshotDevice): void {
  const h = d.header
  const buffer = d.buffer
  s.nextId = h[1]!
  s.held = h[2]!
  s.heldAddress = h[3]!
  s.heldSize = h[4]!
  s.heldStream = h[5]!
  s.heldTime = h[6]!
  s.overflow.orphanEvents = h[7]!
  s.overflow.synthesizedAllocs = h[8]!
  s.overflow.synthesizedBlocks = h[9]!
  s.overflow.synthesizedSegments = h[10]!
  s.nextIndex = h[11]!
  const part = (k: number): [number, number] => [h[12 + 2 * k]!, h[13 + 2 * k]!]
  const [events, eventRows] = part(0)
  if (eventRows > 0) s.events.adopt(eventsAt(buffer, events, eventRows), eventRows)
  const [synthEvents, synthEventRows] = part(1)
  if (synthEventRows > 0) s.synthEvents.adopt(eventsAt(buffer, synthEvents, synthEventRows), synthEventRows)
  const [layout, layoutRows] = part(2)
  if (layoutRows > 0) s.layout.adopt(layoutAt(buffer, layout, layoutRows), layoutRows)
  const [synthLayout, synthLayoutRows] = part(3)
  if (synthLayoutRows > 0) s.synthLayout.adopt(layoutAt(buffer, synthLayout, synthLayoutRows), synthLayoutRows)
  const [requested, ids] = part(4)
  s.requestedById = new Float64Array(buffer, requested, ids)
  s.roundedById = new Float64Array(buffer, part(5)[0], ids)
  const pairs = (k: number, each: (address: number, value: number) => void) => {
    const [at, n] = part(k)
    if (n === 0) return
    const values = new Float64Array(buffer, at, 2 * n)
    for (let i = 0; i < 2 * n; i += 2) each(values[i]!, values[i + 1]!)
  }
  pairs(6, (address, id) => s.live.set(address, id))
  pairs(7, (address, id) => s.pending.set(address, id))
  pairs(8, (address, size) => s.segments.set(address, size))
  pairs(9, (address, row) => s.reserveRow.set(address, row))
  const [mapped, mappedCount] = part(10)
  if (mappedCount > 0) for (const address of new Float64Array(buffer, mapped, mappedCount)) s.mapped.push(address)
}

function where(device: number, index: number): string {
  return index < 0 ? `segments (device ${device})` : `device_traces[${device}][${index}]`
}

function sameIds(a: Uint32Array, b: ArrayLike<number>, n: number): boolean {
  if (a.length !== n) return false
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return false
  return true
}

/** apply()'s stack argument when the stack is still to be found from the frames. */
const UNRESOLVED_STACK = -2

/** PyTorch's round_size without roundup_power2_divisions: at least 512 bytes, a multiple of 512. */
export function roundedSize(requested: number): number {
  return requested < MIN_BLOCK ? MIN_BLOCK : Math.ceil(requested / MIN_BLOCK) * MIN_BLOCK
}

/** aux of a segment's reservation: 1 small pool, 2 large, 0 unknown. */
function poolOf(seg: Dict): number {
  const type = field(seg, 'segment_type')
  return type === 'small' ? 1 : type === 'large' ? 2 : 0
}

/** allocator_settings as keys and JSON-ready values (none when it is not a dict). */
function plainSettingsOf(settings: unknown): [string, unknown][] {
  return isDict(settings) ? entries(settings).map(([k, v]) => [String(k), plainJson(v)]) : []
}

function entries(dict: Dict): [unknown, unknown][] {
  return dict instanceof PickleDict ? [...dict.entries()] : Object.entries(dict)
}

/** A snapshot value as JSON-ready data (for parameters and properties). */
/** Whether an object takes this key as an array index: a canonical integer ('17', not '017' or '1e3') below 2^32 - 1. */
function isArrayIndex(key: string): boolean {
  const n = Number(key)
  return Number.isInteger(n) && n >= 0 && n < 4294967295 && String(n) === key
}

function plainJson(value: unknown, depth = 0): unknown {
  if (depth > 20) return null
  if (value instanceof PickleDict) {
    // A loop, not spread and map: the allocator settings go through here on every import.
    const list: [string, unknown][] = []
    let indexKeys = true
    for (const [k, v] of value.entries()) {
      const key = String(k)
      list.push([key, plainJson(v, depth + 1)])
      if (indexKeys && !isArrayIndex(key)) indexKeys = false
    }
    if (!indexKeys || list.length < 2) return Object.fromEntries(list)
    // Only array-index keys (torch's roundup_power2_divisions: '1' to '32768'), which an object
    // lists in numeric order however they were added: added from the largest, the object takes
    // sparse elements at once instead of growing an array to 32768 first (1.5 us, not 7). A stable
    // sort keeps a repeated key's last value last, as fromEntries does.
    list.sort((a, b) => Number(b[0]) - Number(a[0]))
    const object: Record<string, unknown> = {}
    for (const [k, v] of list) object[k] = v
    return object
  }
  if (Array.isArray(value)) return value.map((v) => plainJson(v, depth + 1))
  if (typeof value === 'bigint') return String(value)
  if (value instanceof Uint8Array) return Buffer.from(value).toString('hex')
  if (isDict(value)) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, plainJson(v, depth + 1)]))
  return value
}
