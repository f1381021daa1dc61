// What colour group each block belongs to, by the user's choice: its stream, its size class
// (powers of two from 256 B), its tag, or the headline frame of the stack that allocated it (the
// user's frame, src-shared/frames.ts, not the allocator's innermost one).
import type { StrategyView, TraceData } from './data.ts'
import { frameLabelAt, stackHeadlines } from './frames.ts'
import { NO_STREAM } from './model.ts'

/** What the maps colour blocks by (the app's state holds the user's choice). */
export type ColorBy = 'stream' | 'size' | 'tag' | 'frame'

export function blockCategories(view: StrategyView, trace: TraceData, colorBy: ColorBy): Uint32Array {
  const b = view.model.blocks
  const out = new Uint32Array(b.count)
  const headlines = colorBy === 'frame' ? stackHeadlines(trace) : null
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
        out[k] = (trace.tag[event] ?? -1) + 1
        break
      case 'frame': {
        const s = trace.stack[event] ?? -1
        out[k] = s < 0 ? 0 : (headlines![s] ?? -1) + 1
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
    case 'frame':
      return category === 0 ? 'no frames' : frameLabelAt(trace, category - 1)
  }
}
