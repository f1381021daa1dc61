// Rasterizes one strategy's memory after event e into a pixel buffer (RGBA as little-endian
// 32-bit words) and an owner buffer (which block or region each pixel shows, for hovering).
// Synchronous and allocation-free per frame: a frame is a pass over the records with typed-array
// fills, so 100k live blocks draw in a few milliseconds with or without a GPU.
import { endedWithin } from './interval-index.ts'
import { blocksPresentAt, NEVER, RegionKind, regionsPresentAt, type StrategyModel } from './model.ts'
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

export function rasterize(
  model: StrategyModel,
  placed: PlacedModel,
  request: DrawRequest,
  palette: MapPalette,
  pixels: Uint32Array,
  owner: Int32Array,
): DrawResult {
  const { width, height, view, event: e } = request
  const count = width * height
  const bpp = view.length / count
  const v0 = view.start
  pixels.fill(palette.unreserved, 0, count)
  owner.fill(OWNER_NONE, 0, count)
  const toPixel = (linear: number) => (linear - v0) / bpp

  // Regions: address space first, then memory and mappings over it.
  const r = model.regions
  const regions = regionsPresentAt(model, e)
  for (let pass = 0; pass < 2; pass++) {
    for (const k of regions) {
      const isSpace = r.kind[k] === RegionKind.addressSpace
      if ((pass === 0) !== isSpace) continue
      const lin = placed.regionLinear[k]!
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

  // Blocks: ghosts of recent frees, then live blocks (pending ones in their own colour).
  const b = model.blocks
  const window = request.recentWindow
  const recentFrom = e - window
  // Ghosts: the blocks whose interval ended within the window (few: about a second of playback).
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
      const lin = placed.blockLinear[k]!
      const x0 = toPixel(lin)
      const x1 = toPixel(lin + b.size[k]!)
      if (x1 <= 0 || x0 >= count) continue
      const p0 = Math.max(0, Math.floor(x0))
      const p1 = Math.min(count, Math.max(Math.floor(x0) + 1, Math.ceil(x1)))
      fillPixels(pixels, tint(palette.freedGhost, ((e - to) / window) * 0.8), p0, p1)
    }
  }

  // Live blocks: up to 100k a frame, so the loop reads typed arrays only and paints short runs
  // by hand (a typed-array fill() call costs more than the few pixels most blocks cover).
  const present = blocksPresentAt(model, e)
  const blockLinear = placed.blockLinear
  const { size, requested, from: fromEvent, deadFrom, pendingFrom } = b
  const categories = palette.categories
  const categoryCount = categories.length
  const category = request.category
  const selected = request.selected
  const scale = 1 / bpp
  let liveBlocksDrawn = 0
  for (let i = 0; i < present.length; i++) {
    const k = present[i]!
    const lin = blockLinear[k]! - v0
    const x0 = lin * scale
    const x1 = (lin + size[k]!) * scale
    if (x1 <= 0 || x0 >= count) continue
    let p0 = Math.floor(x0)
    let p1 = Math.ceil(x1)
    if (p1 <= p0) p1 = p0 + 1
    if (p0 < 0) p0 = 0
    if (p1 > count) p1 = count
    const dead = e >= deadFrom[k]!
    if (!dead) liveBlocksDrawn++
    const pending = dead || e >= pendingFrom[k]!
    let color = dead ? palette.dead : pending ? palette.pending : categories[category[k]! % categoryCount]!
    const from = fromEvent[k]!
    if (window > 0 && from > recentFrom && !pending) color = tint(color, 0.55 * (1 - (e - from) / window))
    if (k === selected) color = tint(color, -0.45)
    // The requested part in the block's colour, the rounding waste after it.
    let requestedEnd = p1
    if (!pending) {
      requestedEnd = Math.ceil((lin + requested[k]!) * scale)
      if (requestedEnd < p0 + 1) requestedEnd = p0 + 1
      if (requestedEnd > p1) requestedEnd = p1
    }
    fillPixels(pixels, color, p0, requestedEnd)
    if (requestedEnd < p1) fillPixels(pixels, palette.waste, requestedEnd, p1)
    if (p1 - p0 >= 4 && x0 >= 0) pixels[p0] = tint(color, -palette.edgeDarken)
    fillOwner(owner, k, p0, p1)
  }
  if (palette.segmentOutline !== undefined) outlineSegments(model, placed, regions, request, palette.segmentOutline, pixels)
  return { liveBlocksDrawn, bytesPerPixel: bpp }
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

function fillOwner(owner: Int32Array, k: number, p0: number, p1: number): void {
  if (p1 - p0 > 24) owner.fill(k, p0, p1)
  else for (let p = p0; p < p1; p++) owner[p] = k
}
