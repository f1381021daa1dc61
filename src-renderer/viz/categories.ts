// What colour group each block belongs to, by the user's choice: its stream, its size class
// (powers of two from 256 B), its tag, or the headline frame of the stack that allocated it (the
// user's frame, src-shared/frames.ts, not the allocator's innermost one).
import type { StrategyView, TraceData } from './data.ts'
import { frameLabelAt, stackHeadlines } from './frames.ts'
import { NO_STREAM } from './model.ts'
import { SERIES } from './palette.ts'

/** What the maps colour blocks by (the app's state holds the user's choice). */
export type ColorBy = 'stream' | 'size' | 'tag' | 'frame'

/**
 * Colour categories of frames: the headline frames ranked by the memory their allocations held
 * over the trace (bytes × events alive, so long-lived weights and optimizer state rank by what
 * they hold, not only short-lived temporaries by how often they come), so the largest groups get
 * distinct colours (the palette repeats after ten). Category 0 is "no frames"; category r ≥ 1 is
 * the r-th largest headline.
 */
export interface FrameCategories {
  /** The category of each stack. */
  ofStack: Uint32Array
  /** The headline frame of each category r ≥ 1, at index r - 1. */
  frames: number[]
  /** Each category's share of the memory held over the trace (bytes × events), at index r - 1. */
  share: number[]
}

const frameCategoriesCache = new WeakMap<TraceData, FrameCategories>()

export function frameCategories(trace: TraceData): FrameCategories {
  const hit = frameCategoriesCache.get(trace)
  if (hit) return hit
  const headlines = stackHeadlines(trace)
  const held = new Map<number, number>()
  const allocOf = new Map<number, number>()
  const n = trace.kind.length
  const add = (alloc: number, until: number) => {
    const s = trace.stack[alloc] ?? -1
    const h = s >= 0 ? headlines[s]! : -1
    if (h >= 0) held.set(h, (held.get(h) ?? 0) + trace.size[alloc]! * Math.max(1, until - alloc))
  }
  for (let e = 0; e < n; e++) {
    if (trace.kind[e] === 0) allocOf.set(trace.id[e]!, e)
    else if (trace.kind[e] === 1) {
      const a = allocOf.get(trace.id[e]!)
      if (a !== undefined) {
        add(a, e)
        allocOf.delete(trace.id[e]!)
      }
    }
  }
  for (const a of allocOf.values()) add(a, n)
  for (const h of headlines) if (h >= 0 && !held.has(h)) held.set(h, 0)
  const ranked = [...held].sort((a, b) => b[1] - a[1] || a[0] - b[0])
  const total = ranked.reduce((sum, [, v]) => sum + v, 0)
  const rank = new Map(ranked.map(([h], i) => [h, i + 1]))
  const ofStack = Uint32Array.from(headlines, (h) => (h >= 0 ? rank.get(h)! : 0))
  const out = { ofStack, frames: ranked.map(([h]) => h), share: ranked.map(([, v]) => (total > 0 ? v / total : 0)) }
  frameCategoriesCache.set(trace, out)
  return out
}

/**
 * Each block's category. Streams and sizes are the model's own; tags and frames are the trace's,
 * so without its columns (a first map drawn while they are on their way) every block is category 0.
 */
export function blockCategories(view: StrategyView, trace: TraceData | null, colorBy: ColorBy): Uint32Array {
  const b = view.model.blocks
  const out = new Uint32Array(b.count)
  if (!trace && (colorBy === 'tag' || colorBy === 'frame')) return out
  const frames = colorBy === 'frame' ? frameCategories(trace!).ofStack : null
  for (let k = 0; k < b.count; k++) {
    const event = b.from[k]!
    switch (colorBy) {
      case 'stream': {
        const s = b.stream[k]!
        out[k] = s === NO_STREAM ? 0 : s
        break
      }
      case 'size':
        out[k] = Math.max(0, Math.floor(Math.log2(Math.max(256, b.size[k]!))) - 8)
        break
      case 'tag':
        out[k] = (trace!.tag[event] ?? -1) + 1
        break
      case 'frame': {
        const s = trace!.stack[event] ?? -1
        out[k] = s < 0 ? 0 : (frames![s] ?? 0)
        break
      }
    }
  }
  return out
}

/** The name of a category, for the legend and the inspector. */
export function categoryName(trace: TraceData, colorBy: ColorBy, category: number): string {
  switch (colorBy) {
    case 'stream':
      return `stream ${trace.streams[category] ?? category}`
    case 'size': {
      const lo = 2 ** (category + 8)
      return `≤ ${lo * 2 >= 1024 ** 3 ? `${(lo * 2) / 1024 ** 3} GiB` : lo * 2 >= 1024 ** 2 ? `${(lo * 2) / 1024 ** 2} MiB` : lo * 2 >= 1024 ? `${(lo * 2) / 1024} KiB` : `${lo * 2} B`}`
    }
    case 'tag':
      return category === 0 ? 'no tag' : (trace.tags[category - 1] ?? `tag ${category - 1}`)
    case 'frame': {
      const frame = frameCategories(trace).frames[category - 1]
      return category === 0 || frame === undefined ? 'no frames' : frameLabelAt(trace, frame)
    }
  }
}

/**
 * The legend of colour by frame: the `n` largest headline frames (frameCategories), each with its
 * map colour and its share of the memory held over the trace; empty for any other colouring.
 */
export function frameLegend(trace: TraceData, colorBy: ColorBy, n = 9): { color: string; label: string; share: number }[] {
  if (colorBy !== 'frame') return []
  const c = frameCategories(trace)
  return c.frames.slice(0, n).map((frame, i) => ({ color: SERIES[(i + 1) % SERIES.length]!, label: frameLabelAt(trace, frame), share: c.share[i]! }))
}
