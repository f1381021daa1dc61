// Growable request-event columns: importers and the streaming trace writer append one event at a
// time without knowing the count in advance, then take the filled part as TraceEvents. The row
// write and the row copy are exported for stores that grow otherwise (the PyTorch importer's chunks).
import { allocateEvents, sliceEvents, type EventKind, type TraceEvents } from './model.ts'

/** Writes one event into row `i` of `c`. */
export function writeEvent(c: TraceEvents, i: number, kind: number, id: number, size: number, stream: number, device: number, time: number, stack: number, tag: number): void {
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
