// The event list and "follow" (src-renderer/viz/events.ts) and the segment outlines of the maps
// (src-renderer/viz/draw.ts), on a small layout built by hand: rows interleave segment events with
// request events, a block's alloc is found from its event, following a block finds its alloc and
// free and every block at its address, and a segment's outline is drawn around it.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { allocBands } from '../../../../src-renderer/viz/alloc-timeline.ts'
import { rasterize, rgba, type MapPalette } from '../../../../src-renderer/viz/draw.ts'
import { allocEventOf, blockOfAlloc, eventRows, follow, rowOfEvent, stepFollowed } from '../../../../src-renderer/viz/events.ts'
import { placeModel, wholeView } from '../../../../src-renderer/viz/layout.ts'
import { buildStrategyModel, Op } from '../../../../src-renderer/viz/model.ts'

// Request trace: alloc 0 (64), alloc 1 (64), free 0, alloc 2 (64, reuses 0's address), free 1,
// trim (block 2 stays live: the layout lets it go with the segment).
const kind = Uint8Array.from([0, 0, 1, 0, 1, 4])
const id = Uint32Array.from([0, 1, 0, 2, 1, 0])
const size = Float64Array.from([64, 64, 0, 64, 0, 0])
// Its layout: a 1 KiB segment reserved at event 0 and released at the trim.
const rows: [number, bigint, number, number][] = [
  [Op.regionReserve, 0x1000n, 1024, 0],
  [Op.alloc, 0x1000n, 64, 0],
  [Op.alloc, 0x1040n, 64, 1],
  [Op.free, 0x1000n, 64, 2],
  [Op.alloc, 0x1000n, 64, 3],
  [Op.free, 0x1040n, 64, 4],
  [Op.free, 0x1000n, 64, 5],
  [Op.regionRelease, 0x1000n, 1024, 5],
]
const model = buildStrategyModel({
  op: Uint8Array.from(rows.map((r) => r[0])),
  address: BigUint64Array.from(rows.map((r) => r[1])),
  size: Float64Array.from(rows.map((r) => r[2])),
  requested: Float64Array.from(rows.map((r) => r[2])),
  stream: new Uint32Array(rows.length),
  event: Uint32Array.from(rows.map((r) => r[3])),
})
const bands = allocBands(kind, id, size)

describe('event list and follow', () => {
  it('interleaves segment events before the request event they served', () => {
    const r = eventRows(kind.length, model)
    assert.equal(r.count, kind.length + 2)
    assert.deepEqual([...r.event], [0, 0, 1, 2, 3, 4, 5, 5])
    assert.deepEqual([...r.region], [0, -1, -1, -1, -1, -1, 1, -1])
    assert.equal(rowOfEvent(r, 0), 1)
    assert.equal(rowOfEvent(r, 5), 7)
    assert.deepEqual([...eventRows(kind.length, null).region], [-1, -1, -1, -1, -1, -1])
  })

  it('finds the block of an alloc or a free', () => {
    assert.equal(blockOfAlloc(model, 3), 2)
    assert.equal(blockOfAlloc(model, 2), -1)
    assert.equal(allocEventOf(kind, id, bands, 4), 1)
    assert.equal(allocEventOf(kind, id, bands, 5), -1)
  })

  it('follows a block: its alloc and free, and what else lived at its address', () => {
    const f = follow(kind, id, bands, model, 0, 0)
    assert.equal(f.id, 0)
    assert.equal(f.address, 0x1000)
    assert.deepEqual([...f.own], [0, 2])
    assert.deepEqual([...f.events], [0, 2, 3])
    assert.equal(f.blocks, 2)
    assert.equal(stepFollowed(f.events, 0, 1), 2)
    assert.equal(stepFollowed(f.events, 5, 1), 0)
    assert.equal(stepFollowed(f.events, 2, -1), 0)
    assert.equal(stepFollowed(f.events, 0, -1), 3)
  })

  it('outlines a segment on the map, over its blocks', () => {
    const placed = placeModel(model)
    const W = 16
    const H = 8
    const palette: MapPalette = {
      unreserved: rgba(255, 255, 255),
      addressSpace: rgba(200, 200, 200),
      free: rgba(128, 128, 128),
      waste: rgba(255, 0, 0),
      pending: rgba(255, 255, 0),
      dead: rgba(100, 0, 0),
      edgeDarken: 0,
      freedGhost: rgba(50, 50, 50),
      categories: Uint32Array.from([rgba(0, 0, 255)]),
      segmentOutline: rgba(0, 0, 0),
    }
    const request = { width: W, height: H, view: wholeView(placed.spans), event: 1, recentWindow: 0, category: new Uint32Array(3), selected: -1 }
    const pixels = new Uint32Array(W * H)
    rasterize(model, placed, request, palette, pixels, new Int32Array(W * H))
    const third = (c: number) => rgba(Math.round(((c & 0xff) * 2) / 3), Math.round((((c >>> 8) & 0xff) * 2) / 3), Math.round((((c >>> 16) & 0xff) * 2) / 3))
    // The segment fills the view: its first and last rows are outlined, the rows between are not.
    // After event 1 its first 128 bytes (the top row) are blocks.
    assert.equal(pixels[0], third(rgba(0, 0, 255)), 'the top row over a block')
    assert.equal(pixels[W + 1], rgba(128, 128, 128), 'the second row: free memory as it is')
    assert.equal(pixels[(H - 1) * W + 3], third(rgba(128, 128, 128)), 'the bottom row')
    assert.equal(pixels[3 * W + 12], rgba(128, 128, 128), 'inside: free memory as it is')
    const plain = new Uint32Array(W * H)
    rasterize(model, placed, request, { ...palette, segmentOutline: undefined }, plain, new Int32Array(W * H))
    assert.equal(plain[(H - 1) * W + 3], rgba(128, 128, 128), 'without an outline colour, no outline')
  })
})
