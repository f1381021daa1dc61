// The diff: a second trace (or a second run of a file) replayed with the open one's strategies and
// cap, its figures set beside the open trace's (views/DiffView.svelte).
import { ApiCallError } from '../api/client.ts'
import type { StrategyView } from '../viz/data.ts'
import type { Loader } from './loader.svelte.ts'

/** The other side of a diff: its name, request figures and replayed strategies. */
export interface DiffSide {
  name: string
  events: number
  allocs: number
  durationNs: number
  strategies: StrategyView[]
}

export class Diffing {
  private readonly loader: Loader

  constructor(loader: Loader) {
    this.loader = loader
  }

  /** The other side, once replayed; null without a diff (another file opened ends it). */
  side = $state.raw<DiffSide | null>(null)

  /**
   * Opens a second trace and replays it through the same strategies (and cap) as the open one, so
   * the diff view can set their figures side by side. The open trace stays as it is.
   */
  async open(start: () => Promise<{ jobId: string }>): Promise<void> {
    const loader = this.loader
    const client = loader.client
    if (!loader.trace) return
    loader.error = null
    try {
      // The diff replays the open trace's strategies under its cap: not the opening's.
      const { summary, strategies } = await loader.replayAnother(start, (s) => (loader.job = s))
      // The diff needs only these figures: the second trace is freed on the host.
      void client.call('trace:close', { traceId: summary.traceId }).catch(() => {})
      this.side = { name: summary.name, events: summary.events, allocs: summary.allocs, durationNs: summary.durationNs, strategies }
      loader.job = null
    } catch (e) {
      loader.job = null
      loader.error = e instanceof ApiCallError && e.code === 'CANCELLED' ? null : (e as Error).message
    }
  }
}
