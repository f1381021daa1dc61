// The playhead: the event every view shows, the clock that moves it while playing, the readout the
// figures are read at, the brushed range it keeps to, and the jumps (peak, failure, marker).
import type { StrategyView, TraceData } from '../viz/data.ts'
import { peakReservedEvent } from '../viz/peak.ts'

/** While playing, the figures read the playhead at most this often (ms). */
const READOUT_MS = 100

/** What the playhead moves over: the open trace and the strategies replayed on it (the loader). */
export interface Loaded {
  readonly trace: TraceData | null
  readonly strategies: StrategyView[]
  readonly events: number
  readonly lastEvent: number
}

export class Playback {
  private readonly loaded: () => Loaded

  constructor(loaded: () => Loaded) {
    this.loaded = loaded
  }

  /** The request event whose state every view shows. */
  event = $state(0)
  playing = $state(false)
  /** The playhead as the figures and texts read it while playing: at most READOUT_MS apart. */
  private playReadout = $state(0)
  private playReadoutAt = 0
  /**
   * The event the figures (map headers, the metrics table's "now" rows, the position) are read
   * at: the playhead, except while playing, when it follows a few times a second. The maps and
   * cursors move every frame; figures changing sixty times a second cannot be read, and each
   * change of text lays out and paints the page again (docs/architecture.md, "Memory maps").
   */
  readoutEvent = $derived(this.playing ? this.playReadout : this.event)
  /** Events per second while playing. */
  speed = $state(200)
  /** A brushed range of events the scrubber and playback keep to, or null for all. */
  range = $state<[number, number] | null>(null)
  /** Events a change stays highlighted for: about a second of playback, at least a few events. */
  recentWindow = $derived(Math.max(4, Math.round(this.playing ? this.speed * 0.6 : 8)))

  private playStartedAt = 0
  private playStartEvent = 0
  private frame = 0

  seek(event: number): void {
    const [lo, hi] = this.range ?? [0, this.loaded().lastEvent]
    this.event = Math.round(Math.min(Math.max(event, lo), hi))
    if (this.playing) {
      this.playStartedAt = performance.now()
      this.playStartEvent = this.event
    }
  }

  step(delta: number): void {
    this.pause()
    this.seek(this.event + delta)
  }

  play(): void {
    if (this.playing || !this.loaded().trace) return
    const [lo, hi] = this.range ?? [0, this.loaded().lastEvent]
    if (this.event >= hi) this.event = lo
    this.playing = true
    this.playStartedAt = performance.now()
    this.playStartEvent = this.event
    this.playReadout = this.event
    this.playReadoutAt = this.playStartedAt
    const tick = (now: number) => {
      if (!this.playing) return
      const target = this.playStartEvent + ((now - this.playStartedAt) / 1000) * this.speed
      const [, end] = this.range ?? [0, this.loaded().lastEvent]
      if (target >= end) {
        this.event = end
        this.playing = false
        return
      }
      this.event = Math.floor(target)
      if (now - this.playReadoutAt >= READOUT_MS) {
        this.playReadout = this.event
        this.playReadoutAt = now
      }
      this.frame = requestAnimationFrame(tick)
    }
    this.frame = requestAnimationFrame(tick)
  }

  pause(): void {
    this.playing = false
    cancelAnimationFrame(this.frame)
  }

  stop(): void {
    this.pause()
  }

  toggle(): void {
    if (this.playing) this.pause()
    else this.play()
  }

  setSpeed(speed: number): void {
    this.speed = speed
    if (this.playing) {
      this.playStartedAt = performance.now()
      this.playStartEvent = this.event
    }
  }

  /** Jumps to the event after which strategy `i` (default: the first) held its peak reserved. */
  jumpToPeak(i = 0): void {
    const { strategies, events } = this.loaded()
    const s = strategies[i]
    // A recorded layout's summary counts layout events, not request events: peak.ts finds its peak.
    if (s) this.seek(peakReservedEvent(s, events))
  }

  /** The next failure after the playhead (wrapping to the first): any strategy's, or an out-of-memory the program saw when recorded. */
  jumpToFailure(): void {
    const { strategies, trace } = this.loaded()
    const all: number[] = []
    for (const s of strategies) for (const f of s.model.failures) all.push(f)
    const kind = trace?.kind
    if (kind) for (let i = 0; i < kind.length; i++) if (kind[i] === 3) all.push(i)
    if (all.length === 0) return
    all.sort((a, b) => a - b)
    this.seek(all.find((f) => f > this.event) ?? all[0]!)
  }

  /** The next marker (step boundary) after the playhead, wrapping. */
  jumpToMarker(direction: 1 | -1 = 1): void {
    const t = this.loaded().trace
    if (!t) return
    const markers: number[] = []
    for (let i = 0; i < t.kind.length; i++) if (t.kind[i] === 2) markers.push(i)
    if (markers.length === 0) return
    const next = direction > 0 ? (markers.find((m) => m > this.event) ?? markers[0]!) : (markers.findLast((m) => m < this.event) ?? markers.at(-1)!)
    this.seek(next)
  }
}
