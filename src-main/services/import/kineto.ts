// Imports a torch.profiler (Kineto) Chrome trace recorded with profile_memory=True into a request
// trace (source "kineto-trace"). Such a file is one JSON object: some fields about the run
// (schemaVersion, deviceProperties...), then `traceEvents`, an array of events, among them the
// `[memory]` instant events (ph "i") the profiler writes for each allocation and free:
//   {"ph": "i", "name": "[memory]", "ts": <µs>, "args": {"Addr": <int>, "Bytes": <+alloc / -free>,
//    "Total Allocated": <int>, "Total Reserved": <int>, "Device Id": <int>, "Device Type": <1 CUDA, 0 CPU>}}
// The file is never parsed whole: a byte scanner finds the traceEvents array and each top-level
// object in it (string- and escape-aware; the structural characters are ASCII, which UTF-8 never
// uses inside a multibyte character, so bytes suffice and positions are exact), and only an event
// that can be a memory event or a cpu_op is handed to JSON.parse, one at a time, each at most
// maxEventBytes. A gzip-compressed trace (.json.gz, as the profiler's export often is) is
// decompressed as it is read.
// CUDA memory events become allocs and frees; host (CPU) ones and other devices' are counted and
// left out. The profiler writes threads' events apart, so they are sorted by time (file order
// breaks ties). The allocator's own figures come along as properties: the peak of Total Reserved
// (kineto.peak_reserved), exact, and how many times the curve changes (kineto.reserved_points);
// the curve itself rides with the trace as trace.recordedReserved (the reference for replays).
// Where there are no stacks, the cpu_op events name what allocated: each alloc is tagged with the
// innermost op of its thread whose span holds it.
// What was live before the profiler's first memory event stands in at the start of the trace, on
// its device, so that every replay starts holding it: each free of an address with no live block
// is a block of the freed size allocated at the start and freed where the free was recorded; the
// rest of what the first event's Total Allocated says was allocated then, one block allocated at
// the start and never freed. Both carry the tag BEFORE_PROFILER_TAG.
import { createReadStream } from 'node:fs'
import { open, stat } from 'node:fs/promises'
import { createGunzip } from 'node:zlib'

import { plural } from '../../../src-shared/compare.ts'
import { InputError } from '../input-error.ts'
import { DEVICE_PROPERTIES } from '../replay/device.ts'
import { EventsBuilder, copyEvents, writeEvent } from '../trace/events-builder.ts'
import { EventKind, allocateEvents, type RecordedSeries, type RequestTrace } from '../trace/model.ts'

export const KINETO_SOURCE = 'kineto-trace'
/** One event larger than this is damage (the profiler's are under a few KiB), never buffered whole. */
export const MAX_EVENT_BYTES = 1 << 20
/** The fields before traceEvents are kept (for the GPU's name and size) only while this small. */
const MAX_PRELUDE_BYTES = 1 << 20
/** The tag of the stand-ins for what was allocated before the profiler's first memory event. */
export const BEFORE_PROFILER_TAG = '(allocated before the profiler started)'

export type KinetoErrorCode = 'unreadable' | 'not-a-trace' | 'truncated' | 'too-large' | 'bad-event'

export class KinetoTraceError extends InputError {
  constructor(
    file: string,
    readonly code: KinetoErrorCode,
    /** Byte offset the problem is at (of the decompressed data for a gzip file); undefined: the whole file. */
    readonly byte: number | undefined,
    problem: string,
    gzip = false,
  ) {
    super(file, byte === undefined ? '' : `byte ${byte}${gzip ? ' of the decompressed data' : ''}`, problem)
  }
}

export interface KinetoImportOptions {
  /** What meta.origin says (default: the path as given). */
  origin?: string
  /** A larger event is refused (default MAX_EVENT_BYTES). */
  maxEventBytes?: number
  onProgress?: (progress: { bytesDone: number; bytesTotal: number; events: number }) => void
  signal?: AbortSignal
}

export interface KinetoImport {
  trace: RequestTrace
  gzip: boolean
  /** Events in the traceEvents array, of every kind. */
  traceEvents: number
  /** CUDA [memory] events imported (allocs + frees, the frees of unknown blocks included). */
  memoryEvents: number
  /** [memory] events of the host (Device Type 0), left out. */
  hostEvents: number
  /** [memory] events of other device types, left out. */
  otherDeviceEvents: number
  /** Frees of an address with no live block (allocated before the profiler started); each has a stand-in alloc. */
  unknownFrees: number
  /**
   * Allocs at the start of the trace standing in for what was live before the profiler's first
   * memory event (tagged BEFORE_PROFILER_TAG): one for each unknown free, and one per device for
   * the rest of its allocated-before bytes, where some are left. They are the trace's first events.
   */
  standInAllocs: number
  /** Blocks live at the end of the trace, the stand-ins never freed included. */
  liveAtEnd: number
  /** The largest Total Reserved any CUDA memory event carries; undefined when none does. */
  peakReserved: number | undefined
  /** Total Reserved (summed over the devices) over the request events, as trace.recordedReserved holds it. */
  recordedReserved: RecordedSeries | undefined
}

const GZIP_MAGIC = [0x1f, 0x8b] as const

/** Reads and imports a profiler trace file, plain or gzip-compressed, event by event. */
export async function importKinetoTrace(path: string, options: KinetoImportOptions = {}): Promise<KinetoImport> {
  let bytesTotal: number
  let gzip = false
  try {
    bytesTotal = (await stat(path)).size
    const handle = await open(path, 'r')
    try {
      const head = new Uint8Array(2)
      const { bytesRead } = await handle.read(head, 0, 2, 0)
      gzip = bytesRead === 2 && head[0] === GZIP_MAGIC[0] && head[1] === GZIP_MAGIC[1]
    } finally {
      await handle.close()
    }
  } catch (e) {
    throw new KinetoTraceError(path, 'unreadable', undefined, `cannot be read: ${(e as Error).message}`)
  }
  const scanner = new KinetoScanner(path, gzip, options)
  const file = createReadStream(path, { highWaterMark: 1 << 20, ...(options.signal && { signal: options.signal }) })
  const gunzip = gzip ? createGunzip({ chunkSize: 1 << 20 }) : undefined
  let bytesDone = 0
  if (gunzip) file.on('data', (chunk) => void (bytesDone += chunk.length))
  const source = (gunzip ? file.pipe(gunzip) : file) as AsyncIterable<Buffer>
  if (gunzip) file.on('error', (e) => gunzip.destroy(e))
  try {
    for await (const chunk of source) {
      if (!gunzip) bytesDone += chunk.length
      if (scanner.push(chunk)) break // the array is closed: what follows it holds no events
      options.onProgress?.({ bytesDone, bytesTotal, events: scanner.traceEvents })
    }
  } catch (e) {
    if (e instanceof KinetoTraceError || options.signal?.aborted) throw e
    const message = (e as Error).message
    if (gunzip && /unexpected end|incorrect header|invalid|zlib/i.test(message))
      throw new KinetoTraceError(path, 'truncated', undefined, `the gzip data is damaged or cut short (${message})`)
    throw new KinetoTraceError(path, 'unreadable', undefined, `cannot be read: ${message}`)
  } finally {
    file.destroy()
    gunzip?.destroy()
  }
  return scanner.finish()
}

/** Imports a whole (uncompressed) trace held in memory: tests, fuzzing. */
export function parseKinetoTrace(bytes: Uint8Array, file: string, options: KinetoImportOptions = {}): KinetoImport {
  const scanner = new KinetoScanner(file, false, options)
  scanner.push(bytes)
  return scanner.finish()
}

const QUOTE = 0x22
const BACKSLASH = 0x5c
const OPEN_BRACE = 0x7b
const CLOSE_BRACE = 0x7d
const OPEN_BRACKET = 0x5b
const CLOSE_BRACKET = 0x5d
const COMMA = 0x2c
const COLON = 0x3a
const MEMORY_NAME = Buffer.from('"[memory]"')
const CPU_OP = Buffer.from('"cpu_op"')
/** Bytes of a string walked byte by byte before the scanner searches for its end natively. */
const SHORT_STRING = 64

/**
 * Whether the bytes before `i` (an opening brace or bracket at the event's top level, in `buf` from
 * `from`) are `"args":`, the key written plainly (no escape before it: else the event is read whole).
 */
function isArgsKeyBefore(buf: Buffer, i: number, from: number): boolean {
  let k = i - 1
  while (k > from && buf[k]! <= 0x20) k--
  if (buf[k] !== COLON) return false
  k--
  while (k > from && buf[k]! <= 0x20) k--
  return (
    k - 6 > from &&
    buf[k] === QUOTE &&
    buf[k - 1] === 0x73 && // s
    buf[k - 2] === 0x67 && // g
    buf[k - 3] === 0x72 && // r
    buf[k - 4] === 0x61 && // a
    buf[k - 5] === QUOTE &&
    buf[k - 6] !== BACKSLASH
  )
}
const TRACE_EVENTS_KEY = 'traceEvents'

function isSpace(b: number): boolean {
  return b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09
}

/**
 * The scanner's place: 'start' before the opening brace; 'object' inside the top-level object
 * looking for the traceEvents key (depth counts brackets, strings skipped); 'value' after its
 * colon; 'array' between events; 'event' inside one; 'done' after the array's closing bracket.
 */
type Phase = 'start' | 'object' | 'value' | 'array' | 'event' | 'done'

function grow<T extends Float64Array | Uint16Array | Uint32Array>(a: T): T {
  const next = new (a.constructor as new (n: number) => T)(a.length * 2)
  next.set(a)
  return next
}

/** The memory events as read, in file order, before sorting. */
class RawEvents {
  ts = new Float64Array(1024)
  bytes = new Float64Array(1024)
  addr = new Float64Array(1024)
  device = new Uint16Array(1024)
  reserved = new Float64Array(1024)
  allocated = new Float64Array(1024)
  /** The thread (pid/tid) that recorded it, an index into KinetoScanner's threads. */
  thread = new Uint32Array(1024)
  length = 0

  push(ts: number, bytes: number, addr: number, device: number, reserved: number, allocated: number, thread: number): void {
    if (this.length === this.ts.length) {
      this.ts = grow(this.ts)
      this.thread = grow(this.thread)
      this.bytes = grow(this.bytes)
      this.addr = grow(this.addr)
      this.device = grow(this.device)
      this.reserved = grow(this.reserved)
      this.allocated = grow(this.allocated)
    }
    const i = this.length++
    this.ts[i] = ts
    this.bytes[i] = bytes
    this.addr[i] = addr
    this.device[i] = device
    this.reserved[i] = reserved
    this.allocated[i] = allocated
    this.thread[i] = thread
  }
}

/** The cpu_op events (ph "X") as read: each op's thread, span in µs and name (an index into names). */
class Ops {
  start = new Float64Array(1024)
  end = new Float64Array(1024)
  thread = new Uint32Array(1024)
  name = new Uint32Array(1024)
  length = 0

  push(start: number, end: number, thread: number, name: number): void {
    if (this.length === this.start.length) {
      this.start = grow(this.start)
      this.end = grow(this.end)
      this.thread = grow(this.thread)
      this.name = grow(this.name)
    }
    const i = this.length++
    this.start[i] = start
    this.end[i] = end
    this.thread[i] = thread
    this.name[i] = name
  }
}

class KinetoScanner {
  private phase: Phase = 'start'
  /** Bytes consumed before the current chunk. */
  private offset = 0
  private depth = 0
  private inString = false
  private escaped = false
  /** The top-level object's keys: the string being read at depth 1 and whether it was a key. */
  private keyStart = -1
  private keyParts: Buffer[] = []
  private lastKey: string | undefined
  private expectingKey = true
  /** The bytes before traceEvents, for its fields; dropped past MAX_PRELUDE_BYTES. */
  private prelude: Buffer[] | undefined = []
  private preludeBytes = 0
  private preludeEnd = 0
  /** The event being read: its parts so far and where it began. */
  private eventParts: Buffer[] = []
  private eventBytes = 0
  /** The value of the event's top-level "args" key, as offsets into the event's bytes (-1: not seen in one chunk). */
  private argsStart = -1
  private argsEnd = -1
  private eventStart = 0
  private readonly maxEventBytes: number
  /** Where the next backslash of chunk backslashIn is (-1: none after the last look). */
  private backslashIn: Buffer | undefined
  private nextBackslash = -1
  private readonly raw = new RawEvents()
  private readonly ops = new Ops()
  private readonly opNames = new Map<string, number>()
  private readonly threads = new Map<string, number>()
  traceEvents = 0
  private hostEvents = 0
  private otherDeviceEvents = 0
  private readonly fields: Record<string, unknown> = {}

  constructor(
    private readonly file: string,
    private readonly gzip: boolean,
    options: KinetoImportOptions,
  ) {
    this.maxEventBytes = options.maxEventBytes ?? MAX_EVENT_BYTES
    this.origin = options.origin ?? file
  }

  private readonly origin: string

  private fail(code: KinetoErrorCode, byte: number | undefined, problem: string): never {
    throw new KinetoTraceError(this.file, code, byte, problem, this.gzip)
  }

  /** Scans one chunk; true once the traceEvents array has closed. */
  push(chunk: Uint8Array): boolean {
    const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)
    const n = buf.length
    this.backslashIn = undefined
    if (this.phase === 'start' || this.phase === 'object') this.keepPrelude(buf)
    let i = 0
    while (i < n) {
      const b = buf[i]!
      switch (this.phase) {
        case 'start':
          if (this.offset + i === 0 && b === 0xef && buf[i + 1] === 0xbb && buf[i + 2] === 0xbf) {
            i += 3
            continue
          }
          if (isSpace(b)) break
          if (b !== OPEN_BRACE) this.fail('not-a-trace', this.offset + i, 'a profiler trace is a JSON object, "{" first')
          this.phase = 'object'
          this.depth = 1
          break
        case 'object':
          if (this.inString) {
            if (this.escaped) this.escaped = false
            else if (b === BACKSLASH) this.escaped = true
            else if (b === QUOTE) {
              this.inString = false
              if (this.keyStart >= 0) {
                this.keyParts.push(buf.subarray(this.keyStart, i))
                this.lastKey = Buffer.concat(this.keyParts).toString('utf8')
                this.keyParts = []
                this.keyStart = -1
              }
            }
            break
          }
          if (b === QUOTE) {
            this.inString = true
            if (this.depth === 1 && this.expectingKey) {
              this.keyStart = i + 1
              this.keyParts = []
            }
          } else if (b === COLON) {
            if (this.depth === 1) {
              this.expectingKey = false
              if (this.lastKey === TRACE_EVENTS_KEY) {
                this.phase = 'value'
                this.preludeEnd = this.offset + i
              }
            }
          } else if (b === COMMA) {
            if (this.depth === 1) {
              this.expectingKey = true
              this.lastKey = undefined
            }
          } else if (b === OPEN_BRACE || b === OPEN_BRACKET) this.depth++
          else if (b === CLOSE_BRACE || b === CLOSE_BRACKET) {
            this.depth--
            if (this.depth === 0) this.fail('not-a-trace', this.offset + i, 'the JSON object ends without a "traceEvents" array: this is not a profiler trace')
          }
          break
        case 'value':
          if (isSpace(b)) break
          if (b !== OPEN_BRACKET)
            this.fail(
              'not-a-trace',
              this.offset + i,
              `"traceEvents" is not an array (it starts with "${String.fromCharCode(b)}"), so this is not a profiler trace`,
            )
          this.phase = 'array'
          this.expectingKey = false // an event may come first
          break
        case 'array':
          if (isSpace(b)) break
          if (b === CLOSE_BRACKET) {
            this.phase = 'done'
            return true
          }
          if (b === COMMA) {
            if (!this.expectingKey) this.fail('bad-event', this.offset + i, `a stray "," in the traceEvents array after ${this.traceEvents} events`)
            this.expectingKey = false
            break
          }
          if (b !== OPEN_BRACE) this.fail('bad-event', this.offset + i, `event ${this.traceEvents} of traceEvents is not a JSON object`)
          if (this.expectingKey && this.traceEvents > 0) this.fail('bad-event', this.offset + i, `a "," is missing before event ${this.traceEvents}`)
          this.phase = 'event'
          this.depth = 1
          this.inString = false
          this.escaped = false
          this.eventStart = this.offset + i
          this.eventParts = []
          this.eventBytes = 0
          this.argsStart = -1
          this.argsEnd = -1
          i = this.scanEvent(buf, i + 1, i)
          continue
        case 'event':
          i = this.scanEvent(buf, i, i)
          continue
        case 'done':
          return true
      }
      i++
    }
    this.offset += n
    if (this.keyStart >= 0) {
      this.keyParts.push(buf.subarray(this.keyStart))
      this.keyStart = 0
    }
    return false
  }

  private keepPrelude(buf: Buffer): void {
    if (!this.prelude) return
    this.preludeBytes += buf.length
    if (this.preludeBytes > 2 * MAX_PRELUDE_BYTES) this.prelude = undefined
    else this.prelude.push(Buffer.from(buf)) // a copy: the stream may reuse its buffer
  }

  /** Scans an event's bytes from `i` (its start in this chunk is `from`); returns where scanning goes on. */
  private scanEvent(buf: Buffer, i: number, from: number): number {
    const n = buf.length
    // The scanner's state in locals while it walks (a field per byte costs a third more), back in
    // the fields wherever the walk leaves.
    let inString = this.inString
    let escaped = this.escaped
    let depth = this.depth
    while (i < n) {
      const b = buf[i]!
      if (inString) {
        if (escaped) escaped = false
        else if (b === BACKSLASH) escaped = true
        else if (b === QUOTE) inString = false
        // A short string (a key, a name) is walked here; a long one (a stack, a shape list) is
        // skipped to its next quote or backslash at once: a native search costs a call, which is
        // more than a key's few bytes.
        else {
          const limit = Math.min(n, i + SHORT_STRING)
          let j = i + 1
          while (j < limit && buf[j] !== QUOTE && buf[j] !== BACKSLASH) j++
          if (j < limit) {
            i = j
            continue
          }
          const q = buf.indexOf(QUOTE, i)
          // The next backslash is looked for once per chunk and again only once passed (most chunks have few).
          if (this.backslashIn !== buf || (this.nextBackslash >= 0 && this.nextBackslash < i)) {
            this.backslashIn = buf
            this.nextBackslash = buf.indexOf(BACKSLASH, i)
          }
          const s = this.nextBackslash
          const next = q < 0 ? s : s < 0 ? q : Math.min(q, s)
          if (next < 0) {
            i = n
            break
          }
          i = next
          continue
        }
      } else if (b === QUOTE) inString = true
      else if (b === OPEN_BRACE || b === OPEN_BRACKET) {
        // The top-level "args" value opening, where the event lies in this chunk so far.
        if (depth === 1 && this.eventParts.length === 0 && this.argsStart < 0 && isArgsKeyBefore(buf, i, from)) this.argsStart = i - from
        depth++
      } else if (b === CLOSE_BRACE || b === CLOSE_BRACKET) {
        if (--depth === 1 && this.argsStart >= 0 && this.argsEnd < 0 && this.eventParts.length === 0) this.argsEnd = i + 1 - from
        if (depth === 0) {
          this.inString = inString
          this.escaped = escaped
          this.depth = 0
          this.checkSize(this.eventBytes + (i + 1 - from))
          const piece = buf.subarray(from, i + 1)
          const whole = this.eventParts.length === 0 ? piece : Buffer.concat([...this.eventParts, piece])
          this.eventParts = []
          this.event(whole)
          this.phase = 'array'
          this.expectingKey = true // a comma next, or the end
          return i + 1
        }
      }
      i++
    }
    this.inString = inString
    this.escaped = escaped
    this.depth = depth
    this.checkSize(this.eventBytes + (n - from))
    this.eventParts.push(Buffer.from(buf.subarray(from, n)))
    this.eventBytes += n - from
    return n
  }

  private checkSize(bytes: number): void {
    if (bytes > this.maxEventBytes)
      this.fail(
        'too-large',
        this.eventStart,
        `event ${this.traceEvents} of traceEvents is larger than ${this.maxEventBytes} bytes: the file is damaged (a profiler event is a few KiB at most)`,
      )
  }

  /** One whole event of the array: parsed only if it can be a memory event or a cpu_op. */
  private event(bytes: Buffer): void {
    const index = this.traceEvents++
    const memory = bytes.indexOf(MEMORY_NAME) >= 0
    if (!memory && bytes.indexOf(CPU_OP) < 0) return
    let e: { name?: unknown; ph?: unknown; cat?: unknown; ts?: unknown; dur?: unknown; pid?: unknown; tid?: unknown; args?: Record<string, unknown> }
    try {
      // An op's args (shapes, types, its call stack) are most of its bytes and nothing read of it:
      // parsed as null, as the events neither an op nor memory are not parsed at all, an op costs a
      // third (docs/benchmarks.md, "A 1 GB profiler trace").
      const text =
        !memory && this.argsEnd > this.argsStart && this.argsStart > 0
          ? `${bytes.toString('utf8', 0, this.argsStart)}null${bytes.toString('utf8', this.argsEnd)}`
          : bytes.toString('utf8')
      e = JSON.parse(text) as typeof e
    } catch (error) {
      this.fail('bad-event', this.eventStart, `event ${index} of traceEvents is not valid JSON (${(error as Error).message})`)
    }
    if (e.cat === 'cpu_op' && e.ph === 'X') {
      // What names an allocation where there are no stacks; an op without a usable span is left out.
      const { ts, dur, name } = e
      if (typeof ts === 'number' && typeof dur === 'number' && Number.isFinite(ts) && Number.isFinite(dur) && dur >= 0 && typeof name === 'string')
        this.ops.push(ts, ts + dur, this.threadOf(e.pid, e.tid), intern(this.opNames, name.length > 512 ? `${name.slice(0, 512)}…` : name))
      return
    }
    if (!memory || e.name !== '[memory]') return
    const args = e.args
    const where = `event ${index} of traceEvents ([memory])`
    if (typeof args !== 'object' || args === null) this.fail('bad-event', this.eventStart, `${where} has no "args" object`)
    const type = args['Device Type']
    if (type !== 1) {
      if (type === 0) this.hostEvents++
      else this.otherDeviceEvents++
      return
    }
    const number = (key: string, integer: boolean): number => {
      const v = args[key]
      if (typeof v !== 'number' || !Number.isFinite(v) || (integer && !Number.isSafeInteger(v)))
        this.fail('bad-event', this.eventStart, `${where}: "${key}" is ${JSON.stringify(v) ?? 'missing'}, not ${integer ? 'a whole number' : 'a number'}`)
      return v
    }
    const ts =
      typeof e.ts === 'number' && Number.isFinite(e.ts)
        ? e.ts
        : this.fail('bad-event', this.eventStart, `${where}: "ts" is ${JSON.stringify(e.ts) ?? 'missing'}, not a number`)
    const size = number('Bytes', true)
    const addr = number('Addr', true)
    const device = number('Device Id', true)
    if (device < 0 || device > 0xffff) this.fail('bad-event', this.eventStart, `${where}: "Device Id" ${device} is not a CUDA device ordinal`)
    if (addr < 0) this.fail('bad-event', this.eventStart, `${where}: "Addr" ${addr} is not an address`)
    const reserved = args['Total Reserved'] === undefined ? -1 : number('Total Reserved', true)
    const allocated = args['Total Allocated'] === undefined ? -1 : number('Total Allocated', true)
    if (size === 0) return // a zero-byte request takes nothing and is not freed
    this.raw.push(ts, size, addr, device, reserved, allocated, this.threadOf(e.pid, e.tid))
  }

  private threadOf(pid: unknown, tid: unknown): number {
    return intern(this.threads, `${String(pid)}/${String(tid)}`)
  }

  /**
   * For each memory event (by its index in raw), the op (an index into opNames) that enclosed it:
   * the innermost cpu_op of its thread whose [ts, ts + dur] holds its ts; -1 for none. Per thread,
   * a sweep in time order with the ops open at that moment on a stack (ops nest on a thread).
   */
  private enclosingOps(): Int32Array {
    const raw = this.raw
    const ops = this.ops
    const result = new Int32Array(raw.length).fill(-1)
    if (ops.length === 0) return result
    const opOrder = Uint32Array.from({ length: ops.length }, (_, i) => i).sort(
      (a, b) => ops.thread[a]! - ops.thread[b]! || ops.start[a]! - ops.start[b]! || ops.end[b]! - ops.end[a]! || a - b,
    )
    const memOrder = Uint32Array.from({ length: raw.length }, (_, i) => i).sort((a, b) => raw.thread[a]! - raw.thread[b]! || raw.ts[a]! - raw.ts[b]! || a - b)
    let k = 0 // into opOrder
    const open: number[] = []
    let thread = -1
    for (const m of memOrder) {
      const t = raw.ts[m]!
      if (raw.thread[m] !== thread) {
        thread = raw.thread[m]!
        open.length = 0
        while (k < opOrder.length && ops.thread[opOrder[k]!]! < thread) k++
      }
      while (k < opOrder.length && ops.thread[opOrder[k]!] === thread && ops.start[opOrder[k]!]! <= t) {
        const o = opOrder[k++]!
        while (open.length > 0 && ops.end[open[open.length - 1]!]! < ops.start[o]!) open.pop()
        open.push(o)
      }
      while (open.length > 0 && ops.end[open[open.length - 1]!]! < t) open.pop()
      if (open.length > 0) result[m] = ops.name[open[open.length - 1]!]!
    }
    return result
  }

  finish(): KinetoImport {
    if (this.phase === 'start')
      this.fail('not-a-trace', this.offset === 0 ? undefined : this.offset, 'the file is empty: a profiler trace is a JSON object with a "traceEvents" array')
    if (this.phase === 'object' || this.phase === 'value')
      this.fail('truncated', this.offset, 'the file ends before its "traceEvents" array: it is cut short, or not a profiler trace')
    if (this.phase === 'array' || this.phase === 'event')
      this.fail(
        'truncated',
        this.offset,
        `the file ends inside the traceEvents array (after ${this.traceEvents} whole events${this.phase === 'event' ? `, in one begun at byte ${this.eventStart}` : ''}): it is cut short`,
      )
    this.readPrelude()
    return this.build()
  }

  /** The fields before traceEvents: the profiler's versions and the GPUs it saw. */
  private readPrelude(): void {
    if (!this.prelude) return
    const text = Buffer.concat(this.prelude).subarray(0, this.preludeEnd).toString('utf8')
    this.prelude = undefined
    // Up to the traceEvents key: drop the key and the comma before it, close the object.
    const cut = text.lastIndexOf(`"${TRACE_EVENTS_KEY}"`)
    if (cut < 0) return
    const head = text.slice(0, cut).replace(/,\s*$/, '')
    try {
      Object.assign(this.fields, JSON.parse(`${head}}`) as Record<string, unknown>)
    } catch {
      // Fields that do not parse say nothing about the events: left unread.
    }
  }

  private build(): KinetoImport {
    const raw = this.raw
    const n = raw.length
    // The profiler writes each thread's events together: sort by time, file order breaking ties.
    const order = new Uint32Array(n)
    for (let i = 0; i < n; i++) order[i] = i
    let sorted = true
    for (let i = 1; i < n && sorted; i++) if (raw.ts[i]! < raw.ts[i - 1]!) sorted = false
    if (!sorted) order.sort((a, b) => raw.ts[a]! - raw.ts[b]! || a - b)
    const t0 = n > 0 ? raw.ts[order[0]!]! : 0
    // Allocations are tagged with their enclosing op's name; the tags table holds the names used.
    const enclosing = this.enclosingOps()
    const opNames = [...this.opNames.keys()]
    const tagOf = new Map<number, number>()
    const tags: string[] = []
    let tagged = 0
    const events = new EventsBuilder(Math.max(16, n))
    const live = new Map<number, Map<number, number>>() // device -> address -> block id
    const sizes: number[] = []
    const devices = new Set<number>()
    let nextId = 0
    let unknownFrees = 0
    /** Per device, the stand-ins for blocks allocated before the profiler started that a recorded free names. */
    const freedBefore = new Map<number, { id: number; size: number; device: number }[]>()
    let freedBytes = 0
    let reusedLive = 0
    let sizeMismatches = 0
    let peakReserved: number | undefined
    const peakByDevice = new Map<number, number>()
    const lastReserved = new Map<number, number>()
    /** What each device held before its first memory event (its Total Allocated less that event's bytes). */
    const allocatedBefore = new Map<number, number>()
    let reservedPoints = 0
    // The curve over the request events: the devices' latest Total Reserved summed, a point where
    // the sum changes, at the index of the event the memory event became (counted here without the
    // stand-ins, which go before them all: shifted past them at the end). Several changes landing
    // on one index keep the last.
    const seriesIndex: number[] = []
    const seriesBytes: number[] = []
    let reservedSum = 0
    for (let k = 0; k < n; k++) {
      const i = order[k]!
      const device = raw.device[i]!
      const size = raw.bytes[i]!
      const addr = raw.addr[i]!
      const time = (raw.ts[i]! - t0) * 1000
      const reserved = raw.reserved[i]!
      if (!devices.has(device) && raw.allocated[i]! >= 0) allocatedBefore.set(device, raw.allocated[i]! - size)
      devices.add(device)
      if (reserved >= 0) {
        if (peakReserved === undefined || reserved > peakReserved) peakReserved = reserved
        if (reserved > (peakByDevice.get(device) ?? -1)) peakByDevice.set(device, reserved)
        const last = lastReserved.get(device)
        if (last !== reserved) {
          reservedPoints++
          reservedSum += reserved - (last ?? 0)
          const at = events.length
          const p = seriesIndex.length - 1
          if (p >= 0 && seriesIndex[p] === at) {
            seriesBytes[p] = reservedSum
            // Back to the value before this index: the point says nothing.
            if (p >= 1 && seriesBytes[p - 1] === reservedSum) {
              seriesIndex.pop()
              seriesBytes.pop()
            }
          } else if (p < 0 || seriesBytes[p] !== reservedSum) {
            seriesIndex.push(at)
            seriesBytes.push(reservedSum)
          }
        }
        lastReserved.set(device, reserved)
      }
      let blocks = live.get(device)
      if (!blocks) live.set(device, (blocks = new Map()))
      if (size > 0) {
        const previous = blocks.get(addr)
        if (previous !== undefined) {
          // The address was handed out again, so the block before it was freed unrecorded.
          reusedLive++
          events.push(EventKind.free, previous, 0, 0, device, time)
        }
        const id = nextId++
        blocks.set(addr, id)
        sizes.push(size)
        const op = enclosing[i]!
        let tag = -1
        if (op >= 0) {
          tagged++
          tag = tagOf.get(op) ?? -1
          if (tag < 0) {
            tag = tags.push(opNames[op]!) - 1
            tagOf.set(op, tag)
          }
        }
        events.push(EventKind.alloc, id, size, 0, device, time, -1, tag)
      } else {
        let block = blocks.get(addr)
        if (block === undefined) {
          // Allocated before the profiler started: a stand-in of the freed size, allocated at the
          // start (below). It ends here, so it never enters the live addresses.
          unknownFrees++
          block = nextId++
          sizes.push(-size)
          freedBytes -= size
          let freed = freedBefore.get(device)
          if (!freed) freedBefore.set(device, (freed = []))
          freed.push({ id: block, size: -size, device })
        } else {
          if (sizes[block] !== -size) sizeMismatches++
          blocks.delete(addr)
        }
        events.push(EventKind.free, block, 0, 0, device, time)
      }
    }
    let liveAtEnd = 0
    for (const blocks of live.values()) liveAtEnd += blocks.size

    // What each device held before the profiler's first event, as stand-ins at the start, device by
    // device: the rest of its allocated-before bytes (those no recorded free names, so still live at
    // the end) as one block, since nothing tells how it was split; then the blocks freed later, in
    // the order of their frees.
    const standIns: { id: number; size: number; device: number }[] = []
    let restBlocks = 0
    let restBytes = 0
    let overFreed = 0
    for (const device of [...devices].sort((a, b) => a - b)) {
      const freed = freedBefore.get(device) ?? []
      const before = allocatedBefore.get(device)
      const rest = before === undefined ? 0 : before - freed.reduce((a, b) => a + b.size, 0)
      if (rest > 0) {
        standIns.push({ id: nextId++, size: rest, device })
        restBlocks++
        restBytes += rest
        liveAtEnd++
      } else if (rest < 0 && before! >= 0) overFreed++
      standIns.push(...freed)
    }
    const seeded = standIns.length
    const beforeTag = seeded > 0 ? tags.push(BEFORE_PROFILER_TAG) - 1 : -1
    const columns = allocateEvents(seeded + events.length)
    standIns.forEach((b, i) => writeEvent(columns, i, EventKind.alloc, b.id, b.size, 0, b.device, 0, -1, beforeTag))
    copyEvents(events.view(), 0, events.length, columns, seeded)

    const warnings: string[] = []
    if (this.hostEvents > 0) warnings.push(`${this.hostEvents} host (CPU) memory events were left out: vramscope replays GPU memory`)
    if (this.otherDeviceEvents > 0) warnings.push(`${this.otherDeviceEvents} memory events of devices other than CUDA were left out`)
    if (unknownFrees > 0)
      warnings.push(
        `${unknownFrees === 1 ? '1 free of an address' : `${plural(unknownFrees, 'free')} of addresses`} with no live allocation (of ${unknownFrees === 1 ? 'a block' : 'blocks'} allocated before the profiler started): ` +
          `each block stands in as an allocation of the freed size at the start of the trace, tagged "${BEFORE_PROFILER_TAG}", freed where the free was recorded`,
      )
    if (reusedLive > 0) warnings.push(`${reusedLive} allocations returned an address that was still live; a free of the older block was assumed`)
    if (sizeMismatches > 0) warnings.push(`${sizeMismatches} frees gave a size other than their allocation's`)
    const before = [...allocatedBefore.values()].reduce((a, b) => a + b, 0)
    if (before > 0) {
      const parts: string[] = []
      if (freedBytes > 0) parts.push(`the ${plural(unknownFrees, 'block')} freed later (${freedBytes} bytes)`)
      if (restBytes > 0)
        parts.push(
          `${plural(restBlocks, 'block')} of ${restBytes} bytes${restBlocks > 1 ? ' in all' : ''} that no recorded free names, allocated at the start of the trace and never freed (one per device, as nothing records how ${restBlocks > 1 ? 'they were' : 'it was'} split)`,
        )
      warnings.push(
        `${before} bytes were allocated before the profiler's first memory event (its Total Allocated less its Bytes); every replay starts holding them: ${parts.join(', and ')}, tagged "${BEFORE_PROFILER_TAG}"`,
      )
    }
    if (overFreed > 0)
      warnings.push(
        `on ${plural(overFreed, 'device')} the frees of blocks allocated before the profiler started free more than the first event's Total Allocated says was allocated then: the profiler's figures disagree, and no block stands in for the rest`,
      )
    if (!sorted) warnings.push("the memory events are not in time order in the file (the profiler writes each thread's apart); they were sorted by time")
    if (n === 0) warnings.push('the trace holds no CUDA memory events: record it with torch.profiler.profile(profile_memory=True) and CUDA activity')

    const properties: Record<string, string> = {
      'kineto.trace_events': String(this.traceEvents),
      'kineto.memory_events': String(n),
      'kineto.host_events': String(this.hostEvents),
      'kineto.other_device_events': String(this.otherDeviceEvents),
      'kineto.unknown_frees': String(unknownFrees),
      'kineto.stand_in_allocs': String(seeded),
      'kineto.stand_in_bytes': String(freedBytes + restBytes),
      'kineto.live_at_end': String(liveAtEnd),
      'kineto.reserved_points': String(reservedPoints),
      'kineto.cpu_ops': String(this.ops.length),
      'kineto.tagged_allocs': String(tagged),
    }
    if (allocatedBefore.size > 0) properties['kineto.allocated_before'] = String(before)
    if (this.gzip) properties['kineto.gzip'] = 'true'
    if (peakReserved !== undefined) properties['kineto.peak_reserved'] = String(peakReserved)
    if (peakByDevice.size > 1) for (const [d, peak] of peakByDevice) properties[`kineto.peak_reserved.cuda:${d}`] = String(peak)
    for (const key of [
      'schemaVersion',
      'trace_id',
      'profile_memory',
      'with_stack',
      'record_shapes',
      'cuda_driver_version',
      'cuda_runtime_version',
      'baseTimeNanoseconds',
    ]) {
      const v = this.fields[key]
      if (typeof v === 'number' || (typeof v === 'string' && v.length <= 256)) properties[`kineto.${key}`] = String(v)
    }
    // The GPU the profiler saw (the first device of the events), for the device rule.
    let gpu: string | undefined
    const first = devices.size > 0 ? Math.min(...devices) : 0
    const props = Array.isArray(this.fields['deviceProperties']) ? (this.fields['deviceProperties'] as Record<string, unknown>[]) : []
    const seen = props.find((p) => typeof p === 'object' && p !== null && p['id'] === first)
    if (seen) {
      const bytes = seen['totalGlobalMem']
      const name = seen['name']
      if (typeof bytes === 'number' && Number.isSafeInteger(bytes) && bytes > 0) {
        properties[DEVICE_PROPERTIES.bytes] = String(bytes)
        properties[DEVICE_PROPERTIES.from] = 'deviceProperties'
      }
      if (typeof name === 'string' && name.length > 0 && name.length <= 256) {
        properties[DEVICE_PROPERTIES.name] = name
        gpu = name
      }
    }
    // The profiler recorded nothing before its first event: the curve starts after the stand-ins.
    const recordedReserved: RecordedSeries | undefined =
      seriesIndex.length > 0 ? { index: Uint32Array.from(seriesIndex, (i) => i + seeded), bytes: Float64Array.from(seriesBytes) } : undefined
    return {
      trace: {
        meta: { source: KINETO_SOURCE, origin: this.origin, ...(gpu && { gpu }), warnings, properties },
        events: columns,
        tables: { streams: ['0'], frames: [], stacks: [], tags, markers: [] },
        ...(recordedReserved && { recordedReserved }),
      },
      gzip: this.gzip,
      traceEvents: this.traceEvents,
      memoryEvents: n,
      hostEvents: this.hostEvents,
      otherDeviceEvents: this.otherDeviceEvents,
      unknownFrees,
      standInAllocs: seeded,
      liveAtEnd,
      peakReserved,
      recordedReserved,
    }
  }
}

function intern(index: Map<string, number>, key: string): number {
  let i = index.get(key)
  if (i === undefined) {
    i = index.size
    index.set(key, i)
  }
  return i
}
