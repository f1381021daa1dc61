// Growable event columns: importers and the streaming trace writer append one event at a time
// without knowing the count in advance. EventsBuilder grows by copying and gives the filled part as
// TraceEvents; EventChunks and LayoutChunks (request and layout events: the PyTorch importer's, and
// the Nsight Systems importer's layout) grow by whole chunks, never copying, and are copied out
// once at the end, letting each chunk go as they go, so a gigabyte import does not hold its columns
// twice over.
import { allocateEvents, copyEventRow, sliceEvents, type EventKind, type TraceEvents } from './model.ts'
import type { LayoutTrace } from '../../../src-shared/layout.ts'

/** Writes one event into row `i` of `c`. */
export function writeEvent(
  c: TraceEvents,
  i: number,
  kind: number,
  id: number,
  size: number,
  stream: number,
  device: number,
  time: number,
  stack: number,
  tag: number,
): void {
  c.kind[i] = kind
  c.id[i] = id
  c.size[i] = size
  c.stream[i] = stream
  c.device[i] = device
  c.time[i] = time
  c.stack[i] = stack
  c.tag[i] = tag
}

/** Copies rows [from, to) of `source` into `target` from row `at`. */
export function copyEvents(source: TraceEvents, from: number, to: number, target: TraceEvents, at: number): void {
  target.kind.set(source.kind.subarray(from, to), at)
  target.id.set(source.id.subarray(from, to), at)
  target.size.set(source.size.subarray(from, to), at)
  target.stream.set(source.stream.subarray(from, to), at)
  target.device.set(source.device.subarray(from, to), at)
  target.time.set(source.time.subarray(from, to), at)
  target.stack.set(source.stack.subarray(from, to), at)
  target.tag.set(source.tag.subarray(from, to), at)
}

export class EventsBuilder {
  private columns: TraceEvents
  length = 0

  constructor(capacity = 4096) {
    this.columns = allocateEvents(Math.max(16, capacity))
  }

  get capacity(): number {
    return this.columns.kind.length
  }

  push(kind: EventKind, id: number, size: number, stream: number, device: number, time: number, stack = -1, tag = -1): void {
    if (this.length === this.columns.kind.length) this.grow(this.length * 2)
    writeEvent(this.columns, this.length++, kind, id, size, stream, device, time, stack, tag)
  }

  /** Appends rows [from, to) of `events`. */
  append(events: TraceEvents, from = 0, to = events.kind.length): void {
    const n = to - from
    if (n <= 0) return
    if (this.length + n > this.columns.kind.length) this.grow(Math.max(this.length + n, this.length * 2))
    copyEvents(events, from, to, this.columns, this.length)
    this.length += n
  }

  /** The filled rows as views (valid until the next push or clear). */
  view(): TraceEvents {
    const c = this.columns
    const n = this.length
    return {
      kind: c.kind.subarray(0, n),
      id: c.id.subarray(0, n),
      size: c.size.subarray(0, n),
      stream: c.stream.subarray(0, n),
      device: c.device.subarray(0, n),
      time: c.time.subarray(0, n),
      stack: c.stack.subarray(0, n),
      tag: c.tag.subarray(0, n),
    }
  }

  /** The filled rows as new arrays of exactly `length`. */
  build(): TraceEvents {
    return sliceEvents(this.columns, this.length)
  }

  clear(): void {
    this.length = 0
  }

  private grow(capacity: number): void {
    const next = allocateEvents(capacity)
    copyEvents(this.columns, 0, this.length, next, 0)
    this.columns = next
  }
}

/** Rows per chunk of the column stores below: growing never copies, and the final copy frees as it goes. */
const CHUNK_SHIFT = 12
export const CHUNK_ROWS = 1 << CHUNK_SHIFT
const CHUNK_MASK = CHUNK_ROWS - 1
/** The finishing copies let the event loop in after this many chunks (about 10 ms of copying). */
export const YIELD_CHUNKS = 128

const EMPTY_EVENTS = allocateEvents(0)

/**
 * Request events in chunks of typed-array columns (TraceEvents), appended one at a time. The first
 * chunk starts at `firstRows` (a guess from the file's size, so a small file does not pay for
 * zeroing a whole chunk) and doubles up to CHUNK_ROWS before the next chunk is added.
 */
export class EventChunks {
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
    for (let row = from; row < to;) {
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
  for (let i = from, j = at; i < to; i++, j++) copyEventRow(source, i, target, j)
}

interface LayoutChunk {
  op: Uint8Array
  address: Float64Array
  size: Float64Array
  requested: Float64Array
  stream: Float64Array
  aux: Uint32Array
  time: Float64Array
  /** Request events of the layout's device pushed before this row (LayoutChunks' `requests`). */
  before: Uint32Array
}

/** Bytes a row of eventsAt's and layoutAt's columns takes. */
const EVENT_ROW_BYTES = 2 * 8 + 4 * 4 + 2 + 1
const LAYOUT_ROW_BYTES = 5 * 8 + 4 + 4 + 1

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
/** Event columns of n rows at byte `at` of `buffer`, one ArrayBuffer for all (eventChunk's layout). */
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

/** Layout columns of n rows at byte `at` of `buffer`, one ArrayBuffer for all (layoutChunk's layout). */
function layoutAt(buffer: ArrayBuffer, at: number, n: number): LayoutChunk {
  return {
    op: new Uint8Array(buffer, at + 48 * n, n),
    address: new Float64Array(buffer, at, n),
    size: new Float64Array(buffer, at + 8 * n, n),
    requested: new Float64Array(buffer, at + 16 * n, n),
    stream: new Float64Array(buffer, at + 24 * n, n),
    aux: new Uint32Array(buffer, at + 40 * n, n),
    before: new Uint32Array(buffer, at + 44 * n, n),
    time: new Float64Array(buffer, at + 32 * n, n),
  }
}

/** Layout events in chunks (sized as EventChunks'); addresses kept as numbers (exact: device addresses are below 2^53). */
export class LayoutChunks {
  readonly chunks: LayoutChunk[] = []
  length = 0
  private capacity = 0
  private last: LayoutChunk = EMPTY_LAYOUT

  /**
   * `requests`: the request events of the layout's device, whose count at each push each row keeps
   * (`before`): what places the row on the request events at the end (recordedEvents).
   */
  constructor(
    private readonly firstRows = CHUNK_ROWS,
    private readonly requests?: { readonly length: number },
  ) {}

  push(op: number, address: number, size: number, requested: number, stream: number, time: number, aux = 0): void {
    const row = this.length
    if (row === this.capacity) this.addRoom()
    const c = this.last
    const i = row & CHUNK_MASK
    if (this.requests) c.before[i] = this.requests.length
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
      chunk.before.set(c.before.subarray(0, n))
      chunk.time.set(c.time.subarray(0, n))
      this.chunks[0] = chunk
      this.capacity = chunk.op.length
    } else {
      this.chunks.push(chunk)
      this.capacity += chunk.op.length
    }
    this.last = chunk
  }

  setAux(row: number, aux: number): void {
    this.chunks[row >>> CHUNK_SHIFT]!.aux[row & CHUNK_MASK] = aux
  }

  /**
   * Appends every row to `layout` at row `at`, times made ns from t0 (times in µs; `nsPerUnit` 1 for
   * times already in ns); returns the row after them. Lets the chunks go.
   */
  *moveTo(layout: LayoutTrace, at: number, t0: number, nsPerUnit = 1000, before?: Uint32Array): Generator<void, number> {
    for (let k = 0; k < this.chunks.length; k++) {
      if (k % YIELD_CHUNKS === YIELD_CHUNKS - 1) yield
      const c = this.chunks[k]!
      const n = Math.min(CHUNK_ROWS, this.length - k * CHUNK_ROWS)
      // Each row's count of request events before it, where the caller keeps them (`before`, as `layout`'s rows).
      if (before) before.set(c.before.subarray(0, n), at)
      layout.op.set(c.op.subarray(0, n), at)
      toAddresses(c.address, 0, n, layout.address, at)
      layout.size.set(c.size.subarray(0, n), at)
      layout.requested.set(c.requested.subarray(0, n), at)
      layout.stream.set(c.stream.subarray(0, n), at)
      layout.aux.set(c.aux.subarray(0, n), at)
      toNanoseconds(c.time, 0, n, layout.time, at, t0, nsPerUnit)
      this.chunks[k] = EMPTY_LAYOUT
      at += n
    }
    return at
  }
}

/** Times in µs (or units of `nsPerUnit` ns; NaN: none, placed at t = 0) into ns from t0, as the traces hold them. One function for every column, so that it is optimized early. */
export function toNanoseconds(from: Float64Array, start: number, end: number, into: Float64Array, at: number, t0: number, nsPerUnit = 1000): void {
  for (let i = start, j = at; i < end; i++, j++) {
    const t = from[i]!
    into[j] = t !== t ? 0 : (t - t0) * nsPerUnit
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
