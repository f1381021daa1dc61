// Where each byte of a strategy's address space is drawn. A strategy's memory lies scattered over
// a 64-bit address space; the map packs every range it ever used (regions, VA reservations, and
// blocks outside them) into one linear space, in address order with a small gap between ranges,
// so positions never move while the trace plays. The linear space is then drawn in wrapped rows:
// pixel p of the canvas (row-major) covers [viewStart + p·bytesPerPixel, + bytesPerPixel).
// Pure functions; no DOM.
import type { StrategyModel } from './model.ts'

export interface AddressSpans {
  /** Sorted, disjoint address ranges. */
  start: Float64Array
  end: Float64Array
  /** Linear position of each span's start. */
  offset: Float64Array
  /** Linear length of everything, gaps included. */
  total: number
}

/** Gap between two spans, in linear bytes: a 1/256th of the whole, so separate ranges read as separate. */
function gapFor(totalBytes: number, spans: number): number {
  return spans > 1 ? Math.max(256, Math.floor(totalBytes / 256 / Math.max(1, Math.sqrt(spans)))) : 0
}

export function addressSpans(model: StrategyModel): AddressSpans {
  const r = model.regions
  const b = model.blocks
  // Blocks are normally inside regions; ones that are not (a strategy that reports none) get spans.
  const fromBlocks = r.count === 0
  const n = fromBlocks ? b.count : r.count
  const address = fromBlocks ? b.address : r.address
  const size = fromBlocks ? b.size : r.size
  const starts = new Float64Array(n)
  const ends = new Float64Array(n)
  for (let k = 0; k < n; k++) {
    starts[k] = address[k]!
    ends[k] = address[k]! + size[k]!
  }
  const merged = union(starts, ends)
  if (!fromBlocks) {
    // Blocks outside every region, if any, join as spans of their own.
    const outsideStarts: number[] = []
    const outsideEnds: number[] = []
    for (let k = 0; k < b.count; k++) {
      const a = b.address[k]!
      if (spanIndex(merged, a) < 0) {
        outsideStarts.push(a)
        outsideEnds.push(a + b.size[k]!)
      }
    }
    if (outsideStarts.length > 0) {
      const all = (inside: Float64Array, outside: number[]) => {
        const out = new Float64Array(inside.length + outside.length)
        out.set(inside)
        out.set(outside, inside.length)
        return out
      }
      return fromMerged(union(all(merged.start, outsideStarts), all(merged.end, outsideEnds)))
    }
  }
  return fromMerged(merged)
}

/**
 * The union of the ranges [starts[k], ends[k]) as sorted, disjoint ranges, ranges that touch joined
 * (sorts both arrays in place). The starts and the ends are sorted apart: how many ranges cover an
 * address depends only on how many start at or before it and end at or before it.
 */
function union(starts: Float64Array, ends: Float64Array): { start: Float64Array; end: Float64Array } {
  starts.sort()
  ends.sort()
  const n = starts.length
  const start: number[] = []
  const end: number[] = []
  let depth = 0
  for (let i = 0, j = 0; j < n;) {
    // A range starting where another ends joins it: starts first at equal addresses.
    if (i < n && starts[i]! <= ends[j]!) {
      if (depth++ === 0) start.push(starts[i]!)
      i++
    } else {
      if (--depth === 0) end.push(ends[j]!)
      j++
    }
  }
  return { start: Float64Array.from(start), end: Float64Array.from(end) }
}

function fromMerged(merged: { start: Float64Array; end: Float64Array }): AddressSpans {
  const { start, end } = merged
  let bytes = 0
  for (let i = 0; i < start.length; i++) bytes += end[i]! - start[i]!
  const gap = gapFor(bytes, start.length)
  const offset = new Float64Array(start.length)
  let position = 0
  for (let i = 0; i < start.length; i++) {
    offset[i] = position
    position += end[i]! - start[i]! + gap
  }
  return { start, end, offset, total: Math.max(1, position - (start.length > 0 ? gap : 0)) }
}

function spanIndex(merged: { start: Float64Array; end: Float64Array }, address: number): number {
  let lo = 0
  let hi = merged.start.length - 1
  while (lo <= hi) {
    const mid = (lo + hi) >> 1
    if (address < merged.start[mid]!) hi = mid - 1
    else if (address >= merged.end[mid]!) lo = mid + 1
    else return mid
  }
  return -1
}

/** Linear position of an address; NaN when it lies in no span. */
export function linearOf(spans: AddressSpans, address: number): number {
  let lo = 0
  let hi = spans.start.length - 1
  while (lo <= hi) {
    const mid = (lo + hi) >> 1
    if (address < spans.start[mid]!) hi = mid - 1
    else if (address >= spans.end[mid]!) lo = mid + 1
    else return spans.offset[mid]! + (address - spans.start[mid]!)
  }
  return Number.NaN
}

/** Address at a linear position; NaN in a gap. */
export function addressOf(spans: AddressSpans, linear: number): number {
  let lo = 0
  let hi = spans.offset.length - 1
  while (lo <= hi) {
    const mid = (lo + hi) >> 1
    const s = spans.offset[mid]!
    const len = spans.end[mid]! - spans.start[mid]!
    if (linear < s) hi = mid - 1
    else if (linear >= s + len) lo = mid + 1
    else return spans.start[mid]! + (linear - s)
  }
  return Number.NaN
}

/** Linear start of every block and region, computed once per model (drawing then needs no search). */
export interface PlacedModel {
  spans: AddressSpans
  blockLinear: Float64Array
  regionLinear: Float64Array
}

export function placeModel(model: StrategyModel): PlacedModel {
  const spans = addressSpans(model)
  const blockLinear = new Float64Array(model.blocks.count)
  for (let k = 0; k < model.blocks.count; k++) blockLinear[k] = linearOf(spans, model.blocks.address[k]!)
  const regionLinear = new Float64Array(model.regions.count)
  for (let k = 0; k < model.regions.count; k++) regionLinear[k] = linearOf(spans, model.regions.address[k]!)
  return { spans, blockLinear, regionLinear }
}

/** The part of the linear space a map shows: [start, start + length). */
export interface MapView {
  start: number
  length: number
}

export function wholeView(spans: AddressSpans): MapView {
  return { start: 0, length: spans.total }
}

/**
 * Zooms a view by `factor` (< 1 zooms in) keeping the linear position at `anchor` (0-1 of the view)
 * in place; no closer than `minBytesPerPixel` (a 256-byte block must stay at least a pixel wide,
 * so the deepest zoom shows single blocks) and no wider than the whole.
 */
export function zoomView(view: MapView, factor: number, anchor: number, total: number, pixels: number, minBytesPerPixel = 16): MapView {
  const length = Math.min(total, Math.max(minBytesPerPixel * pixels, view.length * factor))
  const pivot = view.start + anchor * view.length
  return clampView({ start: pivot - anchor * length, length }, total)
}

export function panView(view: MapView, deltaBytes: number, total: number): MapView {
  return clampView({ start: view.start + deltaBytes, length: view.length }, total)
}

export function clampView(view: MapView, total: number): MapView {
  const length = Math.min(view.length, total)
  const start = Math.min(Math.max(0, view.start), total - length)
  return { start, length }
}
