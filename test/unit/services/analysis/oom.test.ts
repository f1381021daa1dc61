// The out-of-memory summary on real recordings (test/fixtures/pytorch/real/oom_fraction__*: a
// program under a 2 GiB per-process memory fraction that ran out of memory, PyTorch 2.11 on an
// H100, with PyTorch's own out-of-memory message beside each snapshot): the request, the reserved
// and free memory at the failure as PyTorch's message states them, a true shortage, and implied
// limit bounds that contain the real limit.
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'

import { heldAt, oomSummary } from '../../../../src-main/services/analysis/oom.ts'
import { openInput } from '../../../../src-main/services/import/open-input.ts'
import { formatBytes } from '../../../../src-main/services/units.ts'
import { LayoutOp, allocateLayout } from '../../../../src-shared/layout.ts'
import { sweepLayout } from '../../../../src-shared/layout-accounting.ts'
import { oomLimitWords, oomVerdictWords, type OomSummary } from '../../../../src-shared/oom.ts'

const DIR = join(import.meta.dirname, '../../../fixtures/pytorch/real')
const MiB = 1024 ** 2
const GiB = 1024 ** 3

interface Stats {
  limit_bytes: number
  oom: { happened: boolean; message: string }
}

async function summary(name: string): Promise<{ s: OomSummary; stats: Stats }> {
  const input = await openInput(join(DIR, `${name}.pickle`))
  const s = oomSummary(input.trace, input.strategies)
  assert.ok(s, `${name} has a recorded out-of-memory`)
  return { s, stats: JSON.parse(readFileSync(join(DIR, `${name}.stats.json`), 'utf8')) as Stats }
}

/** "… 1.70 GiB is allocated by PyTorch, and 8.06 MiB is reserved by PyTorch but unallocated." */
function pytorchSays(message: string): { tried: number; unallocated: number } {
  const unit = (n: string, u: string) => Number(n) * (u === 'GiB' ? GiB : u === 'MiB' ? MiB : 1024)
  const tried = /Tried to allocate ([\d.]+) (GiB|MiB)/.exec(message)!
  const free = /and ([\d.]+) (GiB|MiB|KiB) is reserved by PyTorch but unallocated/.exec(message)!
  return { tried: unit(tried[1]!, tried[2]!), unallocated: unit(free[1]!, free[2]!) }
}

describe('the out-of-memory summary', () => {
  for (const name of ['oom_fraction__default', 'oom_fraction__gc06', 'oom_fraction__nonsplit', 'oom_fraction__expandable']) {
    it(`${name}: what failed, what was held, a true shortage, the limit`, async () => {
      const { s, stats } = await summary(name)
      const said = pytorchSays(stats.oom.message)
      assert.equal(s.count, 1)
      assert.equal(Math.round(s.size / MiB), Math.round(said.tried / MiB), 'the request PyTorch names')
      assert.equal(s.stream, '0')
      assert.match(`${s.frame?.filename}:${s.frame?.line}`, /\.py:\d+$/, 'the headline is a Python frame')
      const l = s.layout!
      assert.ok(Math.abs(l.reserved - 1.7 * GiB) < 0.05 * GiB || Math.abs(l.reserved - 1.76 * GiB) < 0.02 * GiB, `reserved ${formatBytes(l.reserved)}`)
      assert.ok(l.free < 100 * MiB && l.largestFree <= l.free && l.largestFree < s.size)
      assert.equal(s.verdict, 'shortage')
      assert.match(oomVerdictWords(s, formatBytes), /reserved, .* of it free, largest free block .*: a true shortage — the request needed 484 MiB more/)
      const limit = s.limit!
      assert.equal(limit.source, 'fraction')
      assert.ok(limit.lowBytes <= stats.limit_bytes && stats.limit_bytes < limit.highBytes, `${limit.lowBytes} ≤ ${stats.limit_bytes} < ${limit.highBytes}`)
      assert.match(oomLimitWords(s, formatBytes)!, /^at least 1\.\d+ GiB and below 2\.\d+ GiB/)
    })
  }

  it('reserved at the failure on the default settings is 1.70 GiB, with the free memory PyTorch reported to within 1 MiB', async () => {
    const { s, stats } = await summary('oom_fraction__default')
    assert.equal(formatBytes(s.layout!.reserved), '1.70 GiB')
    assert.ok(Math.abs(s.layout!.free - pytorchSays(stats.oom.message).unallocated) < MiB)
  })

  it("expandable segments: free memory is exactly PyTorch's reserved but unallocated (pages mapped and unmapped in parts)", async () => {
    const { s, stats } = await summary('oom_fraction__expandable')
    assert.equal((s.layout!.free / MiB).toFixed(2), (pytorchSays(stats.oom.message).unallocated / MiB).toFixed(2))
  })

  it('tells fragmentation from shortage: enough free memory, no block large enough', () => {
    const layout = allocateLayout(4)
    const ops = [
      [LayoutOp.regionReserve, 0x1000_0000n, 100 * MiB],
      [LayoutOp.alloc, 0x1000_0000n + 10n * BigInt(MiB), 20 * MiB],
      [LayoutOp.alloc, 0x1000_0000n + 60n * BigInt(MiB), 20 * MiB],
      [LayoutOp.alloc, 0x1000_0000n + 90n * BigInt(MiB), 10 * MiB],
    ] as const
    ops.forEach(([op, a, size], k) => {
      layout.op[k] = op
      layout.address[k] = a
      layout.size[k] = size
      layout.time[k] = k
    })
    const held = heldAt(layout, 10)
    assert.deepEqual(held, { reserved: 100 * MiB, allocated: 50 * MiB, free: 50 * MiB, largestFree: 30 * MiB, segments: 1 })
    const s: OomSummary = { event: 5, count: 1, size: 40 * MiB, need: 40 * MiB, stream: '0', layout: held, verdict: 'fragmentation' }
    assert.equal(
      oomVerdictWords(s, formatBytes),
      '100 MiB reserved, 50.0 MiB of it free, largest free block 30.0 MiB: fragmentation — 50.0 MiB free but no block of 40.0 MiB',
    )
  })
})

/** A layout of these events, at times 0, 1, 2 … */
function layoutOf(ops: readonly (readonly [number, bigint, number])[]): ReturnType<typeof allocateLayout> {
  const layout = allocateLayout(ops.length)
  ops.forEach(([op, a, size], k) => {
    layout.op[k] = op
    layout.address[k] = a
    layout.size[k] = size
    layout.time[k] = k
  })
  return layout
}

describe('what the recorded layout held, at a cost that grows with events, never with bytes', () => {
  const PAGE = 2 * MiB
  const BASE = 0x7f00_0000_0000n

  for (const exponent of [45, 52]) {
    it(`a 2^${exponent}-byte segment_map with a block in it: held in milliseconds, not page by page`, () => {
      const started = performance.now()
      const layout = layoutOf([
        [LayoutOp.map, BASE, 2 ** exponent],
        [LayoutOp.alloc, BASE, 512],
        [LayoutOp.unmap, BASE + BigInt(2 ** (exponent - 1)), 2 ** (exponent - 1)],
        [LayoutOp.failure, 0n, 2 ** exponent],
      ])
      const held = heldAt(layout, 3)
      assert.deepEqual(held, {
        reserved: 2 ** (exponent - 1),
        allocated: 512,
        free: 2 ** (exponent - 1) - 512,
        largestFree: 2 ** (exponent - 1) - 512,
        segments: 1,
      })
      assert.ok(performance.now() - started < 1000, `took ${(performance.now() - started).toFixed(0)} ms`)
    })
  }

  it('an unmap of 2^52 bytes over a 2 MiB mapping, then the failure: nothing held, in milliseconds (it hung page by page)', () => {
    const started = performance.now()
    const layout = layoutOf([
      [LayoutOp.map, BASE, PAGE],
      [LayoutOp.unmap, BASE, 2 ** 52],
      [LayoutOp.failure, 0n, PAGE],
    ])
    assert.deepEqual(heldAt(layout, 2), { reserved: 0, allocated: 0, free: 0, largestFree: 0, segments: 0 })
    assert.ok(performance.now() - started < 1000, `took ${(performance.now() - started).toFixed(0)} ms`)
  })

  it('maps and unmaps that overlap in any order give the stretches a page-by-page model holds (the last event over a page wins), and reserved bytes by the one accounting', () => {
    let seed = 7
    const next = (n: number) => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0
      return seed % n
    }
    for (let round = 0; round < 200; round++) {
      const ops: [number, bigint, number][] = []
      const model = new Set<number>()
      for (let k = 0; k < 12; k++) {
        const op = next(3) === 0 ? LayoutOp.unmap : LayoutOp.map
        const first = next(40)
        // Sizes that are not whole pages round up to one, as PyTorch's pages do.
        const size = (1 + next(8)) * PAGE - (next(2) === 0 ? 0 : 4096)
        ops.push([op, BASE + BigInt(first * PAGE), size])
        for (let p = first; p < first + Math.ceil(size / PAGE); p++) op === LayoutOp.map ? model.add(p) : model.delete(p)
      }
      const pages = [...model].sort((a, b) => a - b)
      const stretches = pages.filter((p, i) => i === 0 || pages[i - 1] !== p - 1).length
      const layout = layoutOf(ops)
      const held = heldAt(layout, ops.length)
      // Reserved bytes are the figure every reader gives (the page's map, top, the replay), where
      // a map over a range still mapped counts again: not the pages painted.
      assert.equal(held.reserved, sweepLayout(layout).finalReserved, `round ${round}: reserved`)
      assert.equal(held.segments, stretches, `round ${round}: stretches`)
    }
  })
})
