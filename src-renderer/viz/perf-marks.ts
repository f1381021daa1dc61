// Performance marks for benchmarks and the DevTools performance panel. `vramscope:first-paint`
// marks when an opened trace's first meaningful content was drawn: its timeline of requested bytes
// (from the request columns, no allocator) beside its event count. `vramscope:first-map` marks when
// the first memory map of a page was drawn (the first strategy's replay or recorded layout), whole
// or as a preview (its state at the opening event, its history on its way); `vramscope:every-map`
// when every map of the page's first trace had been drawn so, each at least once. A benchmark that
// sets globalThis.vramscopeDrawLog to an array also hears every map draw: when it ended and how
// long it took; without it nothing is kept, so a long session does not grow a timeline.
export interface MapDraw {
  /** performance.now() when the map's pixels were on its canvas. */
  at: number
  ms: number
}

let firstMapMarked = false
let firstPaintMarked = false
let everyMapMarked = false
const mapsDrawn = new Set<string>()

export function noteTraceDrawn(): void {
  if (firstPaintMarked) return
  firstPaintMarked = true
  performance.mark('vramscope:first-paint')
}

/** `map`: the map's name, and how many maps the page draws, every one drawn or to come. */
export function noteMapDrawn(ms: number, map?: { name: string; of: number }): void {
  const at = performance.now()
  if (!firstMapMarked) {
    firstMapMarked = true
    performance.mark('vramscope:first-map')
  }
  if (map && !everyMapMarked) {
    mapsDrawn.add(map.name)
    if (mapsDrawn.size >= map.of) {
      everyMapMarked = true
      performance.mark('vramscope:every-map')
    }
  }
  const log = (globalThis as { vramscopeDrawLog?: MapDraw[] }).vramscopeDrawLog
  if (log) log.push({ at, ms })
}
