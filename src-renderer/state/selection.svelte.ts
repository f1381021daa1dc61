// The selection: the block inspected, and the block followed through the trace (its events and
// every block that lived at its address).
import type { AllocBands } from '../viz/alloc-timeline.ts'
import type { StrategyView, TraceData } from '../viz/data.ts'
import { follow, stepFollowed, type Followed } from '../viz/events.ts'
import type { Playback } from './playback.svelte.ts'

export interface Selection {
  strategy: number
  block: number
}

/** What a block is followed through: the open trace, its bands and its strategies (the loader). */
export interface Followable {
  readonly trace: TraceData | null
  readonly bands: AllocBands | null
  readonly strategies: StrategyView[]
}

export class Selecting {
  private readonly loaded: () => Followable
  private readonly playback: Playback

  constructor(loaded: () => Followable, playback: Playback) {
    this.loaded = loaded
    this.playback = playback
  }

  selection = $state<Selection | null>(null)
  /** The block followed through the trace (its events and its address's), or null. */
  followed = $state.raw<Followed | null>(null)

  /** Nothing selected, nothing followed (a trace opened, its strategies replayed again). */
  clear(): void {
    this.selection = null
    this.followed = null
  }

  select(selection: Selection | null): void {
    this.selection = selection
  }

  /** Follows a block of a strategy: its alloc and free, and every block that lived at its address. */
  follow(selection: Selection | null): void {
    const { trace, bands, strategies } = this.loaded()
    const view = selection ? strategies[selection.strategy] : undefined
    this.followed = selection && trace && bands && view ? follow(trace.kind, trace.id, bands, view.model, selection.strategy, selection.block) : null
  }

  /** Moves the playhead to the next (1) or previous (-1) event of what is followed. */
  stepFollow(direction: 1 | -1): void {
    const f = this.followed
    if (!f) return
    const e = stepFollowed(f.events, this.playback.event, direction)
    if (e >= 0) {
      this.playback.pause()
      this.playback.seek(e)
    }
  }
}
