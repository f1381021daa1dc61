// A progress bar on stderr for long steps (reading, importing, replaying). Only on a terminal:
// piped or with --json there is none, so scripts read clean output. Redrawn at most ten times a
// second so a fast loop that reports often costs nothing.
import { formatBytes, formatCount } from '../services/units.ts'

const REDRAW_MS = 100
const BAR_WIDTH = 24

export type ProgressUnit = 'bytes' | 'events' | 'replays'

/** Every update of a long step, for a caller that is not a terminal (the MCP server's progress notifications). */
export type ProgressListener = (label: string, done: number, total: number, unit: ProgressUnit) => void

export class ProgressBar {
  private lastDraw = 0
  private drawn = false

  constructor(
    private readonly stream: NodeJS.WriteStream,
    private readonly enabled: boolean,
    private readonly listener?: ProgressListener,
  ) {}

  /** `unit` says how to print done/total: bytes ("12.0 MiB / 40.0 MiB") or a count ("1.20 M / 4.00 M events"). */
  update(label: string, done: number, total: number, unit: ProgressUnit = 'bytes'): void {
    this.listener?.(label, done, total, unit)
    if (!this.enabled) return
    const now = Date.now()
    if (now - this.lastDraw < REDRAW_MS && done < total) return
    this.lastDraw = now
    const fraction = total > 0 ? Math.min(1, done / total) : 0
    const filled = Math.round(fraction * BAR_WIDTH)
    const amount = unit === 'bytes' ? `${formatBytes(done)} / ${formatBytes(total)}` : `${formatCount(done)} / ${formatCount(total)} ${unit}`
    const line = `${label} [${'#'.repeat(filled)}${'-'.repeat(BAR_WIDTH - filled)}] ${(fraction * 100).toFixed(0).padStart(3)}% ${amount}`
    const width = this.stream.columns ?? 100
    this.stream.write(`\r${line.slice(0, width - 1)}\x1b[K`)
    this.drawn = true
  }

  /** Clears the bar, so what follows starts on a clean line. */
  clear(): void {
    if (this.drawn) this.stream.write('\r\x1b[K')
    this.drawn = false
    this.lastDraw = 0
  }
}
