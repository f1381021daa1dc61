// What was live at one moment of a trace, grouped by who asked for it and largest first: the
// answer to "what is using my GPU memory" (`vramscope top`). The moment is the peak (of the
// recorded layout's reserved bytes when the input has one, else of the requested bytes), the
// first recorded out-of-memory, or an event index. What is counted is the program's requests
// (requested bytes), or the blocks of one layout (a replayed strategy's, or the recorded one) with
// their rounded sizes. Stacks are shown as everywhere else (src-shared/frames.ts): grouped by their
// headline frame (the user's code), each group with the shown frames of its largest block.
import { frameLabel, StackFilter } from '../../../src-shared/frames.ts'
import { LayoutOp } from '../../../src-shared/layout.ts'
import { sweepLayout } from '../../../src-shared/layout-accounting.ts'
import { isRecorded } from '../../../src-shared/compare.ts'
import type { StrategyResult } from '../../../src-shared/results.ts'
import { InputError } from '../input-error.ts'
import { recordedOnEvents } from '../replay/replay-input.ts'
import { EventKind, type RequestTrace } from '../trace/model.ts'
import { formatBytes } from '../units.ts'
import { describeTrace } from './inspect.ts'

export type TopAt = { kind: 'peak' } | { kind: 'oom' } | { kind: 'event'; event: number }
export type TopBy = 'frame' | 'tag' | 'stream'
export const TOP_GROUPINGS: readonly TopBy[] = ['frame', 'tag', 'stream']

/** A layout placed on request events: what a replay yields, or a recorded layout placed by time. */
export interface LayoutOnEvents {
  name: string
  op: Uint8Array
  address: BigUint64Array
  size: Float64Array | Uint32Array
  requested: Float64Array | Uint32Array
  /** The request event each layout event belongs to. */
  event: Uint32Array
  /** The first event after which its reserved bytes were highest, when known (a replay's summary). */
  peakReservedEvent?: number
}

export interface TopMoment {
  /** The request event after which the live blocks are counted. */
  event: number
  /** Nanoseconds since the trace's first event. */
  time: number
  /** Why this moment: "peak", "oom" or "event". */
  reason: 'peak' | 'oom' | 'event'
  /** In words: "peak reserved of pytorch (recorded) (1.2 GiB)". */
  description: string
  /** Bytes and blocks live then, as counted (requested, or the layout's rounded). */
  bytes: number
  blocks: number
  /** The peak's reserved bytes when the moment is a layout's reserved peak. */
  reserved?: number
  /** The out-of-memory's request when the moment is one. */
  oomBytes?: number
}

export interface TopGroup {
  /** The headline frame ("train.py:42 step"), the tag or the stream; "no frames recorded"… for none. */
  key: string
  bytes: number
  blocks: number
  /** bytes / all bytes live at the moment. */
  share: number
  /** The shown frames of the group's largest block, innermost first (src-shared/frames.ts). */
  frames: string[]
  /** The group's largest block: its request event. */
  largestEvent: number
}

export interface TopResult {
  at: TopMoment
  by: TopBy
  /** What was counted: the program's requests, or the blocks of a layout (its name). */
  counted: { kind: 'requests' } | { kind: 'layout'; name: string }
  groups: TopGroup[]
}

export interface TopOptions {
  at: TopAt
  by: TopBy
  /** Count this layout's blocks (rounded sizes) instead of the requests. */
  layout?: LayoutOnEvents
  /** The input's recorded layouts (a snapshot's pytorch (recorded)): the default peak is theirs. */
  stored?: readonly StrategyResult[]
  /** The file, for messages. */
  file: string
}

/** A recorded layout placed on the trace's events, or undefined when the input has none. */
export function recordedLayout(trace: RequestTrace, stored: readonly StrategyResult[]): LayoutOnEvents | undefined {
  const r = stored.find((s) => isRecorded(s) && s.layout && s.layout.op.length > 0)
  if (!r) return undefined
  const l = recordedOnEvents(trace, r).layout
  return { name: r.name, op: l.op, address: l.address, size: l.size, requested: l.requested, event: l.event }
}

/** The first request event after which the layout reserved the most, and the bytes (the one accounting, src-shared/layout-accounting.ts). */
export function layoutPeak(layout: LayoutOnEvents): { event: number; reserved: number } {
  const swept = sweepLayout(layout)
  return { event: Math.max(0, swept.peakReservedEvent), reserved: swept.peakReserved }
}

function firstOom(trace: RequestTrace): number {
  const kind = trace.events.kind
  for (let i = 0; i < kind.length; i++) if (kind[i] === EventKind.oom) return i
  return -1
}

/** The request events of the allocations live after `event` (allocated, not freed by then). */
export function liveRequests(trace: RequestTrace, event: number): { event: number; bytes: number }[] {
  const e = trace.events
  const live = new Map<number, number>()
  const last = Math.min(event, e.kind.length - 1)
  for (let i = 0; i <= last; i++) {
    if (e.kind[i] === EventKind.alloc) live.set(e.id[i]!, i)
    else if (e.kind[i] === EventKind.free) live.delete(e.id[i]!)
  }
  return [...live.values()].map((i) => ({ event: i, bytes: e.size[i]! }))
}

/**
 * The blocks of a layout held after request event `event`, by the request event that allocated
 * them, with their rounded sizes. A block the program freed that the strategy still holds for its
 * stream (pending) is held: it counts, marked pending.
 */
export function liveLayoutBlocks(layout: LayoutOnEvents, event: number): { event: number; bytes: number; pending: boolean }[] {
  const live = new Map<bigint, { event: number; bytes: number; pending: boolean }>()
  const n = layout.op.length
  for (let k = 0; k < n && layout.event[k]! <= event; k++) {
    const address = layout.address[k]!
    switch (layout.op[k]) {
      case LayoutOp.alloc:
        live.set(address, { event: layout.event[k]!, bytes: layout.size[k]!, pending: false })
        break
      case LayoutOp.free:
      case LayoutOp.freeCompleted:
        live.delete(address)
        break
      case LayoutOp.freePending: {
        const b = live.get(address)
        if (b) b.pending = true
        break
      }
      case LayoutOp.reset:
        live.clear()
        break
    }
  }
  return [...live.values()]
}

function moment(
  trace: RequestTrace,
  options: TopOptions,
): { event: number; reason: TopMoment['reason']; description: string; reserved?: number; oomBytes?: number } {
  const events = trace.events.kind.length
  const at = options.at
  switch (at.kind) {
    case 'event':
      if (!Number.isInteger(at.event) || at.event < 0 || at.event >= events)
        throw new InputError('--at', '', `event ${at.event} is not in ${options.file} (events 0 to ${Math.max(0, events - 1)})`)
      return { event: at.event, reason: 'event', description: `event ${at.event}` }
    case 'oom': {
      const o = firstOom(trace)
      if (o < 0)
        throw new InputError(
          '--at',
          '',
          `oom: ${options.file} records no out-of-memory (a snapshot records one when torch.cuda.OutOfMemoryError was raised while recording); use --at peak or an event index`,
        )
      const bytes = trace.events.size[o]!
      return {
        event: o,
        reason: 'oom',
        description: `the first recorded out-of-memory (event ${o}, a request of ${formatBytes(bytes)} failed)`,
        oomBytes: bytes,
      }
    }
    case 'peak': {
      const layout = options.layout ?? recordedLayout(trace, options.stored ?? [])
      if (layout) {
        const swept = layoutPeak(layout)
        const event = options.layout?.peakReservedEvent ?? swept.event
        return { event, reason: 'peak', description: `peak reserved of ${layout.name}`, reserved: swept.reserved }
      }
      const d = describeTrace(trace)
      return { event: Math.max(0, d.peakRequestedEvent), reason: 'peak', description: 'peak of requested bytes' }
    }
  }
}

/** What was live at the chosen moment, grouped, largest first. */
export function topGroups(trace: RequestTrace, options: TopOptions): TopResult {
  const m = moment(trace, options)
  const e = trace.events
  const blocks = options.layout ? liveLayoutBlocks(options.layout, m.event) : liveRequests(trace, m.event).map((b) => ({ ...b, pending: false }))
  const filter = new StackFilter(trace.tables.frames)
  const keyOf = (b: { event: number; pending: boolean }): string => {
    if (b.pending) return 'pending frees (freed on another stream)'
    switch (options.by) {
      case 'frame': {
        const s = e.stack[b.event] ?? -1
        const stack = s >= 0 ? trace.tables.stacks[s] : undefined
        return (stack && filter.label(stack, s)) ?? 'no frames recorded'
      }
      case 'tag': {
        const t = e.tag[b.event] ?? -1
        return t < 0 ? 'no tag' : (trace.tables.tags[t] ?? `tag ${t}`)
      }
      case 'stream':
        return `stream ${trace.tables.streams[e.stream[b.event]!] ?? e.stream[b.event]}`
    }
  }
  const groups = new Map<string, TopGroup & { largestBytes: number }>()
  let total = 0
  for (const b of blocks) {
    total += b.bytes
    const key = keyOf(b)
    let g = groups.get(key)
    if (!g) {
      g = { key, bytes: 0, blocks: 0, share: 0, frames: [], largestEvent: b.event, largestBytes: -1 }
      groups.set(key, g)
    }
    g.bytes += b.bytes
    g.blocks++
    if (b.bytes > g.largestBytes || (b.bytes === g.largestBytes && b.event < g.largestEvent)) {
      g.largestBytes = b.bytes
      g.largestEvent = b.event
    }
  }
  const out: TopGroup[] = [...groups.values()]
    .sort((x, y) => y.bytes - x.bytes || y.blocks - x.blocks || x.key.localeCompare(y.key))
    .map(({ largestBytes: _, ...g }) => {
      const s = e.stack[g.largestEvent] ?? -1
      const stack = s >= 0 ? trace.tables.stacks[s] : undefined
      const frames = stack
        ? filter.filter(stack, s).shown.map((f) => {
            const label = frameLabel(trace.tables.frames[f.frame]!)
            return f.repeats > 1 ? `${label} ×${f.repeats}` : label
          })
        : []
      return { ...g, share: total > 0 ? g.bytes / total : 0, frames }
    })
  const t0 = e.time[0] ?? 0
  return {
    at: {
      event: m.event,
      time: (e.time[m.event] ?? t0) - t0,
      reason: m.reason,
      description: m.description,
      bytes: total,
      blocks: blocks.length,
      ...(m.reserved !== undefined && { reserved: m.reserved }),
      ...(m.oomBytes !== undefined && { oomBytes: m.oomBytes }),
    },
    by: options.by,
    counted: options.layout ? { kind: 'layout', name: options.layout.name } : { kind: 'requests' },
    groups: out,
  }
}
