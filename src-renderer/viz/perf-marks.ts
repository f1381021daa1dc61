// Performance marks for benchmarks and the DevTools performance panel. `vramscope:first-paint`
// marks when an opened trace's first meaningful content was drawn: its timeline of requested bytes
// (from the request columns, no allocator) beside its event count. `vramscope:first-map` marks when
// the first memory map of a page was drawn (the first strategy's replay or recorded layout). A benchmark that
// sets globalThis.vramscopeDrawLog to an array also hears every map draw: when it ended and how
// long it took; without it nothing is kept, so a long session does not grow a timeline.
export interface MapDraw {
  /** performance.now() when the map's pixels were on its canvas. */
  at: number
  ms: number
}

let firstMapMarked = false
let firstPaintMarked = false

export function noteTraceDrawn(): void {
  if (firstPaintMarked) return
  firstPaintMarked = true
  performance.mark('vramscope:first-paint')
}

export function noteMapDrawn(ms: number): void {
  const at = performance.now()
  if (!firstMapMarked) {
    firstMapMarked = true
    performance.mark('vramscope:first-map')
  }
  const log = (globalThis as { vramscopeDrawLog?: MapDraw[] }).vramscopeDrawLog
  if (log) log.push({ at, ms })
}
