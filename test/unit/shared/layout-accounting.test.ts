// The one layout accounting (src-shared/layout-accounting.ts) against the native replay's own
// counters: every strategy (every configuration the Node tests run, so one the library adds is
// covered) replays every PyTorch fixture, and one sweep of its layout says exactly what the native
// summary says: peaks of requested, rounded and reserved bytes, the request event of the reserved
// peak, the final figures, failures and device calls by kind. Then the rules where a layout could be
// read two ways, on layouts made up for them.
import assert from 'node:assert/strict'
import { readdirSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'

import { openInput } from '../../../src-main/services/import/open-input.ts'
import { replayTrace } from '../../../src-main/services/replay/replay.ts'
import { LayoutOp } from '../../../src-shared/layout.ts'
import { LayoutAccount, peakOfSteps, ReservedSteps, reservedAt, sweepLayout } from '../../../src-shared/layout-accounting.ts'
import { strategyConfigs } from '../services/replay/strategy-configs.ts'

const PYTORCH = join(import.meta.dirname, '..', '..', 'fixtures', 'pytorch')
const FIXTURES = [
  ...['convnet_varimg.pickle', 'inference_mixed.pickle', 'mlp_varbatch.pickle', 'transformer_varseq.pickle', 'mlp_varbatch_overflowed.pickle'].map((f) =>
    join(PYTORCH, f),
  ),
  ...readdirSync(join(PYTORCH, 'real'))
    .filter((f) => f.endsWith('.pickle') && /__(default|expandable)\.pickle$/.test(f))
    .map((f) => join(PYTORCH, 'real', f)),
]

describe('one sweep of a layout equals the native replay on every fixture', () => {
  const configs = strategyConfigs()
  const targets = configs.map((c) => ({ label: c.label, strategy: c.strategy, params: c.params }))
  for (const file of FIXTURES) {
    it(file.slice(PYTORCH.length + 1), async () => {
      const input = await openInput(file)
      const results = await replayTrace(input.trace, targets, { layout: true, buckets: 16 })
      let compared = 0
      for (const r of results) {
        const s = r.summary
        const swept = sweepLayout(r.layout)
        const what = `${r.label} on ${file}`
        assert.equal(swept.peakReserved, s.peakReserved, `${what}: peakReserved`)
        if (s.peakReserved > 0) assert.equal(swept.peakReservedEvent, s.peakReservedEvent, `${what}: peakReservedEvent`)
        assert.equal(swept.finalReserved, s.finalReserved, `${what}: finalReserved`)
        assert.equal(swept.peakRequested, s.peakRequested, `${what}: peakRequested`)
        assert.equal(swept.peakRounded, s.peakRounded, `${what}: peakRounded`)
        assert.equal(swept.finalRequested, s.finalRequested, `${what}: finalRequested`)
        assert.equal(swept.finalRounded, s.finalRounded, `${what}: finalRounded`)
        assert.equal(swept.failures, s.failures, `${what}: failures`)
        const d = s.deviceCallDetail
        // A stream-ordered pool's regions are its pool growing inside the driver, not calls the
        // strategy makes (the replay counts none for it on the simulated backing).
        if (r.strategy !== 'async_pool')
          assert.deepEqual(
            swept.calls,
            { regionAlloc: d.regionAlloc, regionFree: d.regionFree, vaReserve: d.vaReserve, vaRelease: d.vaRelease, map: d.map, unmap: d.unmap },
            `${what}: device calls`,
          )
        // The steps the renderer's model keeps say the same after every event.
        const steps = new ReservedSteps()
        for (let k = 0; k < r.layout.op.length; k++) steps.add(r.layout.op[k]!, Number(r.layout.address[k]!), r.layout.size[k]!, r.layout.event[k]!)
        const made = steps.finish()
        const peak = peakOfSteps(made, s.events)
        assert.equal(peak.reserved, s.peakReserved, `${what}: the steps' peak`)
        if (s.peakReserved > 0) assert.equal(peak.event, s.peakReservedEvent, `${what}: the steps' peak event`)
        assert.equal(reservedAt(made, s.events).reserved, s.finalReserved, `${what}: the steps' final`)
        compared++
      }
      assert.equal(compared, configs.length)
    })
  }
})

/** A layout of [op, address, size, requested, event] rows. */
function layoutOf(rows: [number, number, number, number, number][]) {
  return {
    op: Uint8Array.from(rows, (r) => r[0]),
    address: Float64Array.from(rows, (r) => r[1]),
    size: Float64Array.from(rows, (r) => r[2]),
    requested: Float64Array.from(rows, (r) => r[3]),
    event: Uint32Array.from(rows, (r) => r[4]),
  }
}

describe('the accounting rules', () => {
  it('a trim takes bytes off reserved only while nothing was released by address', () => {
    const pool = layoutOf([
      [LayoutOp.regionReserve, 0, 100, 0, 0],
      [LayoutOp.trim, 0, 40, 0, 1],
    ])
    assert.equal(sweepLayout(pool).finalReserved, 60)
    const caching = layoutOf([
      [LayoutOp.regionReserve, 0, 100, 0, 0],
      [LayoutOp.regionReserve, 100, 50, 0, 0],
      [LayoutOp.regionRelease, 100, 50, 0, 1],
      [LayoutOp.trim, 0, 50, 0, 1],
    ])
    assert.equal(sweepLayout(caching).finalReserved, 100)
  })

  it('a region reserved again at an open address leaves the first reserved for good; a release of nothing open releases nothing', () => {
    const l = layoutOf([
      [LayoutOp.regionReserve, 0, 100, 0, 0],
      [LayoutOp.regionReserve, 0, 30, 0, 1],
      [LayoutOp.regionRelease, 0, 30, 0, 2],
      [LayoutOp.regionRelease, 500, 30, 0, 3],
    ])
    const s = sweepLayout(l)
    assert.equal(s.peakReserved, 130)
    assert.equal(s.peakReservedEvent, 1)
    assert.equal(s.finalReserved, 100)
    assert.equal(s.calls.regionFree, 2)
  })

  it('an unmap takes back only what it covers of each mapping; address space is not reserved', () => {
    const l = layoutOf([
      [LayoutOp.vaReserve, 0, 1 << 20, 0, 0],
      [LayoutOp.map, 0, 4096, 0, 0],
      [LayoutOp.map, 4096, 4096, 0, 1],
      [LayoutOp.unmap, 2048, 4096, 0, 2],
    ])
    const s = sweepLayout(l)
    assert.equal(s.peakReserved, 8192)
    assert.equal(s.finalReserved, 4096)
    assert.equal(s.finalAddressSpace, 1 << 20)
  })

  it('peaks are of the state after each request event; without events, after each layout event', () => {
    // Reserved and released within request event 1: no peak there.
    const l = layoutOf([
      [LayoutOp.regionReserve, 0, 100, 0, 0],
      [LayoutOp.regionReserve, 100, 500, 0, 1],
      [LayoutOp.regionRelease, 100, 500, 0, 1],
    ])
    const byEvent = sweepLayout(l)
    assert.equal(byEvent.peakReserved, 100)
    assert.equal(byEvent.peakReservedEvent, 0)
    const { event: _event, ...noEvents } = l
    const byLayoutEvent = sweepLayout(noEvents)
    assert.equal(byLayoutEvent.peakReserved, 600)
    assert.equal(byLayoutEvent.peakReservedLayoutEvent, 1)
    assert.equal(byLayoutEvent.peakReservedEvent, -1)
  })

  it('a pending free leaves requested and rounded at once; its completion changes neither', () => {
    const a = new LayoutAccount()
    a.apply(LayoutOp.alloc, 0, 512, 500)
    a.apply(LayoutOp.freePending, 0, 512, 500)
    assert.deepEqual([a.requested, a.rounded], [0, 0])
    a.apply(LayoutOp.freeCompleted, 0, 512, 500)
    assert.deepEqual([a.requested, a.rounded], [0, 0])
  })
})
