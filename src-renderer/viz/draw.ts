// Rasterizes one strategy's memory after event e into a pixel buffer (RGBA as little-endian
// 32-bit words) and an owner buffer (which block or region each pixel shows, for hovering).
// Synchronous and allocation-free per frame: a frame is a pass over the records with typed-array
// fills, so 100k live blocks draw in a few milliseconds with or without a GPU.
import { endedWithin, upperBound } from './interval-index.ts'
import { blocksPresentAt, changesBetween, MAX_STEPPED_CHANGES, NEVER, RegionKind, regionsPresentAt, type StrategyModel } from './model.ts'
import type { MapView, PlacedModel } from './layout.ts'

/** Colours as 0xAABBGGRR words (ImageData byte order on little-endian machines). */
export interface MapPalette {
  unreserved: number
  /** Address space reserved but not mapped (VMM). */
  addressSpace: number
  /** Memory the strategy holds that no block uses: cached, free for reuse. */
  free: number
  /** Rounded minus requested: set aside but never asked for. */
  waste: number
  /** Freed on another stream, waiting for its event. */
  pending: number
  /** Freed in a bump allocator, not reusable until the pointer falls back or a reset. */
  dead: number
  /** How much darker (0-1) a block's first pixel is drawn, so neighbouring blocks read as separate. */
  edgeDarken: number
  /** Ghost of a block freed in the recent window. */
  freedGhost: number
  /** Live colours by category (stream, size class, tag or frame). */
  categories: Uint32Array
  /**
   * Colour the outline of each segment (a region of memory or of reserved address space) is mixed
   * toward (a third of the way) over whatever is drawn there; absent: no outlines.
   */
  segmentOutline?: number
}

export interface DrawRequest {
  width: number
  height: number
  view: MapView
  /** The request event whose state is drawn. */
  event: number
  /** Blocks placed or freed within this many events before `event` are highlighted, fading. */
  recentWindow: number
  /** Category of each block (index into palette.categories). */
  category: Uint32Array
  /** Block to outline as selected, or -1. */
  selected: number
}

export interface DrawResult {
  liveBlocksDrawn: number
  /** Bytes per pixel of this view. */
  bytesPerPixel: number
}

export const OWNER_NONE = -1
/** owner values below this are regions: -(OWNER_REGION_BASE) - owner = region index. */
export const OWNER_REGION_BASE = -2

export function rgba(r: number, g: number, b: number, a = 255): number {
  return ((a << 24) | (b << 16) | (g << 8) | r) >>> 0
}

/** Mixes a colour toward white (t > 0) or black (t < 0) by |t|. */
export function tint(color: number, t: number): number {
  const r = color & 0xff
  const g = (color >>> 8) & 0xff
  const b = (color >>> 16) & 0xff
  const target = t > 0 ? 255 : 0
  const w = Math.min(1, Math.abs(t))
  return rgba(Math.round(r + (target - r) * w), Math.round(g + (target - g) * w), Math.round(b + (target - b) * w), (color >>> 24) & 0xff)
}

/**
 * Draws once: a fresh MapRaster's full pass (exports, tests). A map that redraws as the playhead
 * moves keeps its own MapRaster, which redraws only what changed.
 */
export function rasterize(
  model: StrategyModel,
  placed: PlacedModel,
  request: DrawRequest,
  palette: MapPalette,
  pixels: Uint32Array,
  owner: Int32Array,
): DrawResult {
  const raster = new MapRaster()
  const result = raster.draw(model, placed, request, palette, pixels)
  owner.set(raster.owner.subarray(0, request.width * request.height))
  return result
}

/**
 * One map's raster kept from frame to frame. Its base image is the state after an event without
 * the highlights that fade (blocks placed or freed within the recent window, the selected block):
 * regions, then every present block in ascending block order, so where blocks share a pixel the
 * newest shows. As the playhead moves forward by a few events, only the blocks freed, placed or
 * changed state since are redrawn (docs/architecture.md, "Memory maps"): a pixel a freed block
 * shared with another present block is given to the newest block covering it, found from the
 * blocks starting at that pixel and the one block reaching it from the left. Each frame copies
 * the base and draws the highlights and segment outlines over the copy. The result equals a full
 * pass at the same event, pixel for pixel and owner for owner (test/unit/renderer/viz/raster.test.ts).
 */
export class MapRaster {
  /** Which block or region each pixel of the base shows (for hovering): OWNER_NONE, a block, or a region below OWNER_REGION_BASE. */
  owner = new Int32Array(0)
  /** Full passes and incremental updates since this raster was made (for tests and the benchmark). */
  readonly passes = { full: 0, incremental: 0 }
  private base = new Uint32Array(0)
  private cover = new Uint32Array(0)
  private regionPixels = new Uint32Array(0)
  private regionOwner = new Int32Array(0)
  /** Present in-view blocks by first pixel: head[p], then next[k] (-1 ends a list). */
  private head = new Int32Array(0)
  private next = new Int32Array(0)
  /** The span spanOf() computed last: first pixel, end, and end of the requested part (bitwise-not when the first pixel is darkened as the block's edge). */
  private s0 = -1
  private s1 = -1
  private sEnd = 0
  /** What stateOf() found last: the block's colour and edge colour, where its colour ends (then waste), whether its first pixel is its edge. */
  private color = 0
  private edge = 0
  private colorEnd = 0
  private darken = false
  private model: StrategyModel | null = null
  private placed: PlacedModel | null = null
  private palette: MapPalette | null = null
  private category: Uint32Array | null = null
  private width = 0
  private height = 0
  private viewStart = 0
  private viewLength = 0
  private scale = 0
  /** The base's event; -1: none drawn. */
  private event = -1
  private live = 0
  private categoryEdge = new Uint32Array(0)
  private deadEdge = 0
  private pendingEdge = 0
  private unresolved: number[] = []

  /** Draws the state after request.event into `pixels` (width × height words). */
  draw(model: StrategyModel, placed: PlacedModel, request: DrawRequest, palette: MapPalette, pixels: Uint32Array): DrawResult {
    const { width, height, view, event: e } = request
    const count = width * height
    const sameInputs =
      model === this.model &&
      placed === this.placed &&
      palette === this.palette &&
      request.category === this.category &&
      width === this.width &&
      height === this.height &&
      view.start === this.viewStart &&
      view.length === this.viewLength
    if (!sameInputs) this.reset(model, placed, request, palette)
    if (!(sameInputs && e >= this.event && this.event >= 0 && this.advance(e))) this.full(e)
    this.compose(request, pixels)
    if (palette.segmentOutline !== undefined) outlineSegments(model, placed, regionsPresentAt(model, e), request, palette.segmentOutline, pixels)
    return { liveBlocksDrawn: this.live, bytesPerPixel: view.length / count }
  }

  private reset(model: StrategyModel, placed: PlacedModel, request: DrawRequest, palette: MapPalette): void {
    const count = request.width * request.height
    if (this.base.length !== count) {
      this.base = new Uint32Array(count)
      this.owner = new Int32Array(count)
      this.cover = new Uint32Array(count)
      this.regionPixels = new Uint32Array(count)
      this.regionOwner = new Int32Array(count)
      this.head = new Int32Array(count)
    }
    const blocks = model.blocks.count
    if (this.next.length < blocks) this.next = new Int32Array(blocks)
    this.model = model
    this.placed = placed
    this.palette = palette
    this.category = request.category
    this.width = request.width
    this.height = request.height
    this.viewStart = request.view.start
    this.viewLength = request.view.length
    // 1 / (bytes per pixel), not count / length: one ulp apart, a block's last pixel can differ.
    this.scale = 1 / (request.view.length / count)
    this.categoryEdge = palette.categories.map((c) => tint(c, -palette.edgeDarken))
    this.deadEdge = tint(palette.dead, -palette.edgeDarken)
    this.pendingEdge = tint(palette.pending, -palette.edgeDarken)
    this.event = -1
  }

  /** Block k's first pixel in this view, or -1 when it is outside it; its span in s0, s1, sEnd. */
  private spanOf(k: number): number {
    const b = this.model!.blocks
    const count = this.base.length
    const lin = this.placed!.blockLinear[k]! - this.viewStart
    const x0 = lin * this.scale
    const x1 = (lin + b.size[k]!) * this.scale
    if (x1 <= 0 || x0 >= count) return (this.s0 = -1)
    let p0 = Math.floor(x0)
    let p1 = Math.ceil(x1)
    if (p1 <= p0) p1 = p0 + 1
    if (p0 < 0) p0 = 0
    if (p1 > count) p1 = count
    // The requested part in the block's colour, the rounding waste after it.
    let requestedEnd = Math.ceil((lin + b.requested[k]!) * this.scale)
    if (requestedEnd < p0 + 1) requestedEnd = p0 + 1
    if (requestedEnd > p1) requestedEnd = p1
    this.s1 = p1
    this.sEnd = p1 - p0 >= 4 && x0 >= 0 ? ~requestedEnd : requestedEnd
    return (this.s0 = p0)
  }

  /** Draws the regions present after event e into the region layer: what the base shows where no block is. */
  private drawRegions(e: number): void {
    const model = this.model!
    const palette = this.palette!
    const count = this.base.length
    const bpp = this.viewLength / count
    const v0 = this.viewStart
    const toPixel = (linear: number) => (linear - v0) / bpp
    const pixels = this.regionPixels
    const owner = this.regionOwner
    pixels.fill(palette.unreserved)
    owner.fill(OWNER_NONE)
    // Regions: address space first, then memory and mappings over it.
    const r = model.regions
    const regions = regionsPresentAt(model, e)
    for (let pass = 0; pass < 2; pass++) {
      for (const k of regions) {
        const isSpace = r.kind[k] === RegionKind.addressSpace
        if ((pass === 0) !== isSpace) continue
        const lin = this.placed!.regionLinear[k]!
        let p0 = Math.floor(toPixel(lin))
        let p1 = Math.ceil(toPixel(lin + r.size[k]!))
        if (p1 <= 0 || p0 >= count) continue
        if (p1 <= p0) p1 = p0 + 1
        p0 = Math.max(0, p0)
        p1 = Math.min(count, p1)
        const color = isSpace ? palette.addressSpace : palette.free
        pixels.fill(color, p0, p1)
        // A region's first pixel marks where it starts (segments, slabs, buddy pools, granules),
        // so the strategy's structure shows even where no block is live.
        if (p1 - p0 >= 4 && toPixel(lin) >= 0) pixels[p0] = tint(color, -palette.edgeDarken)
        owner.fill(OWNER_REGION_BASE - k, p0, p1)
      }
    }
  }

  /** Redraws the base after event e: regions, then every present block. */
  private full(e: number): void {
    const model = this.model!
    this.drawRegions(e)
    this.base.set(this.regionPixels)
    this.owner.set(this.regionOwner)
    this.cover.fill(0)
    this.head.fill(-1)
    this.live = 0
    let present = blocksPresentAt(model, e)
    for (let i = 1; i < present.length; i++)
      if (present[i]! < present[i - 1]!) {
        present = present.slice().sort()
        break
      }
    const deadFrom = model.blocks.deadFrom
    for (let i = 0; i < present.length; i++) {
      const k = present[i]!
      if (this.spanOf(k) < 0) continue
      this.place(k, e)
      if (e < deadFrom[k]!) this.live++
    }
    this.event = e
    this.passes.full++
  }

  /**
   * Block k's look after event e, before highlights, into color, edge, colorEnd and darken: its
   * category's colour, or all of it pending or dead colour; its requested part in that colour, the
   * rounding waste after it; its first pixel darker when it marks the block's start. After spanOf(k).
   */
  private stateOf(k: number, e: number): void {
    const b = this.model!.blocks
    const palette = this.palette!
    let end = this.sEnd
    this.darken = end < 0
    if (end < 0) end = ~end
    if (e >= b.deadFrom[k]!) {
      this.color = palette.dead
      this.edge = this.deadEdge
      end = this.s1
    } else if (e >= b.pendingFrom[k]!) {
      this.color = palette.pending
      this.edge = this.pendingEdge
      end = this.s1
    } else {
      const c = this.category![k]! % this.categoryEdge.length
      this.color = palette.categories[c]!
      this.edge = this.categoryEdge[c]!
    }
    this.colorEnd = end
  }

  /** Draws a newly present block over the base (it is the newest: every pixel of its span is its own); after spanOf(k). */
  private place(k: number, e: number): void {
    const p0 = this.s0
    const p1 = this.s1
    this.next[k] = this.head[p0]!
    this.head[p0] = k
    const cover = this.cover
    const owner = this.owner
    for (let p = p0; p < p1; p++) {
      cover[p]!++
      owner[p] = k
    }
    this.stateOf(k, e)
    const base = this.base
    fillPixels(base, this.color, p0, this.colorEnd)
    if (this.colorEnd < p1) fillPixels(base, this.palette!.waste, this.colorEnd, p1)
    if (this.darken) base[p0] = this.edge
  }

  /** Paints the pixels block k owns in `color` and `edge` where stateOf(k) put its own. After spanOf(k) and stateOf(k). */
  private paint(target: Uint32Array, k: number, color: number, edge: number): void {
    const p0 = this.s0
    const p1 = this.s1
    const end = this.colorEnd
    const owner = this.owner
    const waste = this.palette!.waste
    for (let p = p0; p < p1; p++) if (owner[p] === k) target[p] = p < end ? color : waste
    if (this.darken && owner[p0] === k) target[p0] = edge
  }

  /** Pixel p goes back to the region layer: no block covers it any more. */
  private uncover(p: number): void {
    this.base[p] = this.regionPixels[p]!
    this.owner[p] = this.regionOwner[p]!
  }

  /** Moves the base forward to event e by the blocks that changed since; false when a full pass is needed. */
  private advance(e: number): boolean {
    const model = this.model!
    const index = model.blockIndex
    const regionIndex = model.regionIndex
    const e1 = this.event
    if (e === e1) return true
    if (!index || !regionIndex) return false
    const changes = changesBetween(model, e1, e)
    if (!changes || changes.count > MAX_STEPPED_CHANGES) return false
    const b = model.blocks
    const r = model.regions
    // A region placed or released: the region layer is drawn again, and shows where no block is.
    const [rg0, rg1] = endedWithin(regionIndex, e1, e)
    const regionsChanged = rg1 > rg0 || upperBound(r.from, r.count, e) !== upperBound(r.from, r.count, e1)
    if (regionsChanged) this.drawRegions(e)
    const { from, to, deadFrom } = b
    const cover = this.cover
    const owner = this.owner
    const base = this.base
    const unresolved = this.unresolved
    unresolved.length = 0
    // Freed: their pixels go back to what is under them, or wait for the newest block sharing them.
    for (let i = changes.ended[0]; i < changes.ended[1]; i++) {
      const k = index.endedOrder[i]!
      if (from[k]! > e1 || this.spanOf(k) < 0) continue
      if (e1 < deadFrom[k]!) this.live--
      const p0 = this.s0
      const p1 = this.s1
      // Out of its first pixel's list (short: the blocks starting in one pixel).
      if (this.head[p0] === k) this.head[p0] = this.next[k]!
      else {
        let q = this.head[p0]!
        while (q >= 0 && this.next[q] !== k) q = this.next[q]!
        if (q < 0) return false
        this.next[q] = this.next[k]!
      }
      for (let p = p0; p < p1; p++) {
        const left = --cover[p]!
        if (owner[p] !== k) continue
        if (left === 0) this.uncover(p)
        else unresolved.push(p)
      }
    }
    // Placed: newer than every block present, so drawn over them.
    for (let k = changes.placed[0]; k < changes.placed[1]; k++) {
      if (to[k]! <= e || this.spanOf(k) < 0) continue
      this.place(k, e)
      if (e < deadFrom[k]!) this.live++
    }
    for (const p of unresolved) {
      const o = owner[p]!
      if (o >= 0 && from[o]! <= e && e < to[o]!) continue
      // Another block freed in this step may have been the last one sharing it.
      if (cover[p] === 0) {
        this.uncover(p)
        continue
      }
      const k = this.newestAt(p, e)
      if (k < 0) return false
      owner[p] = k
      this.spanOf(k)
      this.stateOf(k, e)
      base[p] = this.darken && p === this.s0 ? this.edge : p < this.colorEnd ? this.color : this.palette!.waste
    }
    // Turned pending or dead: their own pixels in their new colour.
    const states = model.stateChanges
    for (let i = changes.states[0]; i < changes.states[1]; i++) {
      const k = states.block[i]!
      if (from[k]! > e1 || to[k]! <= e || this.spanOf(k) < 0) continue
      if (states.event[i] === deadFrom[k] && e1 < deadFrom[k]!) this.live--
      this.stateOf(k, e)
      this.paint(base, k, this.color, this.edge)
    }
    if (regionsChanged) for (let p = 0; p < cover.length; p++) if (cover[p] === 0) this.uncover(p)
    this.event = e
    this.passes.incremental++
    return true
  }

  /**
   * The newest present block covering pixel p (blocks never share bytes, so at most one block
   * that starts left of p reaches into it); -1 when the blocks found do not match the pixel's
   * count, which makes the caller draw the map whole.
   */
  private newestAt(p: number, e: number): number {
    const { from, to } = this.model!.blocks
    let newest = -1
    let found = 0
    for (let k = this.head[p]!; k >= 0; k = this.next[k]!) {
      found++
      if (k > newest) newest = k
    }
    if (found === this.cover[p]) return newest
    for (let q = p - 1; q >= 0; q--) {
      const o = this.owner[q]!
      let reaching = o >= 0 && from[o]! <= e && e < to[o]! && this.spanOf(o) >= 0 && this.s1 > p ? o : -1
      for (let k = this.head[q]!; reaching < 0 && k >= 0; k = this.next[k]!) if (this.spanOf(k) >= 0 && this.s1 > p) reaching = k
      if (reaching >= 0) return found + 1 === this.cover[p] ? Math.max(newest, reaching) : -1
    }
    return -1
  }

  /** The base, then ghosts of blocks freed within the recent window, then the fading and selected blocks. */
  private compose(request: DrawRequest, pixels: Uint32Array): void {
    const model = this.model!
    const palette = this.palette!
    const e = request.event
    const count = this.base.length
    const bpp = this.viewLength / count
    pixels.set(this.base)
    const b = model.blocks
    const window = request.recentWindow
    const recentFrom = e - window
    const cover = this.cover
    if (window > 0) {
      const index = model.blockIndex
      let ghosts: ArrayLike<number>
      if (index) {
        const [g0, g1] = endedWithin(index, recentFrom, e)
        ghosts = index.endedOrder.subarray(g0, g1)
      } else ghosts = Uint32Array.from({ length: b.count }, (_, k) => k)
      for (let i = 0; i < ghosts.length; i++) {
        const k = ghosts[i]!
        const to = b.to[k]!
        if (to === NEVER || to > e || to <= recentFrom || b.from[k]! > e) continue
        const lin = this.placed!.blockLinear[k]!
        const x0 = (lin - this.viewStart) / bpp
        const x1 = (lin + b.size[k]! - this.viewStart) / bpp
        if (x1 <= 0 || x0 >= count) continue
        const p0 = Math.max(0, Math.floor(x0))
        const p1 = Math.min(count, Math.max(Math.floor(x0) + 1, Math.ceil(x1)))
        // Under every present block: only where none is.
        const color = tint(palette.freedGhost, ((e - to) / window) * 0.8)
        for (let p = p0; p < p1; p++) if (cover[p] === 0) pixels[p] = color
      }
    }
    // Blocks placed within the window fade from light to their colour; the selected one is darker.
    const selected = request.selected
    const sorted = !!model.blockIndex
    const k0 = window <= 0 ? 0 : sorted ? upperBound(b.from, b.count, recentFrom) : 0
    const k1 = window <= 0 ? 0 : sorted ? upperBound(b.from, b.count, e) : b.count
    let selectedDrawn = false
    for (let k = k0; k < k1; k++) {
      const from = b.from[k]!
      if (from <= recentFrom || from > e || b.to[k]! <= e || e >= b.pendingFrom[k]! || e >= b.deadFrom[k]! || this.spanOf(k) < 0) continue
      this.stateOf(k, e)
      let color = tint(this.color, 0.55 * (1 - (e - from) / window))
      if (k === selected) {
        color = tint(color, -0.45)
        selectedDrawn = true
      }
      this.paint(pixels, k, color, tint(color, -palette.edgeDarken))
    }
    if (!selectedDrawn && selected >= 0 && selected < b.count && b.from[selected]! <= e && e < b.to[selected]! && this.spanOf(selected) >= 0) {
      this.stateOf(selected, e)
      const color = tint(this.color, -0.45)
      this.paint(pixels, selected, color, tint(color, -palette.edgeDarken))
    }
  }
}

/**
 * Outlines each segment over the blocks: its pixels with no pixel of it above (the first row's
 * worth from its start) or below (the last row's worth to its end), and its first and last pixel.
 * O(width) per segment, whatever its size. Segments narrower than two rows are left as they are
 * (their first pixel is marked already), so a map of many small slabs stays readable.
 */
function outlineSegments(model: StrategyModel, placed: PlacedModel, regions: Uint32Array, request: DrawRequest, outline: number, pixels: Uint32Array): void {
  const { width, height, view } = request
  const count = width * height
  const bpp = view.length / count
  const r = model.regions
  for (const k of regions) {
    if (r.kind[k] === RegionKind.mapping) continue
    const lin = placed.regionLinear[k]!
    const x0 = (lin - view.start) / bpp
    const x1 = (lin + r.size[k]! - view.start) / bpp
    if (x1 <= 0 || x0 >= count || x1 - x0 < 2 * width) continue
    const p0 = Math.max(0, Math.floor(x0))
    const p1 = Math.min(count, Math.ceil(x1))
    // The top edge only where the segment starts in view (else its start is above the view).
    if (x0 >= 0) for (let p = p0; p < Math.min(p1, p0 + width); p++) pixels[p] = mixThird(pixels[p]!, outline)
    if (x1 <= count) for (let p = Math.max(p0, p1 - width); p < p1; p++) pixels[p] = mixThird(pixels[p]!, outline)
    if (x1 <= count && p1 > 0) pixels[p1 - 1] = mixThird(pixels[p1 - 1]!, outline)
  }
}

/** A 0xAABBGGRR colour a third of the way toward another, opaque: an outline that does not hide what it crosses. */
function mixThird(a: number, b: number): number {
  const r = ((a & 0xff) * 2 + (b & 0xff)) / 3
  const g = (((a >>> 8) & 0xff) * 2 + ((b >>> 8) & 0xff)) / 3
  const bl = (((a >>> 16) & 0xff) * 2 + ((b >>> 16) & 0xff)) / 3
  return (0xff000000 | (Math.round(bl) << 16) | (Math.round(g) << 8) | Math.round(r)) >>> 0
}

// Two functions, not one over both array types, so that each call site stays monomorphic.
function fillPixels(pixels: Uint32Array, color: number, p0: number, p1: number): void {
  if (p1 - p0 > 24) pixels.fill(color, p0, p1)
  else for (let p = p0; p < p1; p++) pixels[p] = color
}
