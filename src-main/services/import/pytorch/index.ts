// The PyTorch memory snapshot import (torch.cuda.memory._dump_snapshot: a pickle, protocols 2 to
// 5, or the same structure as JSON) into a request trace (source "pytorch-snapshot") and PyTorch's
// own layout, the result named "pytorch (recorded)", so the real allocator stands beside the
// modelled ones. The entry: the functions the rest of the code calls. docs/architecture.md has the
// design; what an event becomes is in mapper.ts.
//
// One reader with two lanes (pickle-reader.ts: the restricted pickle VM in pickle-vm.ts, the fast
// lane in pickle-fast-lane.ts), one table of the snapshot's keys (snapshot-keys.ts), one mapper
// (mapper.ts). The fast lane decodes a pickle held whole in memory straight into the
// mapper's columns, building no object per event; it takes only what Python's pickler writes for
// a snapshot. Where it meets anything else in the root, segments, settings or annotations, the
// general lane (the restricted unpickler, streaming device_traces' events to the same mapper)
// goes on from that opcode with the fast lane's stack and memo (LaneHandoff); inside
// device_traces, from the start of the event it met it in, the events already mapped standing as
// placeholders. Where that state cannot be told (a value the fast lane never built is read back
// later, the input is cut short; FastRestart) or the placeholders are used otherwise than appended
// to their list (LaneRestart), the general lane reads the bytes again from the start into a new
// mapper. Either way the general lane gives the import or the error, and both lanes fill the mapper in the
// same order, so an import is the same whichever lane read which part. A file below
// `wholeBelow` (256 MiB) is read whole for the fast lane (memory: the file, and the fast lane's
// memo of 6 bytes an entry); a larger one, or one at least `boundedAbove` where that is given,
// takes the general lane in bounded memory.
//
// Bounded memory. On the general lane a pickle is read in chunks (4 MiB), and the events of
// device_traces are mapped to typed-array columns as the unpickler appends them (ListStream),
// never kept as objects. Files of `boundedAbove` bytes or more (4 MiB) are read twice: a first
// pass finds which memo entries the pickle reads back, so the second stores only those (with the
// whole memo every event object would stay alive). Columns grow in 4096-row chunks
// (events-builder.ts) that the final copy frees as it goes. Peak memory is then about 2 x the
// output columns (request ~33 and layout ~45 bytes per event), plus the memo entries read back
// (for torch's pickles: the shared frames lists, frame dicts and key strings; each is kept to the
// end once read back), the `segments` list and one chunk, however large the file: a 1 GB snapshot
// of 7.2 M events peaked at 1.4 GB resident here. The async imports let the event loop in after
// every chunk and between finishing steps. The JSON form is parsed whole (JSON.parse), so it is
// limited to 512 MiB and not bounded.
//
// Limits on hostile input, each a SnapshotImportError (code 'limit') that names it and where it was
// met: the pickle reader's own (declared lengths, memo indices, stack height, nesting depth:
// pickle-vm.ts); the values the snapshot's generic parts expand to, a value shared through the
// memo counted at each use (ExpansionBudget in snapshot-values.ts: 2^20 + 4 per byte of the file,
// VRAMSCOPE_MAX_EXPANDED_VALUES); devices with events (1024, VRAMSCOPE_MAX_DEVICES, at most 65536:
// mapper.ts). Streams, stacks and frames each take their own bytes of the file, so their tables
// grow with it.
import { open, stat } from 'node:fs/promises'

import { concatBytes } from '../../../../src-shared/bytes.ts'
import { SnapshotMapper } from './mapper.ts'
import { LaneRestart, MemoReferenceScanner, Unpickler, decodeFast, decodeFastSteps, type LaneHandoff, type PickleValue } from './pickle-reader.ts'
import { SnapshotImportError } from './snapshot-error.ts'
import { KEY } from './snapshot-keys.ts'
import type { PytorchImport, PytorchImportOptions } from './types.ts'

export { roundedSize } from './mapper.ts'
export { SnapshotImportError, type SnapshotErrorCode } from './snapshot-error.ts'
export { RECORDED_LAYOUT_NAME, type OverflowCounts, type PytorchImport, type PytorchImportOptions } from './types.ts'

const DEFAULT_CHUNK = 4 << 20
/** Measured here: from a few MB up, the pre-pass pays for itself in garbage not collected. */
const DEFAULT_BOUNDED_ABOVE = 4 << 20
/** Reading a file whole costs its size in memory, besides the fast lane's memo (6 bytes an entry, about an entry per 20 input bytes for torch's pickles). */
const DEFAULT_WHOLE_BELOW = 256 << 20
/** The unpickler's default limit on nesting, which the fast lane must respect too. */
const DEFAULT_MAX_DEPTH = 200
/** JSON.parse needs the text as one string; V8 strings stop short of 2^29 characters. */
const MAX_JSON_BYTES = 512 << 20

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
      for (let at = 0; at < size;) {
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
      for (let at = 0; at < size;) {
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
 * A snapshot held whole: the fast lane, yielding every chunkBytes of input, else the general lane
 * over the same bytes. Progress counts `before` bytes already reported (the file's reading).
 */
async function importWhole(bytes: Uint8Array, file: string, options: PytorchImportOptions, before: number): Promise<PytorchImport> {
  if (bytes.length === 0) throw new SnapshotImportError(file, 'empty', undefined, 'the file is empty')
  const chunkBytes = options.chunkBytes ?? DEFAULT_CHUNK
  const size = bytes.length
  const pause = () => new Promise<void>((resolve) => setImmediate(resolve))
  if (!options.generalPathOnly && detectFormat(bytes.subarray(0, 64), size, file) === 'pickle') {
    const mapper = new SnapshotMapper(file, options, size)
    const steps = decodeFastSteps(bytes, mapper, maxDepthOf(options), chunkBytes)
    for (;;) {
      options.signal?.throwIfAborted()
      const step = steps.next()
      if (step.done) {
        const decoded = step.value
        if ('root' in decoded) {
          options.onProgress?.({ bytesDone: before + size, bytesTotal: before + size, phase: 'parse' })
          return mapper.finishYielding(decoded.root, 'pickle', decoded.protocol)
        }
        if ('at' in decoded) {
          // The general lane goes on from where the fast lane stopped, into the same mapper.
          const unpickler = resumedUnpickler(bytes, file, mapper, options, decoded)
          let value: PickleValue
          try {
            for (let at = decoded.at; at < size; at += chunkBytes) {
              options.signal?.throwIfAborted()
              unpickler.feed(bytes.subarray(at, Math.min(size, at + chunkBytes)))
              options.onProgress?.({ bytesDone: before + Math.min(size, at + chunkBytes), bytesTotal: before + size, phase: 'parse' })
              await pause()
            }
            value = unpickler.finish()
          } catch (e) {
            if (e instanceof LaneRestart) break
            throw e
          }
          return mapper.finishYielding(value, 'pickle', unpickler.pickleProtocol)
        }
        break
      }
      options.onProgress?.({ bytesDone: before + step.value, bytesTotal: before + size, phase: 'parse' })
      await pause()
    }
  }
  // The general lane, its passes counted after what was reported so far.
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

/**
 * The fast lane on a whole pickle, the general lane going on from where it gave up if it did; null
 * where it hands the whole input back (see pickle-fast-lane.ts).
 */
function importFast(bytes: Uint8Array, file: string, options: PytorchImportOptions): PytorchImport | null {
  const mapper = new SnapshotMapper(file, options, bytes.length)
  const decoded = decodeFast(bytes, mapper, maxDepthOf(options))
  if ('restart' in decoded) return null
  if ('root' in decoded) return mapper.finish(decoded.root, 'pickle', decoded.protocol)
  const unpickler = resumedUnpickler(bytes, file, mapper, options, decoded)
  let value: PickleValue
  try {
    unpickler.feed(bytes.subarray(decoded.at))
    value = unpickler.finish()
  } catch (e) {
    if (e instanceof LaneRestart) return null
    throw e
  }
  return mapper.finish(value, 'pickle', unpickler.pickleProtocol)
}

/**
 * The general lane taking over from the fast lane at handoff.at; from `boundedAbove` bytes on, it
 * keeps only the memo entries read back after that byte (a pre-pass over the rest), as a general
 * lane from the start keeps only those read back at all.
 */
function resumedUnpickler(bytes: Uint8Array, file: string, mapper: SnapshotMapper, options: PytorchImportOptions, handoff: LaneHandoff): Unpickler {
  let keep: MemoReferenceScanner['references'] | null = null
  if (bytes.length >= (options.boundedAbove ?? DEFAULT_BOUNDED_ABOVE)) {
    const scanner = new MemoReferenceScanner(handoff.at, handoff.memoNext)
    scanner.feed(bytes.subarray(handoff.at))
    keep = scanner.references
  }
  const unpickler = newUnpickler(file, bytes.length, mapper, options, keep)
  unpickler.resume(handoff)
  return unpickler
}

/** Imports a snapshot held in memory in one synchronous call (tests, fuzzing, small files). */
export function parsePytorchSnapshot(bytes: Uint8Array, file: string, options: PytorchImportOptions = {}): PytorchImport {
  if (bytes.length === 0) throw new SnapshotImportError(file, 'empty', undefined, 'the file is empty')
  const format = detectFormat(bytes.subarray(0, 64), bytes.length, file)
  if (format === 'json') return fromJson(bytes, file, options)
  if (!options.generalPathOnly) {
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
    await readPass(
      (chunk) => {
        if (format === null) format = detectFormat(chunk.subarray(0, 64), size, file)
        if (format === 'pickle') scan.feed(chunk)
      },
      0,
      size * passes,
      'scan',
    )
  }
  const mapper = new SnapshotMapper(file, options, size)
  let unpickler: Unpickler | null = null
  const jsonParts: Uint8Array[] = []
  await readPass(
    (chunk) => {
      if (format === null) format = detectFormat(chunk.subarray(0, 64), size, file)
      if (format === 'json') jsonParts.push(chunk.slice())
      else (unpickler ??= newUnpickler(file, size, mapper, options, scanner && scanner.references)).feed(chunk)
    },
    size * (passes - 1),
    size * passes,
    'parse',
  )
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
  if (size > MAX_JSON_BYTES)
    throw new SnapshotImportError(
      file,
      'limit',
      undefined,
      `a JSON snapshot of ${size} bytes is larger than the ${MAX_JSON_BYTES} bytes JSON.parse can hold; import the pickle instead, which is streamed`,
    )
  return 'json'
}

function newUnpickler(
  file: string,
  size: number,
  mapper: SnapshotMapper,
  options: PytorchImportOptions,
  keep: MemoReferenceScanner['references'] | null,
): Unpickler {
  return new Unpickler({
    fileName: file,
    totalBytes: size,
    keepMemo: keep,
    ...(options.maxDepth === undefined ? {} : { maxDepth: options.maxDepth }),
    stream: {
      path: [KEY.deviceTraces, null],
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
  return new SnapshotMapper(file, options, bytes.length).finish(root as PickleValue, 'json', undefined)
}
