// Performance marks for benchmarks and the DevTools performance panel. `vramscope:first-map` marks
// when the first memory map of a page was drawn (first paint of an opened trace). A benchmark that
// sets globalThis.vramscopeDrawLog to an array also hears every map draw: when it ended and how
// long it took; without it nothing is kept, so a long session does not grow a timeline.
export interface MapDraw {
  /** performance.now() when the map's pixels were on its canvas. */
  at: number
  ms: number
}

let firstMapMarked = false

export function noteMapDrawn(ms: number): void {
  const at = performance.now()
  if (!firstMapMarked) {
    firstMapMarked = true
    performance.mark('vramscope:first-map')
  }
  const log = (globalThis as { vramscopeDrawLog?: MapDraw[] }).vramscopeDrawLog
  if (log) log.push({ at, ms })
}
