// Trace files on disk (docs/trace-format.md): writeTrace saves a whole trace, readTrace opens one
// with progress, TraceWriter streams a recording to disk as it happens so that a recorder killed
// at any moment leaves a file that opens with every event up to its last flush (at most
// flushIntervalMs old). The byte-level format lives in schema.ts, encoder.ts and decoder.ts.
import { open, stat } from 'node:fs/promises'

import { checkTraceStart, decodeTrace, TraceFileError, TRACE_START_BYTES, type DecodeProgress, type TraceFileContents } from './decoder.ts'
import { encodeChunk, encodeEvents, encodeFrames, encodeMetaChunk, encodeNames, encodeStacks, encodeTrace, metaRows, SectionCounter } from './encoder.ts'
import { MetaKey } from './schema.ts'
import { concatBytes } from '../../../src-shared/bytes.ts'
import { EventsBuilder } from './events-builder.ts'
import { notARegularFile } from '../input-error.ts'
import { writeFailureReason, writeFileAtomically } from '../output-file.ts'
import type { LayoutOp } from '../../../src-shared/layout.ts'
import type { EventKind, Frame, RequestTrace, TraceEvents, TraceMeta } from './model.ts'
import type { StrategyResult } from '../../../src-shared/results.ts'

export { TraceFileError, decodeTrace, type DecodeProgress, type TraceFileContents, type TraceFileErrorCode, type TraceFileInfo } from './decoder.ts'
export { encodeTrace } from './encoder.ts'
export { FORMAT_VERSION, TRACE_FILE_EXTENSIONS } from './schema.ts'

/** Bytes read per call: progress reports this often, and a huge file never blocks long. */
const READ_PIECE = 8 << 20

export interface ReadTraceOptions {
  onProgress?: (progress: DecodeProgress) => void
  signal?: AbortSignal
}

/** Opens a trace file. Throws TraceFileError for anything wrong with the file, naming where. */
export async function readTrace(path: string, options: ReadTraceOptions = {}): Promise<TraceFileContents> {
  let handle
  try {
    const problem = notARegularFile(await stat(path))
    if (problem) throw new TraceFileError(path, 'unreadable', problem)
    handle = await open(path, 'r')
  } catch (e) {
    if (e instanceof TraceFileError) throw e
    throw new TraceFileError(path, 'unreadable', (e as Error).message)
  }
  let bytes: Uint8Array
  try {
    const { size } = await handle.stat()
    // The start first: a file that is not a trace is refused at byte 0 before its size is allocated.
    const start = new Uint8Array(Math.min(size, TRACE_START_BYTES))
    const { bytesRead: startRead } = await handle.read(start, 0, start.length, 0)
    checkTraceStart(start.subarray(0, startRead), path, size)
    // Not a pooled Buffer: offset 0 keeps every Arrow buffer 8-byte aligned, so columns are views.
    bytes = new Uint8Array(new ArrayBuffer(size))
    let done = 0
    while (done < size) {
      options.signal?.throwIfAborted()
      const { bytesRead } = await handle.read(bytes, done, Math.min(READ_PIECE, size - done), done)
      if (bytesRead === 0) break
      done += bytesRead
      options.onProgress?.({ phase: 'read', bytesDone: done, bytesTotal: size })
    }
    if (done < size) bytes = bytes.subarray(0, done)
  } catch (e) {
    if (options.signal?.aborted || e instanceof TraceFileError) throw e
    throw new TraceFileError(path, 'unreadable', (e as Error).message)
  } finally {
    await handle.close()
  }
  return decodeTrace(bytes, path, options.onProgress)
}

/**
 * Saves a whole trace (and strategy results). Written to a temporary file beside it and renamed,
 * so `path` holds either the old file or the complete new one, never a part; OutputError when the
 * file system refuses.
 */
export async function writeTrace(path: string, trace: RequestTrace, strategies: StrategyResult[] = []): Promise<void> {
  await writeFileAtomically(path, encodeTrace(trace, strategies))
}

type Handle = Awaited<ReturnType<typeof open>>

async function writeAll(handle: Handle, bytes: Uint8Array): Promise<void> {
  let done = 0
  while (done < bytes.length) {
    const { bytesWritten } = await handle.write(bytes, done, bytes.length - done)
    done += bytesWritten
  }
}

/**
 * A write the file system refused (disk full, file size limit, I/O error). The writer stops; what
 * earlier flushes wrote stays readable (readTrace skips a chunk cut short and warns).
 */
export class TraceWriteError extends Error {
  readonly code: string
  constructor(
    readonly path: string,
    cause: NodeJS.ErrnoException,
    /** Events whose writes had completed: the file holds exactly these. */
    readonly eventsOnDisk: number,
  ) {
    super(`${path}: ${writeFailureReason(cause)}; recording stopped with ${eventsOnDisk} events on disk, which stay readable`, { cause })
    this.code = cause.code ?? 'EIO'
  }
}

export interface TraceWriterOptions {
  /** Longest time an appended event waits before it is written (default 250 ms). */
  flushIntervalMs?: number
  /** Pending events that trigger a flush at once (default 65536, about 2 MiB). */
  flushEvents?: number
}

/**
 * Streams a recording to a trace file. Tables (streams, stacks, tags, markers) grow as events
 * need them; every flush appends the new table rows, then the new events, as complete chunks in
 * one write, so the file on disk is always a valid prefix of the recording. A flush happens every
 * flushIntervalMs (a timer), when flushEvents are pending, and on close. A file whose writer was
 * killed opens with `complete: false` and a warning.
 */
export class TraceWriter {
  private readonly pending: EventsBuilder
  private readonly counter = new SectionCounter()
  private readonly streamIndex = new Map<string, number>()
  private readonly frameIndex = new Map<string, number>()
  private readonly stackIndex = new Map<string, number>()
  private readonly tagIndex = new Map<string, number>()
  private readonly markerIndex = new Map<string, number>()
  private newStreams: string[] = []
  private newFrames: Frame[] = []
  private newStacks: Uint32Array[] = []
  private newTags: string[] = []
  private newMarkers: string[] = []
  private newMeta: Partial<TraceMeta> = { warnings: [], properties: {} }
  // A recorded allocator's layout (recordings: "cuda (recorded)"), streamed like the events.
  private readonly strategyNames = new Set<string>()
  private newStrategies: Pick<StrategyResult, 'name' | 'strategy' | 'params'>[] = []
  private pendingLayout = new Map<string, LayoutRows>()
  private pendingSummaries = new Map<string, Record<string, number>>()
  private written = 0
  private appended = 0
  private writes: Promise<void> = Promise.resolve()
  private failure: Error | undefined
  private closed = false
  private readonly timer: NodeJS.Timeout
  private readonly flushEvents: number

  private constructor(
    readonly path: string,
    private readonly handle: Handle,
    options: TraceWriterOptions,
  ) {
    this.flushEvents = Math.max(1, options.flushEvents ?? 65536)
    this.pending = new EventsBuilder(Math.min(this.flushEvents, 65536))
    const interval = options.flushIntervalMs ?? 250
    this.timer = setInterval(() => void this.flush().catch(() => undefined), interval)
    // A forgotten writer must not keep a process alive; an open recording has its own handles.
    this.timer.unref()
  }

  /** Creates (or truncates) `path` and writes the trace's meta section at once. */
  static async create(path: string, meta: Partial<TraceMeta> & { source: string }, options: TraceWriterOptions = {}): Promise<TraceWriter> {
    const handle = await open(path, 'w')
    const writer = new TraceWriter(path, handle, options)
    const first = encodeMetaChunk(meta, 'stream')
    writer.counter.add('meta', metaRows(meta).key.length)
    writer.enqueue(first)
    await writer.writes
    return writer
  }

  /** Events appended so far (written or pending). */
  get eventCount(): number {
    return this.appended
  }

  /** Events on disk (their writes completed). */
  get flushedEventCount(): number {
    return this.written
  }

  stream(name: string): number {
    return intern(this.streamIndex, name, () => this.newStreams.push(name))
  }

  tag(name: string): number {
    return intern(this.tagIndex, name, () => this.newTags.push(name))
  }

  marker(name: string): number {
    return intern(this.markerIndex, name, () => this.newMarkers.push(name))
  }

  /** The index of a stack of frames, innermost first; frames and stacks are deduplicated. */
  stack(frames: readonly Frame[]): number {
    const indices = Uint32Array.from(frames, (f) => intern(this.frameIndex, `${f.name}\u0000${f.filename}\u0000${f.line}`, () => this.newFrames.push({ ...f })))
    return intern(this.stackIndex, indices.join(','), () => this.newStacks.push(indices))
  }

  warn(message: string): void {
    this.newMeta.warnings!.push(message)
  }

  property(key: string, value: string): void {
    this.newMeta.properties![key] = value
  }

  /** Declares a strategy whose layout rows follow (a recording's real allocator); names are unique. */
  declareStrategy(name: string, strategy: string, params: Record<string, unknown> = {}): void {
    this.checkOpen()
    if (this.strategyNames.has(name)) throw new RangeError(`TraceWriter(${this.path}): strategy "${name}" declared twice`)
    this.strategyNames.add(name)
    this.newStrategies.push({ name, strategy, params })
    this.pendingLayout.set(name, new LayoutRows())
  }

  /** One layout event of a declared strategy; written with the next flush. */
  appendLayout(name: string, op: LayoutOp, address: bigint, size: number, requested: number, stream: number, time: number, aux = 0): void {
    this.checkOpen()
    const rows = this.pendingLayout.get(name)
    if (!rows) throw new RangeError(`TraceWriter(${this.path}): strategy "${name}" was not declared`)
    rows.push(op, address, size, requested, stream, time, aux)
  }

  /** A declared strategy's summary; the last one given is written with the next flush. */
  summary(name: string, figures: Record<string, number>): void {
    if (!this.strategyNames.has(name)) throw new RangeError(`TraceWriter(${this.path}): strategy "${name}" was not declared`)
    this.pendingSummaries.set(name, { ...figures })
  }

  append(kind: EventKind, id: number, size: number, stream: number, device: number, time: number, stack = -1, tag = -1): void {
    this.checkOpen()
    this.pending.push(kind, id, size, stream, device, time, stack, tag)
    this.appended++
    if (this.pending.length >= this.flushEvents) void this.flush().catch(() => undefined)
  }

  appendEvents(events: TraceEvents): void {
    this.checkOpen()
    const n = events.kind.length
    for (let from = 0; from < n;) {
      const to = Math.min(n, from + this.flushEvents - this.pending.length)
      this.pending.append(events, from, to)
      this.appended += to - from
      from = to
      if (this.pending.length >= this.flushEvents) void this.flush().catch(() => undefined)
    }
  }

  /** Writes everything appended so far; resolves when it is on disk (in the OS's hands). */
  flush(): Promise<void> {
    if (this.failure) return Promise.reject(this.failure)
    const chunks: Uint8Array[] = []
    const meta = this.newMeta
    const metaCount = metaRows(meta).key.length
    if (metaCount > 0) {
      chunks.push(encodeMetaChunk(meta))
      this.counter.add('meta', metaCount)
      this.newMeta = { warnings: [], properties: {} }
    }
    const table = (section: string, rows: number, encode: () => Uint8Array) => {
      if (rows === 0) return
      chunks.push(encode())
      this.counter.add(section, rows)
    }
    table('streams', this.newStreams.length, () => encodeNames('streams', this.newStreams))
    table('frames', this.newFrames.length, () => encodeFrames(this.newFrames))
    table('stacks', this.newStacks.length, () => encodeStacks(this.newStacks))
    table('tags', this.newTags.length, () => encodeNames('tags', this.newTags))
    table('markers', this.newMarkers.length, () => encodeNames('markers', this.newMarkers))
    this.newStreams = []
    this.newFrames = []
    this.newStacks = []
    this.newTags = []
    this.newMarkers = []
    const events = this.pending.length
    table('events', events, () => encodeEvents(this.pending.view()))
    this.pending.clear()
    // Strategies before their layout and summary chunks (docs/trace-format.md, order).
    const declared = this.newStrategies
    table('strategies', declared.length, () =>
      encodeChunk('strategies', declared.length, {
        name: declared.map((d) => d.name),
        strategy: declared.map((d) => d.strategy),
        params: declared.map((d) => JSON.stringify(d.params)),
      }),
    )
    this.newStrategies = []
    for (const [name, rows] of this.pendingLayout) {
      if (rows.length === 0) continue
      table('layout', rows.length, () => encodeChunk('layout', rows.length, rows.columns(), { [MetaKey.strategy]: name }))
      this.pendingLayout.set(name, new LayoutRows())
    }
    for (const [name, figures] of this.pendingSummaries) {
      const keys = Object.keys(figures)
      table('summary', keys.length, () =>
        encodeChunk('summary', keys.length, { key: keys, value: Float64Array.from(keys, (k) => figures[k]!) }, { [MetaKey.strategy]: name }),
      )
    }
    this.pendingSummaries.clear()
    if (chunks.length === 0) return this.writes
    this.enqueue(concatBytes(chunks), events)
    return this.writes
  }

  /** Flushes, writes the end section, syncs and closes. The file is then complete. */
  async close(): Promise<void> {
    if (this.closed) return
    clearInterval(this.timer)
    try {
      await this.flush()
      this.enqueue(this.counter.encodeEnd())
      await this.writes
      await this.handle.sync()
    } finally {
      this.closed = true
      await this.handle.close()
    }
  }

  /** Stops without an end section, as a crash would (tests, and a recording abandoned on error). */
  async abandon(): Promise<void> {
    if (this.closed) return
    clearInterval(this.timer)
    this.closed = true
    await this.writes.catch(() => undefined)
    await this.handle.close()
  }

  private checkOpen(): void {
    if (this.closed) throw new Error(`TraceWriter(${this.path}): already closed`)
    if (this.failure) throw this.failure
  }

  /** Writes run one after another in the order flushes made them. */
  private enqueue(bytes: Uint8Array, events = 0): void {
    this.writes = this.writes.then(async () => {
      if (this.failure) throw this.failure
      try {
        await writeAll(this.handle, bytes)
        this.written += events
      } catch (e) {
        this.failure = new TraceWriteError(this.path, e as NodeJS.ErrnoException, this.written)
        throw this.failure
      }
    })
  }
}

/** Layout rows waiting for a flush. */
class LayoutRows {
  private op: number[] = []
  private address: bigint[] = []
  private size: number[] = []
  private requested: number[] = []
  private stream: number[] = []
  private time: number[] = []
  private aux: number[] = []

  get length(): number {
    return this.op.length
  }

  push(op: number, address: bigint, size: number, requested: number, stream: number, time: number, aux: number): void {
    this.op.push(op)
    this.address.push(address)
    this.size.push(size)
    this.requested.push(requested)
    this.stream.push(stream)
    this.time.push(time)
    this.aux.push(aux)
  }

  columns() {
    return {
      op: Uint8Array.from(this.op),
      address: BigUint64Array.from(this.address),
      size: Float64Array.from(this.size),
      requested: Float64Array.from(this.requested),
      stream: Float64Array.from(this.stream),
      time: Float64Array.from(this.time),
      aux: Uint32Array.from(this.aux),
    }
  }
}

function intern(index: Map<string, number>, key: string, add: () => void): number {
  let i = index.get(key)
  if (i === undefined) {
    i = index.size
    index.set(key, i)
    add()
  }
  return i
}
