// What a strategy held at its peak reserved, grouped by who asked for it: the headline frame of
// the allocating stack (the user's frame, src-shared/frames.ts), the tag, or the stream; largest first. Answers "what do I shrink to lower
// the peak?". Pure functions over the model and the trace, tested in Node.
import { peakOfSteps } from '../../src-shared/layout-accounting.ts'
import type { StrategyView, TraceData } from './data.ts'
import { frameLabelAt, headlineAt } from './frames.ts'
import { liveBlocksAt, NO_STREAM, type StrategyModel } from './model.ts'

export type PeakGroupBy = 'frame' | 'tag' | 'stream'

export interface PeakGroup {
  /** Frame index + 1, tag index + 1 or stream index (0: no frames / no tag); PENDING_GROUP for pending frees. */
  key: number
  label: string
  blocks: number
  requested: number
  rounded: number
  /** The group's block with the largest rounded size (the first allocated among equals). */
  largestBlock: number
}

/** Blocks the program freed on another stream that still wait for it: held, but owned by nobody. */
export const PENDING_GROUP = -1

/**
 * The event after which the strategy's reserved bytes were highest (the first such event). The
 * replay's summary names it; a recorded layout's summary counts layout events instead, so for it
 * (or any summary without one) the regions of the model are swept.
 */
export function peakReservedEvent(view: StrategyView, events: number): number {
  const named = view.summary['peakReservedEvent']
  if (named !== undefined && Number.isInteger(named) && named >= 0 && named < events) return named
  return sweptPeak(view.model, events).event
}

/** The first event below `events` after which reserved bytes were highest, and the bytes (the model's steps of the one accounting). */
export function sweptPeak(model: StrategyModel, events: number): { event: number; reserved: number } {
  return peakOfSteps(model.reserved, events)
}

/** What the table shows for a group: the headline frame as every view labels it, the tag, or the stream. */
export function groupLabel(trace: TraceData, groupBy: PeakGroupBy, key: number): string {
  if (key === PENDING_GROUP) return 'pending frees (freed on another stream)'
  switch (groupBy) {
    case 'frame':
      return key === 0 ? 'no frames recorded' : frameLabelAt(trace, key - 1)
    case 'tag':
      return key === 0 ? 'no tag' : (trace.tags[key - 1] ?? `tag ${key - 1}`)
    case 'stream':
      return `stream ${trace.streams[key] ?? key}`
  }
}

function groupKey(trace: TraceData, model: StrategyModel, block: number, groupBy: PeakGroupBy): number {
  const event = model.blocks.from[block]!
  switch (groupBy) {
    case 'frame':
      return headlineAt(trace, event) + 1
    case 'tag':
      return (trace.tag[event] ?? -1) + 1
    case 'stream': {
      const stream = model.blocks.stream[block]!
      return stream === NO_STREAM ? 0 : stream
    }
  }
}

/**
 * The blocks held after `event`, grouped, largest rounded total first. Every held block lands in
 * exactly one group, so the groups add up to the strategy's rounded bytes plus its pending frees.
 */
export function peakGroups(view: StrategyView, trace: TraceData, event: number, groupBy: PeakGroupBy): PeakGroup[] {
  const model = view.model
  const b = model.blocks
  const groups = new Map<number, PeakGroup>()
  for (const k of liveBlocksAt(model, event)) {
    const pending = event >= b.pendingFrom[k]!
    const key = pending ? PENDING_GROUP : groupKey(trace, model, k, groupBy)
    let g = groups.get(key)
    if (!g) {
      g = { key, label: groupLabel(trace, groupBy, key), blocks: 0, requested: 0, rounded: 0, largestBlock: k }
      groups.set(key, g)
    }
    g.blocks++
    // A pending block no longer counts as requested (as the native counters do).
    if (!pending) g.requested += b.requested[k]!
    g.rounded += b.size[k]!
    const largest = g.largestBlock
    if (b.size[k]! > b.size[largest]! || (b.size[k]! === b.size[largest]! && b.from[k]! < b.from[largest]!)) g.largestBlock = k
  }
  return [...groups.values()].sort((x, y) => y.rounded - x.rounded || y.requested - x.requested || x.label.localeCompare(y.label))
}
