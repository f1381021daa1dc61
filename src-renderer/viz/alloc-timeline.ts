// The allocation timeline: every allocation of the request trace as a band over time (x: its alloc
// to its free, y: bytes), stacked per device as the program's live memory is. A band keeps the y
// offset it got at its alloc for as long as it is live: each alloc takes the lowest gap of the
// device's stack it fits in (first fit over every gap frees leave, indexed by size class), else the
// top; a free returns its range, merging with neighbouring gaps. So the stack's top is close to the live bytes and a band
// never moves. Geometry is computed once, in typed arrays; rasterizeBands draws the part in view
// into a pixel buffer, one pass over the bands, summing bands thinner than a pixel per pixel
// (drawn as a shade), so a million-event trace draws whole.
// Pure functions over typed arrays; no DOM, so unit tests and benchmarks run them in Node.
import { rgba, tint } from './draw.ts'

const ALLOC = 0
const FREE = 1
/** A band live at the end of the trace. */
export const LIVE = 0xffffffff

export interface AllocBands {
  count: number
  /** Request event of each band's alloc, increasing. */
  allocEvent: Uint32Array
  /** Request event of its free, or LIVE. */
  freeEvent: Uint32Array
  /** Bytes below the band in its lane's stack. */
  offset: Float64Array
  /** Bytes asked for. */
  size: Float64Array
  /** Index into `lanes`. */
  lane: Uint16Array
  /** One stack per device and memory pool: which, and the highest top any band reached. */
  lanes: { device: number; pool: number; peak: number }[]
  /** Band of each alloc id (-1: none). */
  bandOfId: Int32Array
  /** Events in the trace (x domain in event mode: [0, events]). */
  events: number
}

/** Size class of a gap or a request: floor(log2(bytes)), 0 below 2 bytes. */
function sizeClass(bytes: number): number {
  if (bytes < 2) return 0
  return bytes < 4294967296 ? 31 - Math.clz32(bytes) : Math.floor(Math.log2(bytes))
}

/** Index of the first of the ascending `sorted` that is >= value. */
function lowerBound(sorted: ArrayLike<number>, value: number): number {
  let lo = 0
  let hi = sorted.length
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if (sorted[mid]! < value) lo = mid + 1
    else hi = mid
  }
  return lo
}

/**
 * Gaps a free left in one lane's stack, sorted by offset, and the stack's top. An alloc takes the
 * lowest gap it fits in (first fit over every gap): besides the list by offset, each gap's start
 * sits in the list of its size class (floor(log2(length))), by offset, so the lowest gap that fits
 * is the first of each larger class or, in the request's own class, the first that fits there.
 * Gaps never overlap, so a gap that shrinks or grows keeps its place in either list.
 */
class LaneStack {
  starts: number[] = []
  ends: number[] = []
  /** Starts of the gaps of each size class, ascending, and their lengths. */
  private readonly byClass: number[][] = []
  private readonly lengths: number[][] = []
  top = 0
  peak = 0

  private classInsert(start: number, length: number): void {
    const c = sizeClass(length)
    while (this.byClass.length <= c) {
      this.byClass.push([])
      this.lengths.push([])
    }
    const list = this.byClass[c]!
    const at = lowerBound(list, start)
    list.splice(at, 0, start)
    this.lengths[c]!.splice(at, 0, length)
  }

  private classRemove(start: number, length: number): void {
    const c = sizeClass(length)
    const at = lowerBound(this.byClass[c]!, start)
    this.byClass[c]!.splice(at, 1)
    this.lengths[c]!.splice(at, 1)
  }

  private addGap(index: number, start: number, end: number): void {
    this.starts.splice(index, 0, start)
    this.ends.splice(index, 0, end)
    this.classInsert(start, end - start)
  }

  private removeGap(index: number): void {
    this.classRemove(this.starts[index]!, this.ends[index]! - this.starts[index]!)
    this.starts.splice(index, 1)
    this.ends.splice(index, 1)
  }

  /** Gap `index` becomes [start, end) (it shrank or grew without reaching another gap). */
  private setGap(index: number, start: number, end: number): void {
    const was = this.starts[index]!
    const wasLength = this.ends[index]! - was
    const c = sizeClass(wasLength)
    if (c === sizeClass(end - start)) {
      const at = lowerBound(this.byClass[c]!, was)
      this.byClass[c]![at] = start
      this.lengths[c]![at] = end - start
    } else {
      this.classRemove(was, wasLength)
      this.classInsert(start, end - start)
    }
    this.starts[index] = start
    this.ends[index] = end
  }

  /** The lowest gap at least `size` long (its index in `starts`), or -1. */
  private lowestFitting(size: number): number {
    const c = sizeClass(size)
    let best = Infinity
    // Every gap of a larger class fits: the lowest of each.
    for (let k = c + 1; k < this.byClass.length; k++) {
      const first = this.byClass[k]![0]
      if (first !== undefined && first < best) best = first
    }
    // In the request's own class, the first that fits, below the best so far.
    const own = this.byClass[c]
    if (own) {
      const lengths = this.lengths[c]!
      for (let k = 0; k < own.length && own[k]! < best; k++)
        if (lengths[k]! >= size) {
          best = own[k]!
          break
        }
    }
    return best === Infinity ? -1 : lowerBound(this.starts, best)
  }

  place(size: number): number {
    const g = size > 0 ? this.lowestFitting(size) : -1
    if (g >= 0) {
      const at = this.starts[g]!
      const end = this.ends[g]!
      if (end - at === size) this.removeGap(g)
      else this.setGap(g, at + size, end)
      return at
    }
    const top = this.top
    this.top += size
    if (this.top > this.peak) this.peak = this.top
    return top
  }

  release(at: number, size: number): void {
    if (size <= 0) return
    const { starts, ends } = this
    const lo = lowerBound(starts, at)
    const end = at + size
    // Merge with the gap below and the one above.
    const below = lo > 0 && ends[lo - 1] === at
    const above = lo < starts.length && starts[lo] === end
    let g: number
    if (below && above) {
      const upper = ends[lo]!
      this.removeGap(lo)
      this.setGap(lo - 1, starts[lo - 1]!, upper)
      g = lo - 1
    } else if (below) {
      this.setGap(lo - 1, starts[lo - 1]!, end)
      g = lo - 1
    } else if (above) {
      this.setGap(lo, at, ends[lo]!)
      g = lo
    } else {
      if (end >= this.top) {
        this.top = at
        return
      }
      this.addGap(lo, at, end)
      return
    }
    // A gap that now reaches the top lowers it instead.
    if (ends[g]! >= this.top) {
      this.top = starts[g]!
      this.removeGap(g)
    }
  }
}

/**
 * The bands of a request trace. `device`: each event's device (absent: one device, 0); `pool`:
 * its memory pool (absent: the default pools, 0), a stack of its own (a CUDA graph's private pool
 * is memory of its own). A free of an id not live (allocated before the trace) is ignored, as
 * replay does.
 */
export function allocBands(kind: Uint8Array, id: Uint32Array, size: Float64Array, device?: Uint16Array | Uint32Array, pool?: Uint32Array): AllocBands {
  const n = kind.length
  let allocs = 0
  let maxId = -1
  for (let i = 0; i < n; i++)
    if (kind[i] === ALLOC) {
      allocs++
      if (id[i]! > maxId) maxId = id[i]!
    }
  const allocEvent = new Uint32Array(allocs)
  const freeEvent = new Uint32Array(allocs).fill(LIVE)
  const offset = new Float64Array(allocs)
  const bandSize = new Float64Array(allocs)
  const lane = new Uint16Array(allocs)
  const bandOfId = new Int32Array(maxId + 1).fill(-1)
  const liveBand = new Int32Array(maxId + 1).fill(-1)
  const stacks: LaneStack[] = []
  const lanes: { device: number; pool: number; peak: number }[] = []
  const laneOf = new Map<number, number>()
  let b = 0
  for (let i = 0; i < n; i++) {
    const k = kind[i]
    if (k === ALLOC) {
      const d = device ? device[i]! : 0
      const p = pool ? pool[i]! : 0
      const key = d * 4294967296 + p
      let l = laneOf.get(key)
      if (l === undefined) {
        l = lanes.length
        laneOf.set(key, l)
        lanes.push({ device: d, pool: p, peak: 0 })
        stacks.push(new LaneStack())
      }
      const s = size[i]!
      allocEvent[b] = i
      bandSize[b] = s
      lane[b] = l
      offset[b] = stacks[l]!.place(s)
      bandOfId[id[i]!] = b
      liveBand[id[i]!] = b
      b++
    } else if (k === FREE) {
      const j = id[i]!
      const band = j <= maxId ? liveBand[j]! : -1
      if (band < 0) continue
      liveBand[j] = -1
      freeEvent[band] = i
      stacks[lane[band]!]!.release(offset[band]!, bandSize[band]!)
    }
  }
  stacks.forEach((s, l) => (lanes[l]!.peak = s.peak))
  return { count: allocs, allocEvent, freeEvent, offset, size: bandSize, lane, lanes, bandOfId, events: n }
}

/** x extents of the bands: in events ([alloc, free), live ones to the end) or in nanoseconds. */
export interface BandXs {
  x0: Float64Array
  x1: Float64Array
  /** The whole x domain. */
  min: number
  max: number
  /**
   * Largest x1 of each run of CHUNK bands, long bands left out: a view skips the runs that ended
   * before it. Long bands (living more than 1/LONG of the trace: weights, caches) are listed
   * apart, or one in a run would keep the whole run in every view after it.
   */
  chunkMax: Float64Array
  long: Uint32Array
  isLong: Uint8Array
}

const CHUNK = 256
const LONG = 64

function withChunks(x0: Float64Array, x1: Float64Array, min: number, max: number): BandXs {
  const limit = (max - min) / LONG
  const isLong = new Uint8Array(x0.length)
  const long: number[] = []
  const chunkMax = new Float64Array(Math.ceil(x1.length / CHUNK)).fill(-Infinity)
  for (let b = 0; b < x1.length; b++) {
    if (x1[b]! - x0[b]! > limit) {
      isLong[b] = 1
      long.push(b)
      continue
    }
    const c = (b / CHUNK) | 0
    if (x1[b]! > chunkMax[c]!) chunkMax[c] = x1[b]!
  }
  return { x0, x1, min, max, chunkMax, long: Uint32Array.from(long), isLong }
}

export function bandXs(bands: AllocBands, mode: 'event' | 'time', time?: Float64Array): BandXs {
  const n = bands.count
  const x0 = new Float64Array(n)
  const x1 = new Float64Array(n)
  if (mode === 'event' || !time) {
    for (let b = 0; b < n; b++) {
      x0[b] = bands.allocEvent[b]!
      const f = bands.freeEvent[b]!
      x1[b] = f === LIVE ? bands.events : f
    }
    return withChunks(x0, x1, 0, Math.max(1, bands.events))
  }
  const t0 = time.length > 0 ? time[0]! : 0
  const end = time.length > 0 ? time[time.length - 1]! : 0
  for (let b = 0; b < n; b++) {
    x0[b] = time[bands.allocEvent[b]!]!
    const f = bands.freeEvent[b]!
    x1[b] = f === LIVE ? end : time[f]!
  }
  return withChunks(x0, x1, t0, Math.max(end, t0 + 1))
}

/** The x value of the state after event `e` (the playhead's line). */
export function xOfEvent(e: number, mode: 'event' | 'time', time?: Float64Array): number {
  if (mode === 'event' || !time) return e + 0.5
  return time[Math.min(time.length - 1, Math.max(0, e))] ?? 0
}

/** The event whose state is shown at x: the last one at or before it. */
export function eventAtX(x: number, mode: 'event' | 'time', time?: Float64Array): number {
  if (mode === 'event' || !time) return Math.floor(x)
  let lo = 0
  let hi = time.length
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if (time[mid]! <= x) lo = mid + 1
    else hi = mid
  }
  return Math.max(0, lo - 1)
}

export interface BandView {
  /** x domain in view. */
  x0: number
  x1: number
  /** Bytes at the top of the view (the bottom is 0). */
  yMax: number
}

export interface BandRaster {
  width: number
  height: number
  lane: number
  view: BandView
  /** Colour of each band (0xAABBGGRR); see bandColors. */
  colors: Uint32Array
  background: number
  /** Shade of bands thinner than a pixel, drawn at the coverage they sum to. */
  small: number
}

/** Scratch buffers of a raster's size (newBandScratch), reused frame after frame. */
export interface BandScratch {
  coverage: Float32Array
  rows: Int32Array
  starts: Int32Array
}

export function newBandScratch(pixels: number): BandScratch {
  return { coverage: new Float32Array(pixels), rows: new Int32Array(pixels), starts: new Int32Array(pixels) }
}

export const BAND_NONE = -1
/** owner of a pixel holding only bands thinner than a pixel. */
export const BAND_SMALL = -2

/** First band whose x0 is at or after x (bands are in alloc order, so x0 increases). */
function firstFrom(x0: Float64Array, x: number): number {
  return lowerBound(x0, x)
}

/**
 * Draws the bands in view into `pixels` (width × height, row 0 at the top) and which band each
 * pixel shows into `owner`; `scratch` is of the same size. Returns the bands drawn.
 */
export function rasterizeBands(bands: AllocBands, xs: BandXs, r: BandRaster, pixels: Uint32Array, owner: Int32Array, scratch: BandScratch): number {
  const { width: W, height: H, lane, colors } = r
  const count = W * H
  const { coverage, rows, starts } = scratch
  pixels.fill(r.background, 0, count)
  owner.fill(BAND_NONE, 0, count)
  coverage.fill(0, 0, count)
  rows.fill(0, 0, count)
  starts.fill(BAND_NONE, 0, count)
  let narrow = false
  const vx0 = r.view.x0
  const sx = W / Math.max(1e-9, r.view.x1 - vx0)
  const sy = H / Math.max(1, r.view.yMax)
  const { x0, x1 } = xs
  const { offset, size } = bands
  const laneOf = bands.lane
  const end = firstFrom(x0, r.view.x1)
  let drawn = 0
  let small = false
  const { chunkMax, long, isLong } = xs
  // The long bands first, then runs of the others, skipping runs that ended before the view.
  const longCount = long.length
  for (let i = 0, n = longCount + end; i < n; i++) {
    let b: number
    if (i < longCount) {
      b = long[i]!
      if (b >= end) continue
    } else {
      b = i - longCount
      if ((b & (CHUNK - 1)) === 0 && chunkMax[b / CHUNK]! <= vx0) {
        i += CHUNK - 1
        continue
      }
      if (isLong[b] === 1) continue
    }
    const bx1 = x1[b]!
    if (bx1 <= vx0 || laneOf[b] !== lane) continue
    const s = size[b]!
    if (s <= 0) continue
    let c0 = Math.floor((x0[b]! - vx0) * sx)
    let c1 = Math.ceil((bx1 - vx0) * sx)
    if (c1 <= c0) c1 = c0 + 1
    if (c0 < 0) c0 = 0
    if (c1 > W) c1 = W
    if (c1 <= c0) continue
    const yBottom = H - offset[b]! * sy
    const yTop = yBottom - s * sy
    if (yBottom <= 0) continue
    let r0 = Math.round(yTop)
    let r1 = Math.round(yBottom)
    drawn++
    if (r1 <= r0) {
      // Thinner than a pixel: its share of the pixel's height adds to the pixel's coverage.
      // Summed as a difference along the row (added at c0, taken off at c1): one write each,
      // however many columns the band spans; the pass below sums each row.
      const row = Math.min(H - 1, Math.max(0, Math.floor(yBottom - 1e-9)))
      const share = yBottom - yTop
      const base = row * W
      coverage[base + c0]! += share
      if (c1 < W) coverage[base + c1]! -= share
      small = true
      continue
    }
    if (r0 < 0) r0 = 0
    if (r1 > H) r1 = H
    if ((bx1 - x0[b]!) * sx < 1) {
      // Narrower than a pixel: hundreds may share a column at a whole-trace view, each as tall
      // as its bytes. Its rows are marked as a difference down the column (one write at each
      // end) and the pass below paints each covered pixel once, with the band that began last
      // above it.
      rows[r0 * W + c0]!++
      if (r1 < H) rows[r1 * W + c0]!--
      starts[r0 * W + c0] = b
      narrow = true
      continue
    }
    const color = colors[b]!
    for (let row = r0; row < r1; row++) {
      const p0 = row * W + c0
      const p1 = row * W + c1
      if (p1 - p0 > 24) {
        pixels.fill(color, p0, p1)
        owner.fill(b, p0, p1)
      } else
        for (let p = p0; p < p1; p++) {
          pixels[p] = color
          owner[p] = b
        }
    }
    // A darker top edge keeps stacked bands of one colour apart.
    if (r1 - r0 >= 3) {
      const edge = tint(color, -0.3)
      const p0 = r0 * W + c0
      for (let p = p0; p < p0 + (c1 - c0); p++) pixels[p] = edge
    }
  }
  if (narrow) {
    const run = new Int32Array(W)
    const current = new Int32Array(W).fill(BAND_NONE)
    for (let row = 0; row < H; row++) {
      for (let c = 0, p = row * W; c < W; c++, p++) {
        const started = starts[p]!
        if (started !== BAND_NONE) current[c] = started
        run[c]! += rows[p]!
        if (run[c]! > 0 && owner[p] === BAND_NONE) {
          const b = current[c]!
          pixels[p] = colors[b]!
          owner[p] = b
        }
      }
    }
  }
  if (small) {
    // The shade at 64 levels of coverage, mixed once per frame, not per pixel.
    const shades = new Uint32Array(65)
    for (let level = 0; level <= 64; level++) shades[level] = mix(r.background, r.small, Math.min(1, 0.35 + level / 64))
    for (let row = 0; row < H; row++) {
      let c = 0
      for (let p = row * W, end = p + W; p < end; p++) {
        c += coverage[p]!
        if (c <= 1e-9 || owner[p] !== BAND_NONE) continue
        pixels[p] = shades[c >= 1 ? 64 : (c * 64) | 0]!
        owner[p] = BAND_SMALL
      }
    }
  }
  return drawn
}

function mix(a: number, b: number, t: number): number {
  const ch = (shift: number) => {
    const x = (a >>> shift) & 0xff
    const y = (b >>> shift) & 0xff
    return Math.round(x + (y - x) * t)
  }
  return rgba(ch(0), ch(8), ch(16))
}

/**
 * A colour per band: its hue by its alloc's stack where the trace has stacks (one call site, one
 * hue), else by the band, from `palette`; its shade by the band, lightened or darkened, so that
 * neighbouring bands of one call site still read apart.
 */
export function bandColors(bands: AllocBands, stack: Int32Array, palette: Uint32Array): Uint32Array {
  const out = new Uint32Array(bands.count)
  const shades = [0, 0.2, -0.15, 0.35, -0.28]
  const shaded: Uint32Array[] = shades.map((t) => palette.map((color) => (t === 0 ? color : tint(color, t))))
  for (let b = 0; b < bands.count; b++) {
    const s = stack[bands.allocEvent[b]!] ?? -1
    const h = Math.imul((s >= 0 ? s : b) + 1, 0x9e3779b1) >>> 0
    const shade = (Math.imul(b + 1, 0x85ebca6b) >>> 0) % shades.length
    out[b] = shaded[shade]![h % palette.length]!
  }
  return out
}
