// The static plan (`planned`) through the addon: on random traces it never reserves less than the
// floor (services/analysis/floor.ts), and the replay's own peaks of live bytes are the floor's,
// the TypeScript and the native side computing the same blocks; it serves a replay only.
import assert from 'node:assert/strict'
import { it } from 'node:test'

import { floorOf } from '../../../../src-main/services/analysis/floor.ts'
import { Allocator, listStrategies, type NativeError } from '../../../../src-main/services/replay/allocators.ts'
import { replayTrace } from '../../../../src-main/services/replay/replay.ts'
import { unrankedReason } from '../../../../src-shared/compare.ts'
import { sampleTrace } from '../../../helpers/trace-samples.ts'

it('planned never reserves less than the floor, and its peaks of live bytes are the floor (random traces)', async () => {
  for (let seed = 1; seed <= 12; seed++) {
    const trace = sampleTrace(500 + seed * 300, seed)
    const floor = floorOf(trace)
    const [r] = await replayTrace(trace, [{ strategy: 'planned', label: 'planned' }], { layout: false, cap: 2 ** 50 })
    const s = r!.summary
    assert.equal(s.failures, 0, `seed ${seed}`)
    assert.equal(s.peakRequested, floor.peakLiveBytes, `seed ${seed}: requested peak`)
    assert.equal(s.peakRounded, floor.peakLiveRoundedBytes, `seed ${seed}: rounded peak`)
    assert.ok(s.peakReserved >= floor.peakLiveRoundedBytes, `seed ${seed}: ${s.peakReserved} under the floor ${floor.peakLiveRoundedBytes}`)
  }
})

it('planned is listed as a strategy that needs a plan, and an Allocator of it refuses requests saying why', () => {
  const info = listStrategies().find((s) => s.name === 'planned')
  assert.ok(info, 'planned is registered')
  assert.equal(info.needsPlan, true)
  assert.ok(
    listStrategies()
      .filter((s) => s.name !== 'planned')
      .every((s) => !s.needsPlan),
  )
  const a = new Allocator('planned')
  try {
    assert.throws(
      () => a.allocate(4096),
      (e: NativeError) => e.code === 'UNSUPPORTED' && /serves a replay only/.test(e.message),
    )
  } finally {
    a.dispose()
  }
})

it('the comparison never ranks the plan: it is a bound, not an allocator', async () => {
  const trace = sampleTrace(800, 3)
  const [planned, caching] = await replayTrace(
    trace,
    [
      { strategy: 'planned', label: 'planned' },
      { strategy: 'caching', params: { preset: 'pytorch' }, label: 'caching (pytorch)' },
    ],
    { layout: false, cap: 2 ** 50 },
  )
  assert.equal(unrankedReason({ strategy: 'planned', summary: { failures: planned!.summary.failures, droppedByReset: 0 } }), 'a bound, not an allocator')
  assert.equal(unrankedReason({ strategy: 'caching', summary: { failures: caching!.summary.failures, droppedByReset: 0 } }), undefined)
  assert.ok(planned!.summary.peakReserved <= caching!.summary.peakReserved, 'the plan reserves no more than caching here')
})
