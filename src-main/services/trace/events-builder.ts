// Growable request-event columns: importers and the streaming trace writer append one event at a
// time without knowing the count in advance, then take the filled part as TraceEvents.
import { allocateEvents, sliceEvents, type EventKind, type TraceEvents } from './model.ts'

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
    const c = this.columns
    const i = this.length++
    c.kind[i] = kind
    c.id[i] = id
    c.size[i] = size
    c.stream[i] = stream
    c.device[i] = device
    c.time[i] = time
    c.stack[i] = stack
    c.tag[i] = tag
  }

  /** Appends rows [from, to) of `events`. */
  append(events: TraceEvents, from = 0, to = events.kind.length): void {
    const n = to - from
    if (n <= 0) return
    if (this.length + n > this.columns.kind.length) this.grow(Math.max(this.length + n, this.length * 2))
    const c = this.columns
    const at = this.length
    c.kind.set(events.kind.subarray(from, to), at)
    c.id.set(events.id.subarray(from, to), at)
    c.size.set(events.size.subarray(from, to), at)
    c.stream.set(events.stream.subarray(from, to), at)
    c.device.set(events.device.subarray(from, to), at)
    c.time.set(events.time.subarray(from, to), at)
    c.stack.set(events.stack.subarray(from, to), at)
    c.tag.set(events.tag.subarray(from, to), at)
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
    const c = this.columns
    next.kind.set(c.kind.subarray(0, this.length))
    next.id.set(c.id.subarray(0, this.length))
    next.size.set(c.size.subarray(0, this.length))
    next.stream.set(c.stream.subarray(0, this.length))
    next.device.set(c.device.subarray(0, this.length))
    next.time.set(c.time.subarray(0, this.length))
    next.stack.set(c.stack.subarray(0, this.length))
    next.tag.set(c.tag.subarray(0, this.length))
    this.columns = next
  }
}
