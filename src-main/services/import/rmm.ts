// Imports the CSV log of RMM's logging_resource_adaptor into a request trace (source "rmm-log").
// RMM writes the header `Thread,Time,Action,Pointer,Size,Stream`, then one line per call: the
// thread id, the time (spdlog's %H:%M:%S.%f, or seconds in some versions and tools), `allocate`,
// `allocate failure` or `free` (`deallocate` in some), the pointer in hex (with or without 0x,
// `(nil)` for none), the byte count and the stream. Logs are read leniently and line by line
// (blank lines, \r\n, spaces, quotes are fine), so a log of any size imports in bounded memory;
// a line that cannot be understood is reported with its number, and more than `maxBadLines` of
// them fail the import listing the first ones.
import { createReadStream } from 'node:fs'
import { stat } from 'node:fs/promises'

import { InputError } from '../input-error.ts'
import { EventsBuilder } from '../trace/events-builder.ts'
import { EventKind, type RequestTrace } from '../trace/model.ts'

export const RMM_HEADER = 'Thread,Time,Action,Pointer,Size,Stream'
const DEFAULT_COLUMNS = ['thread', 'time', 'action', 'pointer', 'size', 'stream'] as const
type Column = (typeof DEFAULT_COLUMNS)[number]
/** Field index of each column (-1 when the log lacks it) and the fields a line needs. */
type ColumnIndex = Record<Column, number> & { needed: number }

function columnIndex(indexOf: (c: Column) => number): ColumnIndex {
  const index = Object.fromEntries(DEFAULT_COLUMNS.map((c) => [c, indexOf(c)])) as Record<Column, number>
  return { ...index, needed: Math.max(...Object.values(index)) + 1 }
}

/** A line longer than this is damage (RMM lines are under 100 bytes), never buffered whole. */
const MAX_LINE_CHARS = 64 * 1024
/** Binary data (a NUL byte) this early means the file is not a text log at all. */
const BINARY_SNIFF_BYTES = 4096
/** How many line numbers a warning or error lists. */
const LISTED = 5

export type RmmLogErrorCode = 'unreadable' | 'empty' | 'binary' | 'no-header' | 'bad-lines'

export interface BadLine {
  line: number
  problem: string
  /** The line as read, cut to 120 characters. */
  text: string
}

export class RmmLogError extends InputError {
  constructor(
    file: string,
    readonly code: RmmLogErrorCode,
    /** 1-based line number the problem is on (the first bad line for 'bad-lines'). */
    readonly line: number | undefined,
    problem: string,
    readonly badLines: BadLine[] = [],
  ) {
    super(file, line === undefined ? '' : `line ${line}`, problem)
  }
}

export interface RmmImportOptions {
  /** Lines that cannot be understood and are skipped with a warning; one more fails (default 10). */
  maxBadLines?: number
  /** The device the log's resource allocated on (RMM logs do not say; default 0). */
  device?: number
  /** What meta.origin says (default: the path as given). */
  origin?: string
  onProgress?: (progress: { bytesDone: number; bytesTotal: number; lines: number }) => void
  signal?: AbortSignal
}

export interface RmmImport {
  trace: RequestTrace
  /** Lines in the file, blank ones included. */
  lines: number
  /** Lines skipped because they could not be understood (at most maxBadLines). */
  badLines: BadLine[]
  /** Frees of pointers this log never allocated (or already freed); skipped. */
  unknownFrees: number
  /** Allocations still live at the end of the log. */
  liveAtEnd: number
}

/** Reads and imports an RMM log file line by line. */
export async function importRmmLog(path: string, options: RmmImportOptions = {}): Promise<RmmImport> {
  let bytesTotal: number
  try {
    bytesTotal = (await stat(path)).size
  } catch (e) {
    throw new RmmLogError(path, 'unreadable', undefined, (e as Error).message)
  }
  const parser = new RmmLogParser(path, options)
  const stream = createReadStream(path, { highWaterMark: 1 << 20, signal: options.signal })
  let bytesDone = 0
  try {
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      parser.push(chunk)
      bytesDone += chunk.length
      options.onProgress?.({ bytesDone, bytesTotal, lines: parser.lineCount })
    }
  } catch (e) {
    if (e instanceof RmmLogError || options.signal?.aborted) throw e
    throw new RmmLogError(path, 'unreadable', undefined, (e as Error).message)
  } finally {
    stream.destroy()
  }
  return parser.finish()
}

/** Imports a whole log held in memory (tests, fuzzing, logs that arrive over IPC). */
export function parseRmmLog(bytes: Uint8Array, file: string, options: RmmImportOptions = {}): RmmImport {
  const parser = new RmmLogParser(file, options)
  parser.push(bytes)
  return parser.finish()
}

type Action = 'alloc' | 'failure' | 'free'

const ACTIONS = new Map<string, Action>([
  ['allocate', 'alloc'],
  ['alloc', 'alloc'],
  ['allocate failure', 'failure'],
  ['allocation failure', 'failure'],
  ['alloc failure', 'failure'],
  ['free', 'free'],
  ['deallocate', 'free'],
  ['dealloc', 'free'],
])

const CLOCK_TIME = /^(\d{1,2}):(\d{2}):(\d{2})(?:[.:](\d{1,9}))?$/
const SECONDS_TIME = /^(\d{1,12})(?:\.(\d{1,9}))?$/
const HEX = /^[0-9a-fA-F]{1,16}$/
const DECIMAL = /^\d{1,16}$/
const NS_PER_DAY = 86_400e9

/** A time as whole seconds and nanoseconds, so epoch seconds keep their microseconds exactly. */
interface Instant {
  seconds: number
  nanos: number
}

class RmmLogParser {
  private readonly decoder = new TextDecoder('utf-8')
  private readonly events = new EventsBuilder(1 << 14)
  private readonly streams = new Map<string, number>()
  private readonly threads = new Map<string, number>()
  /** Live blocks: normalized pointer to block id; sizes by block id. */
  private readonly live = new Map<number | string, number>()
  private readonly sizes: number[] = []
  private readonly streamByText = new Map<string, number>()
  private readonly threadByText = new Map<string, number>()
  private readonly badLines: BadLine[] = []
  private readonly maxBadLines: number
  private readonly device: number
  private columns: ColumnIndex | undefined
  private headerFields = 0
  private timeFormat: 'clock' | 'seconds' | undefined
  private firstTime: Instant | undefined
  private firstTimeText = ''
  private dayOffset = 0
  private previousClock = -1
  private lastTime = 0
  private nextId = 0
  private bytesSeen = 0
  private partial = ''
  private skippingLongLine = false
  lineCount = 0
  private readonly counts = {
    unknownFrees: 0,
    nullFrees: 0,
    reusedLive: 0,
    sizeMismatches: 0,
    backwards: 0,
    repeatedHeaders: 0,
    nullAllocations: 0,
    failures: 0,
  }
  private readonly firstLines = { unknownFrees: [] as number[], reusedLive: [] as number[], backwards: [] as number[], repeatedHeaders: [] as number[] }
  private readonly warnings: string[] = []

  constructor(
    private readonly file: string,
    private readonly options: RmmImportOptions,
  ) {
    this.maxBadLines = Math.max(0, options.maxBadLines ?? 10)
    this.device = options.device ?? 0
  }

  push(bytes: Uint8Array): void {
    if (this.bytesSeen < BINARY_SNIFF_BYTES) {
      const sniff = bytes.subarray(0, BINARY_SNIFF_BYTES - this.bytesSeen)
      const nul = sniff.indexOf(0)
      if (nul >= 0) {
        const before = this.partial + this.decoder.decode(sniff.subarray(0, nul), { stream: true })
        const line = this.lineCount + before.split('\n').length
        throw new RmmLogError(this.file, 'binary', line, `binary data (a NUL byte at byte ${this.bytesSeen + nul}): this is not an RMM CSV log`)
      }
    }
    this.bytesSeen += bytes.length
    this.consume(this.decoder.decode(bytes, { stream: true }))
  }

  private consume(text: string): void {
    let start = 0
    for (;;) {
      const newline = text.indexOf('\n', start)
      if (newline < 0) break
      const piece = text.slice(start, newline)
      start = newline + 1
      if (this.skippingLongLine) {
        this.skippingLongLine = false
        continue
      }
      this.line(this.partial.length > 0 ? this.partial + piece : piece)
      this.partial = ''
    }
    if (this.skippingLongLine) return
    this.partial += text.slice(start)
    if (this.partial.length > MAX_LINE_CHARS) {
      // line() refuses it for its length; the rest of it, up to the newline, is skipped unread.
      this.line(this.partial)
      this.partial = ''
      this.skippingLongLine = true
    }
  }

  finish(): RmmImport {
    this.consume(this.decoder.decode())
    if (this.partial.length > 0 && !this.skippingLongLine) this.line(this.partial)
    this.partial = ''
    if (this.columns === undefined) {
      if (this.bytesSeen === 0) throw new RmmLogError(this.file, 'empty', 1, `the file is empty; an RMM log starts with the header ${RMM_HEADER}`)
      throw new RmmLogError(this.file, 'empty', 1, `the file holds only blank lines (${this.lineCount}); an RMM log starts with the header ${RMM_HEADER}`)
    }
    this.summarizeWarnings()
    const streams = [...this.streams.keys()]
    const tags = [...this.threads.keys()]
    const properties: Record<string, string> = {
      lines: String(this.lineCount),
      badLines: String(this.badLines.length),
      unknownFrees: String(this.counts.unknownFrees),
      allocationFailures: String(this.counts.failures),
      liveAtEnd: String(this.live.size),
      threads: String(this.threads.size),
    }
    if (this.timeFormat) {
      properties['timeFormat'] = this.timeFormat === 'clock' ? 'HH:MM:SS.ffffff' : 'seconds'
      properties['firstTime'] = this.firstTimeText
    }
    return {
      trace: {
        meta: { source: 'rmm-log', origin: this.options.origin ?? this.file, warnings: this.warnings, properties },
        events: this.events.build(),
        tables: { streams, frames: [], stacks: [], tags, markers: [] },
      },
      lines: this.lineCount,
      badLines: this.badLines,
      unknownFrees: this.counts.unknownFrees,
      liveAtEnd: this.live.size,
    }
  }

  private line(raw: string): void {
    const number = ++this.lineCount
    let text = raw.endsWith('\r') ? raw.slice(0, -1) : raw
    if (number === 1 && text.charCodeAt(0) === 0xfeff) text = text.slice(1)
    if (text.length > MAX_LINE_CHARS) {
      if (this.columns === undefined)
        throw new RmmLogError(this.file, 'no-header', number, `the first line is longer than ${MAX_LINE_CHARS} characters: this is not an RMM CSV log`)
      return this.bad(number, `a line longer than ${MAX_LINE_CHARS} characters`, text)
    }
    if (text.trim().length === 0) return
    if (this.columns === undefined) {
      this.header(text, number)
      return
    }
    const fields = splitFields(text)
    if (fields === undefined) return this.bad(number, 'an unclosed quote', text)
    if (fields[this.columns.action]?.toLowerCase() === 'action' && isHeader(fields)) {
      this.counts.repeatedHeaders++
      this.firstLines.repeatedHeaders.push(number)
      return
    }
    const problem = this.record(fields, number)
    if (problem !== undefined) this.bad(number, problem, text)
  }

  private header(text: string, number: number): void {
    // A first line with control characters or undecodable bytes is binary, not a broken header.
    if (/[\u0000-\u0008\u000e-\u001f\ufffd]/.test(text))
      throw new RmmLogError(this.file, 'binary', number, 'binary data (control characters or bytes that are not UTF-8): this is not an RMM CSV log')
    const fields = splitFields(text)
    if (fields && isHeader(fields)) {
      const names = fields.map((f) => f.toLowerCase())
      const columns = columnIndex((c) => names.indexOf(c))
      const missing = (['action', 'pointer', 'size'] as const).filter((c) => columns[c] < 0)
      if (missing.length > 0)
        throw new RmmLogError(this.file, 'no-header', number, `the header lacks ${missing.map(titleCase).join(', ')} (expected ${RMM_HEADER})`)
      if (columns.time < 0) this.warnings.push('the log has no Time column: every event is at time 0')
      this.columns = columns
      this.headerFields = fields.length
      return
    }
    // No header but a line RMM would write: take RMM's column order and say so.
    if (fields && fields.length >= DEFAULT_COLUMNS.length) {
      this.columns = columnIndex((c) => DEFAULT_COLUMNS.indexOf(c))
      this.headerFields = DEFAULT_COLUMNS.length
      if (this.record(fields, number) === undefined) {
        this.warnings.push(`line ${number}: no header line; the columns were taken to be ${RMM_HEADER}`)
        return
      }
      this.columns = undefined
      this.resetAfterProbe()
    }
    throw new RmmLogError(this.file, 'no-header', number, `expected the RMM log header ${RMM_HEADER}, found "${cut(text, 80)}"`)
  }

  /** Undoes what a failed header probe may have recorded. */
  private resetAfterProbe(): void {
    this.events.clear()
    this.streams.clear()
    this.threads.clear()
    this.streamByText.clear()
    this.threadByText.clear()
    this.live.clear()
    this.sizes.length = 0
    this.timeFormat = undefined
    this.firstTime = undefined
    this.nextId = 0
  }

  /** Adds the event of one data line; returns the problem when the line cannot be understood. */
  private record(fields: string[], number: number): string | undefined {
    const columns = this.columns!
    if (fields.length < columns.needed) return `${fields.length} fields, expected ${this.headerFields}`
    if (fields.length > this.headerFields && fields.slice(this.headerFields).some((f) => f.length > 0))
      return `${fields.length} fields, the header has ${this.headerFields}`

    const actionText = fields[columns.action]!
    const action = ACTIONS.get(actionText) ?? ACTIONS.get(actionText.toLowerCase().replace(/[\s_-]+/g, ' '))
    if (action === undefined) return `unknown action "${cut(actionText, 40)}" (expected allocate, allocate failure, free or deallocate)`
    const sizeText = fields[columns.size]!
    if (!DECIMAL.test(sizeText) || Number(sizeText) > Number.MAX_SAFE_INTEGER) return `size "${cut(sizeText, 40)}" is not a byte count`
    const size = Number(sizeText)
    const pointerText = fields[columns.pointer]!
    const pointer = pointerKey(pointerText)
    if (pointer === undefined) return `pointer "${cut(pointerText, 40)}" is not a hexadecimal address`
    const time = this.time(columns.time < 0 ? undefined : fields[columns.time]!, number)
    if (typeof time === 'string') return time
    const streamText = columns.stream < 0 ? '' : fields[columns.stream]!
    let stream = this.streamByText.get(streamText)
    if (stream === undefined) {
      stream = intern(this.streams, streamName(streamText))
      this.streamByText.set(streamText, stream)
    }
    const threadText = columns.thread < 0 ? '' : fields[columns.thread]!
    let tag = this.threadByText.get(threadText)
    if (tag === undefined) {
      tag = threadText === '' ? -1 : intern(this.threads, `thread ${threadText}`)
      this.threadByText.set(threadText, tag)
    }

    if (action === 'failure') {
      this.counts.failures++
      this.events.push(EventKind.oom, 0, size, stream, this.device, time, -1, tag)
      return undefined
    }
    if (action === 'alloc') {
      if (pointer === null) {
        if (size !== 0) return 'allocate with a null pointer (a failed allocation is logged as "allocate failure")'
        this.counts.nullAllocations++
        return undefined
      }
      const previous = this.live.get(pointer)
      if (previous !== undefined) {
        // The address was handed out again, so the block before it was freed unlogged.
        this.counts.reusedLive++
        if (this.firstLines.reusedLive.length < LISTED) this.firstLines.reusedLive.push(number)
        this.events.push(EventKind.free, previous, 0, stream, this.device, time, -1, tag)
      }
      const id = this.nextId++
      this.live.set(pointer, id)
      this.sizes.push(size)
      this.events.push(EventKind.alloc, id, size, stream, this.device, time, -1, tag)
      return undefined
    }
    if (pointer === null) {
      this.counts.nullFrees++
      return undefined
    }
    const block = this.live.get(pointer)
    if (block === undefined) {
      this.counts.unknownFrees++
      if (this.firstLines.unknownFrees.length < LISTED) this.firstLines.unknownFrees.push(number)
      return undefined
    }
    if (this.sizes[block] !== size) this.counts.sizeMismatches++
    this.live.delete(pointer)
    this.events.push(EventKind.free, block, 0, stream, this.device, time, -1, tag)
    return undefined
  }

  /** Nanoseconds since the first event, never decreasing; or the problem with the field. */
  private time(text: string | undefined, number: number): number | string {
    if (text === undefined) return 0
    let instant: Instant
    let clock = -1
    const c = CLOCK_TIME.exec(text)
    const s = c ? null : SECONDS_TIME.exec(text)
    if (c) {
      const [h, m, sec] = [Number(c[1]), Number(c[2]), Number(c[3])]
      if (h > 23 || m > 59 || sec > 60) return `time "${text}" is not a time of day`
      clock = ((h * 60 + m) * 60 + sec) * 1e9 + fractionNanos(c[4])
      instant = { seconds: 0, nanos: clock }
    } else if (s) {
      instant = { seconds: Number(s[1]), nanos: fractionNanos(s[2]) }
    } else {
      return `time "${cut(text, 40)}" is neither HH:MM:SS.ffffff nor seconds`
    }
    const format = c ? 'clock' : 'seconds'
    if (this.timeFormat === undefined) {
      this.timeFormat = format
      this.firstTime = instant
      this.firstTimeText = text
    } else if (this.timeFormat !== format) {
      return `time "${text}" is in ${format === 'clock' ? 'HH:MM:SS.ffffff' : 'seconds'}, the lines before in ${format === 'clock' ? 'seconds' : 'HH:MM:SS.ffffff'}`
    }
    if (clock >= 0) {
      // spdlog writes the time of day only: a jump back of more than 12 hours is the next day, and
      // a jump forward of more than 12 hours just after midnight is a line of the day before.
      let day = this.dayOffset
      if (this.previousClock >= 0 && clock + NS_PER_DAY / 2 < this.previousClock) {
        day = this.dayOffset += NS_PER_DAY
        this.previousClock = clock
      } else if (this.previousClock >= 0 && clock > this.previousClock + NS_PER_DAY / 2 && day > 0) {
        day -= NS_PER_DAY
      } else {
        this.previousClock = clock
      }
      instant = { seconds: 0, nanos: clock + day }
    }
    const first = this.firstTime!
    let ns = (instant.seconds - first.seconds) * 1e9 + (instant.nanos - first.nanos)
    if (ns < this.lastTime) {
      // Threads log a moment apart and out of order; replay needs time that never decreases.
      this.counts.backwards++
      if (this.firstLines.backwards.length < LISTED) this.firstLines.backwards.push(number)
      ns = this.lastTime
    }
    this.lastTime = ns
    return ns
  }

  private bad(line: number, problem: string, text: string): void {
    this.badLines.push({ line, problem, text: cut(text, 120) })
    if (this.badLines.length > this.maxBadLines) {
      const listed = this.badLines.slice(0, LISTED).map((b) => `line ${b.line}: ${b.problem}`)
      const more = this.badLines.length > LISTED ? '; …' : ''
      throw new RmmLogError(
        this.file,
        'bad-lines',
        this.badLines[0]!.line,
        `${this.badLines.length} lines could not be understood, more than the ${this.maxBadLines} tolerated: ${listed.join('; ')}${more}`,
        this.badLines,
      )
    }
  }

  private summarizeWarnings(): void {
    const c = this.counts
    const lines = (list: number[], count: number) => `line${list.length > 1 ? 's' : ''} ${list.join(', ')}${count > list.length ? ', …' : ''}`
    for (const b of this.badLines) this.warnings.push(`line ${b.line}: skipped, ${b.problem}`)
    if (c.unknownFrees > 0)
      this.warnings.push(
        `${c.unknownFrees} frees of pointers not allocated in this log (or freed already) were skipped (${lines(this.firstLines.unknownFrees, c.unknownFrees)})`,
      )
    if (c.reusedLive > 0)
      this.warnings.push(
        `${c.reusedLive} allocations returned a pointer that was still live; a free of the older block was assumed (${lines(this.firstLines.reusedLive, c.reusedLive)})`,
      )
    if (c.nullFrees > 0) this.warnings.push(`${c.nullFrees} frees of a null pointer were skipped`)
    if (c.nullAllocations > 0) this.warnings.push(`${c.nullAllocations} zero-byte allocations that returned a null pointer were skipped`)
    if (c.sizeMismatches > 0) this.warnings.push(`${c.sizeMismatches} frees gave a size other than their allocation's`)
    if (c.backwards > 0)
      this.warnings.push(
        `${c.backwards} lines have a time before the line above; they were kept in file order at the time above (${lines(this.firstLines.backwards, c.backwards)})`,
      )
    if (c.repeatedHeaders > 0)
      this.warnings.push(`the header appears again (${lines(this.firstLines.repeatedHeaders, c.repeatedHeaders)}): logs were concatenated; read as one`)
    if (this.events.length === 0) this.warnings.push('the log holds no allocations or frees')
  }
}

/** CSV fields, trimmed and unquoted; undefined for an unclosed quote. */
function splitFields(line: string): string[] | undefined {
  if (!line.includes('"')) return line.split(',').map((f) => f.trim())
  const fields: string[] = []
  let i = 0
  for (;;) {
    while (line[i] === ' ' || line[i] === '\t') i++
    let value = ''
    if (line[i] === '"') {
      i++
      for (;;) {
        if (i >= line.length) return undefined
        if (line[i] === '"') {
          if (line[i + 1] === '"') {
            value += '"'
            i += 2
            continue
          }
          i++
          break
        }
        value += line[i++]
      }
      const comma = line.indexOf(',', i)
      // Text between a closing quote and the comma is kept, as lenient CSV readers do.
      value += (comma < 0 ? line.slice(i) : line.slice(i, comma)).trim()
      i = comma < 0 ? line.length : comma
    } else {
      const comma = line.indexOf(',', i)
      value = (comma < 0 ? line.slice(i) : line.slice(i, comma)).trim()
      i = comma < 0 ? line.length : comma
    }
    fields.push(value)
    if (i >= line.length) return fields
    i++ // the comma
  }
}

function isHeader(fields: string[]): boolean {
  const names = new Set(fields.map((f) => f.toLowerCase()))
  return names.has('action') && (names.has('pointer') || names.has('size'))
}

/**
 * A pointer as a map key: its value as a number when exact (every address below 2^53, which is
 * all of them on today's GPUs), else its lowercase hex; null for a null pointer; undefined when
 * the text is not hex.
 */
function pointerKey(text: string): number | string | null | undefined {
  let t = text
  if (t.length > 1 && t[0] === '0' && (t[1] === 'x' || t[1] === 'X')) t = t.slice(2)
  if (!HEX.test(t)) {
    const lower = text.toLowerCase()
    return lower === '(nil)' || lower === 'nil' || lower === 'null' || lower === 'nullptr' ? null : undefined
  }
  const value = parseInt(t, 16)
  if (value === 0) return null
  return value <= Number.MAX_SAFE_INTEGER ? value : t.toLowerCase().replace(/^0+/, '')
}

/** "0" for the default stream, 0x-prefixed lowercase hex for others, the text itself otherwise. */
function streamName(text: string): string {
  if (text === '') return '0'
  const key = pointerKey(text)
  if (key === null) return '0'
  if (key === undefined) return text
  return `0x${typeof key === 'number' ? key.toString(16) : key}`
}

function fractionNanos(digits: string | undefined): number {
  if (!digits) return 0
  return Number(digits.padEnd(9, '0'))
}

function intern(index: Map<string, number>, key: string): number {
  let i = index.get(key)
  if (i === undefined) {
    i = index.size
    index.set(key, i)
  }
  return i
}

function cut(text: string, length: number): string {
  return text.length > length ? `${text.slice(0, length)}…` : text
}

function titleCase(s: string): string {
  return s[0]!.toUpperCase() + s.slice(1)
}
