// The private-pool pass of the PyTorch import (pools.ts): each block gets the pool of the segment
// that held its address when it was allocated, against a model that scans every segment, and at a
// cost of O(n log n) in the segments whatever order they come in.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { SegmentOp, segmentPools, type ListedSegment, type SegmentLog } from '../../../../../src-main/services/import/pytorch/pools.ts'

const MiB = 2 ** 20
const BASE = 0x7f00_0000_0000

describe('private pools: which segment held each block', () => {
  it('200,000 segments reserved at descending addresses, one in a private pool: seconds, not minutes, and every block in its pool', () => {
    const n = 200_000
    const log: SegmentLog = []
    const addressById = new Float64Array(n)
    const listed: ListedSegment[] = []
    for (let k = 0; k < n; k++) {
      const address = BASE + (n - k) * 2 * MiB
      log.push(k, SegmentOp.reserve, address, 2 * MiB)
      addressById[k] = address + 512
      listed.push({ address, size: 2 * MiB, pool: k === n / 2 ? 1 : 0 })
    }
    const started = performance.now()
    const pools = segmentPools(log, n, addressById, listed)
    const ms = performance.now() - started
    assert.ok(ms < 5000, `took ${ms.toFixed(0)} ms`)
    assert.equal(pools.unknownSegments, 0)
    assert.equal(pools.unknownBlocks, 0)
    assert.equal(
      pools.poolById.reduce((a, p) => a + p, 0),
      1,
    )
    assert.equal(pools.poolById[n / 2], 1)
  })

  it('reserves, releases, maps and partial unmaps in random order give each block the pool a scan of every live piece gives', () => {
    let seed = 11
    const next = (k: number) => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0
      return seed % k
    }
    for (let round = 0; round < 100; round++) {
      const log: SegmentLog = []
      const addresses: number[] = []
      // The model: live pieces [start, end, segment], scanned in full for every question.
      let live: [number, number, number][] = []
      const blockSeg: number[] = []
      const segs: number[] = [] // the ordinal of each logged reserve or map
      for (let step = 0; step < 40; step++) {
        const choice = next(5)
        const start = BASE + next(32) * 2 * MiB
        const size = (1 + next(4)) * 2 * MiB
        if (choice <= 1) {
          // Segments never overlap: the device gives each its own range.
          if (live.some(([s, e]) => s < start + size && e > start)) continue
          log.push(addresses.length, choice === 0 ? SegmentOp.reserve : SegmentOp.map, start, size)
          live.push([start, start + size, segs.length])
          segs.push(start)
        } else if (choice === 2 && live.length > 0) {
          const [s] = live[next(live.length)]!
          log.push(addresses.length, SegmentOp.release, s, 0)
          live = live.filter(([x]) => x !== s)
        } else if (choice === 3) {
          log.push(addresses.length, SegmentOp.unmap, start, size)
          const end = start + size
          live = live.flatMap(([s, e, g]): [number, number, number][] => {
            if (e <= start || s >= end) return [[s, e, g]]
            return [...(s < start ? [[s, start, g] as [number, number, number]] : []), ...(e > end ? [[end, e, g] as [number, number, number]] : [])]
          })
        } else {
          const address = BASE + next(40) * 2 * MiB + 512
          addresses.push(address)
          blockSeg.push(live.find(([s, e]) => address >= s && address < e)?.[2] ?? -1)
        }
      }
      // Each segment live at the end is listed in pool 1 + its ordinal, so a block's pool names its segment.
      const listed: ListedSegment[] = live.map(([s, e, g]) => ({ address: s, size: e - s, pool: 1 + g }))
      const byStart = new Map(live.map(([s, , g]) => [s, g]))
      const pools = segmentPools(log, addresses.length, Float64Array.from(addresses), listed)
      blockSeg.forEach((g, id) => {
        const atEnd = g >= 0 && [...byStart.values()].includes(g)
        if (atEnd) assert.equal(pools.poolById[id], 1 + g, `round ${round}, block ${id}`)
        else assert.equal(pools.poolById[id], 0, `round ${round}, block ${id}: no pool known`)
      })
    }
  })
})
