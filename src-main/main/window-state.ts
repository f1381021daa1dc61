// Where the last window was, restored for the next one: bounds and maximized, in a JSON file in the
// user's data directory (asynchronous file system, debounced saves). Restored bounds are fitted to
// the displays present now, so a window last seen on an unplugged monitor comes back on screen.

import { readFile } from 'node:fs/promises'

import { SettingsFile } from './settings-file.ts'

export interface Rect {
  x: number
  y: number
  width: number
  height: number
}

export interface WindowState {
  bounds: Rect
  maximized: boolean
}

export const DEFAULT_SIZE = { width: 1400, height: 900 }
export const MIN_SIZE = { width: 720, height: 480 }

function isRect(v: unknown): v is Rect {
  const r = v as Rect
  return typeof r === 'object' && r !== null && [r.x, r.y, r.width, r.height].every((n) => typeof n === 'number' && Number.isFinite(n))
}

function overlap(a: Rect, b: Rect): number {
  const w = Math.min(a.x + a.width, b.x + b.width) - Math.max(a.x, b.x)
  const h = Math.min(a.y + a.height, b.y + b.height) - Math.max(a.y, b.y)
  return w > 0 && h > 0 ? w * h : 0
}

/**
 * The bounds to open a window with: the saved ones when enough of them (a quarter) lies on a
 * display's work area, shrunk to fit it; otherwise the default size centred on the first display.
 * `offset` moves each further window down and right so windows do not stack exactly.
 */
export function fitToDisplays(saved: Rect | undefined, workAreas: readonly Rect[], offset = 0): Rect {
  const primary = workAreas[0] ?? { x: 0, y: 0, ...DEFAULT_SIZE }
  const centred = (area: Rect): Rect => {
    const width = Math.min(DEFAULT_SIZE.width, area.width)
    const height = Math.min(DEFAULT_SIZE.height, area.height)
    return { x: Math.round(area.x + (area.width - width) / 2), y: Math.round(area.y + (area.height - height) / 2), width, height }
  }
  let rect: Rect
  let area = primary
  if (saved && isRect(saved)) {
    const best = workAreas.map((a) => ({ a, o: overlap(saved, a) })).sort((p, q) => q.o - p.o)[0]
    // A quarter of the window (or of the display, for a window larger than it) must be on screen.
    const minimum = best && Math.min(saved.width, saved.height) > 0 ? Math.min(saved.width * saved.height, best.a.width * best.a.height) / 4 : Infinity
    if (best && best.o >= minimum) {
      area = best.a
      const width = Math.max(MIN_SIZE.width, Math.min(saved.width, area.width))
      const height = Math.max(MIN_SIZE.height, Math.min(saved.height, area.height))
      rect = {
        x: Math.min(Math.max(saved.x, area.x), area.x + area.width - width),
        y: Math.min(Math.max(saved.y, area.y), area.y + area.height - height),
        width,
        height,
      }
    } else rect = centred(primary)
  } else rect = centred(primary)
  if (offset > 0) {
    const step = 28 * offset
    rect = { ...rect, x: Math.min(rect.x + step, area.x + area.width - rect.width), y: Math.min(rect.y + step, area.y + area.height - rect.height) }
  }
  return rect
}

export class WindowStateStore {
  private state: WindowState | undefined
  private timer: ReturnType<typeof setTimeout> | undefined
  private readonly out: SettingsFile

  constructor(
    private readonly file: string,
    private readonly delayMs = 500,
  ) {
    this.out = new SettingsFile(file)
  }

  async load(): Promise<WindowState | undefined> {
    try {
      const parsed = JSON.parse(await readFile(this.file, 'utf8')) as Partial<WindowState>
      if (isRect(parsed.bounds)) this.state = { bounds: parsed.bounds, maximized: parsed.maximized === true }
    } catch {
      this.state = undefined
    }
    return this.state
  }

  get current(): WindowState | undefined {
    return this.state
  }

  /** Remembers a window's state, written after `delayMs` of quiet (moving a window fires often). */
  update(state: WindowState): void {
    this.state = state
    clearTimeout(this.timer)
    this.timer = setTimeout(() => void this.flush(), this.delayMs)
  }

  /** Writes now (on quit). */
  flush(): Promise<void> {
    clearTimeout(this.timer)
    const state = this.state
    if (!state) return this.out.settled()
    return this.out.write(`${JSON.stringify(state)}\n`)
  }
}
