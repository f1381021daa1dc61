// The allocation timeline's layout (src-renderer/viz/alloc-timeline.ts): bands keep their offset
// while live, allocs fill the lowest gap they fit, frees merge gaps, lifetimes are alloc→free, and
// the rasterizer draws what is in view.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import {
  allocBands,
  bandXs,
  BAND_NONE,
  BAND_SMALL,
  eventAtX,
  LIVE,
  newBandScratch,
  rasterizeBands,
  xOfEvent,
} from '../../../../src-renderer/viz/alloc-timeline.ts'

/** A trace from [kind, id, size, device?] rows. */
function trace(rows: [number, number, number, number?][]) {
  return {
    kind: Uint8Array.from(rows.map((r) => r[0])),
    id: Uint32Array.from(rows.map((r) => r[1])),
    size: Float64Array.from(rows.map((r) => r[2])),
    device: Uint16Array.from(rows.map((r) => r[3] ?? 0)),
  }
}

describe('allocation timeline layout', () => {
  it('stacks live allocations and refills the lowest gap a free leaves', () => {
    const t = trace([
      [0, 0, 100], // a at 0
      [0, 1, 50], // b at 100
      [0, 2, 30], // c at 150
      [1, 1, 0], // free b: gap [100, 150)
      [0, 3, 40], // d fits the gap: 100
      [0, 4, 20], // e: the rest of the gap is 10, too small: top 180
      [2, 0, 0], // a marker
      [1, 2, 0], // free c: [150,180) merges with [140,150) into [140,180)
      [0, 5, 40], // f: [140,180) is 40: fits exactly
      [1, 0, 0],
    ])
    const b = allocBands(t.kind, t.id, t.size, t.device)
    assert.equal(b.count, 6)
    assert.deepEqual([...b.offset], [0, 100, 150, 100, 180, 140])
    assert.deepEqual([...b.allocEvent], [0, 1, 2, 4, 5, 8])
    assert.deepEqual([...b.freeEvent], [9, 3, 7, LIVE, LIVE, LIVE])
    assert.equal(b.lanes[0]!.peak, 200)
    assert.equal(b.bandOfId[3], 3)
  })

  it('places every alloc in the lowest gap it fits in, however many gaps there are (against a plain first fit)', () => {
    let seed = 12345
    const random = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 4294967296
    for (const [events, maxSize] of [
      [20_000, 4096],
      [20_000, 1 << 22],
    ] as const) {
      const rows: [number, number, number][] = []
      const live: number[] = []
      let next = 0
      for (let i = 0; i < events; i++) {
        // Mostly allocs until a few thousand are live, then frees and allocs in turns: hundreds of gaps.
        if (live.length > 0 && (live.length > 3000 || random() < 0.45)) {
          const k = Math.floor(random() * live.length)
          rows.push([1, live[k]!, 0])
          live[k] = live[live.length - 1]!
          live.pop()
        } else {
          rows.push([0, next, 1 + Math.floor(random() * maxSize)])
          live.push(next++)
        }
      }
      // Reference: gaps as a plain list, sorted, first fit by walking all of them.
      const gaps: [number, number][] = []
      let top = 0
      let peak = 0
      const at = new Map<number, [number, number]>()
      const expected: number[] = []
      for (const [kind, id, size] of rows) {
        if (kind === 0) {
          const g = gaps.findIndex(([s, e]) => e - s >= size)
          let o: number
          if (g >= 0) {
            o = gaps[g]![0]
            if (gaps[g]![1] - o === size) gaps.splice(g, 1)
            else gaps[g]![0] = o + size
          } else {
            o = top
            top += size
            peak = Math.max(peak, top)
          }
          at.set(id, [o, size])
          expected.push(o)
        } else {
          const [o, size] = at.get(id)!
          let start = o
          let end = o + size
          let g = gaps.findIndex(([s]) => s > o)
          if (g < 0) g = gaps.length
          if (g > 0 && gaps[g - 1]![1] === start) start = gaps.splice(--g, 1)[0]![0]
          if (g < gaps.length && gaps[g]![0] === end) end = gaps.splice(g, 1)[0]![1]
          if (end >= top) top = start
          else gaps.splice(g, 0, [start, end])
        }
      }
      const t = trace(rows)
      const b = allocBands(t.kind, t.id, t.size, t.device)
      assert.deepEqual([...b.offset], expected, `sizes up to ${maxSize}`)
      assert.equal(b.lanes[0]!.peak, peak)
    }
  })

  it('a free at the top lowers it, merging with the gaps below', () => {
    const t = trace([
      [0, 0, 10],
      [0, 1, 10],
      [0, 2, 10],
      [1, 1, 0], // gap [10, 20)
      [1, 2, 0], // top falls to 10, taking the gap
      [0, 3, 5], // at 10
    ])
    const b = allocBands(t.kind, t.id, t.size, t.device)
    assert.deepEqual([...b.offset], [0, 10, 20, 10])
  })

  it('keeps one stack per device and ignores frees of unknown ids', () => {
    const t = trace([
      [0, 0, 10, 0],
      [0, 1, 20, 1],
      [0, 2, 5, 1],
      [1, 9, 0, 0],
    ])
    const b = allocBands(t.kind, t.id, t.size, t.device)
    assert.deepEqual(
      b.lanes.map((l) => l.device),
      [0, 1],
    )
    assert.deepEqual([...b.lane], [0, 1, 1])
    assert.deepEqual([...b.offset], [0, 0, 20])
    assert.equal(b.lanes[1]!.peak, 25)
  })

  it('keeps a stack of its own per memory pool (a CUDA graph pool)', () => {
    const t = trace([
      [0, 0, 10],
      [0, 1, 20],
      [0, 2, 5],
    ])
    const b = allocBands(t.kind, t.id, t.size, t.device, Uint32Array.from([0, 1, 0]))
    assert.deepEqual(
      b.lanes.map((l) => [l.device, l.pool, l.peak]),
      [
        [0, 0, 15],
        [0, 1, 20],
      ],
    )
    assert.deepEqual([...b.offset], [0, 0, 10])
  })

  it('x extents in events and in time, the playhead and back', () => {
    const t = trace([
      [0, 0, 10],
      [0, 1, 10],
      [1, 0, 0],
    ])
    const b = allocBands(t.kind, t.id, t.size)
    const ev = bandXs(b, 'event')
    assert.deepEqual([...ev.x0], [0, 1])
    assert.deepEqual([...ev.x1], [2, 3])
    const time = Float64Array.from([1000, 2000, 5000])
    const tm = bandXs(b, 'time', time)
    assert.deepEqual([...tm.x0], [1000, 2000])
    assert.deepEqual([...tm.x1], [5000, 5000])
    assert.equal(eventAtX(xOfEvent(1, 'time', time), 'time', time), 1)
    assert.equal(eventAtX(xOfEvent(2, 'event'), 'event'), 2)
  })

  it('draws bands where they are and sums thinner ones', () => {
    // Band 0: 90 bytes over events [0, 4); band 1: 1 byte, thinner than a pixel.
    const t = trace([
      [0, 0, 90],
      [0, 1, 1],
      [1, 1, 0],
      [2, 0, 0],
      [1, 0, 0],
    ])
    const b = allocBands(t.kind, t.id, t.size)
    const xs = bandXs(b, 'event')
    const W = 5
    const H = 10
    const pixels = new Uint32Array(W * H)
    const owner = new Int32Array(W * H)
    const drawn = rasterizeBands(
      b,
      xs,
      { width: W, height: H, lane: 0, view: { x0: 0, x1: 5, yMax: 100 }, colors: Uint32Array.from([0xff0000ff, 0xff00ff00]), background: 0, small: 0xffffffff },
      pixels,
      owner,
      newBandScratch(W * H),
    )
    assert.equal(drawn, 2)
    // Band 0 fills rows 1..9 of columns 0..3; column 4 is after its free.
    assert.equal(owner[9 * W + 0], 0)
    assert.equal(owner[1 * W + 3], 0)
    assert.equal(owner[9 * W + 4], BAND_NONE)
    assert.equal(owner[0 * W + 0], BAND_NONE)
    // Band 1 (bytes 90..91, events [1, 2)) is thinner than a pixel: a shade at row 0, column 1.
    assert.equal(owner[0 * W + 1], BAND_SMALL)
  })
})
