// The peak view's figures (src-renderer/viz/peak.ts) on a real PyTorch snapshot replayed by the
// real addon: the peak event found from the model is the one the native replay reported, and the
// groups of what was held there add up to the strategy's own figures, whichever grouping.
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { describe, it } from 'node:test'

import { frameLabelAt, headlineAt } from '../../../../src-renderer/viz/frames.ts'
import { figuresAt, liveBlocksAt } from '../../../../src-renderer/viz/model.ts'
import { peakGroups, peakReservedEvent, PENDING_GROUP, sweptPeak, type PeakGroupBy } from '../../../../src-renderer/viz/peak.ts'
import { rendererData } from '../../../helpers/renderer-data.ts'

const SNAPSHOT = join(import.meta.dirname, '..', '..', '..', 'fixtures', 'pytorch', 'convnet_varimg.pickle')

describe('peak view', async () => {
  const { trace, views } = await rendererData(SNAPSHOT, 'caching:preset=pytorch,slab,buddy,vmm_growable')
  const events = trace.kind.length

  for (const view of views.filter((v) => !v.recorded)) {
    it(`${view.name}: the swept peak is the replay's peak reserved and its event`, () => {
      const swept = sweptPeak(view.model, events)
      assert.equal(swept.reserved, view.summary['peakReserved'])
      assert.equal(swept.event, view.summary['peakReservedEvent'])
      assert.equal(figuresAt(view.model, swept.event).reserved, view.summary['peakReserved'])
    })
  }

  it('a recorded layout (whose summary counts layout events) gets its peak from the model', () => {
    const recorded = views.find((v) => v.recorded)!
    assert.equal(recorded.summary['peakReservedEvent'], undefined)
    const peak = peakReservedEvent(recorded, events)
    const atPeak = figuresAt(recorded.model, peak).reserved
    for (let e = 0; e < events; e += 5) assert.ok(figuresAt(recorded.model, e).reserved <= atPeak, `event ${e} holds no more than the peak`)
    assert.equal(atPeak, recorded.summary['peakReserved'])
  })

  for (const view of views) {
    for (const groupBy of ['frame', 'tag', 'stream'] as PeakGroupBy[]) {
      it(`${view.name} by ${groupBy}: the groups add up to what was held at the peak, largest first`, () => {
        const peak = peakReservedEvent(view, events)
        const groups = peakGroups(view, trace, peak, groupBy)
        const f = figuresAt(view.model, peak)
        assert.equal(
          groups.reduce((s, g) => s + g.blocks, 0),
          f.liveBlocks,
        )
        assert.equal(
          groups.reduce((s, g) => s + g.requested, 0),
          f.requested,
        )
        assert.equal(
          groups.reduce((s, g) => s + g.rounded, 0),
          f.rounded + f.pendingBytes,
        )
        for (let i = 1; i < groups.length; i++) assert.ok(groups[i - 1]!.rounded >= groups[i]!.rounded, 'sorted by rounded bytes')
        const live = new Set(liveBlocksAt(view.model, peak))
        for (const g of groups) assert.ok(live.has(g.largestBlock), `${g.label}: its largest block was live at the peak`)
      })
    }
  }

  it('grouping by frame matches the headline frame the inspector shows', () => {
    const view = views.find((v) => v.name.startsWith('caching'))!
    const peak = peakReservedEvent(view, events)
    const b = view.model.blocks
    const expected = new Map<string, number>()
    for (const k of liveBlocksAt(view.model, peak)) {
      if (peak >= b.pendingFrom[k]!) continue
      const h = headlineAt(trace, b.from[k]!)
      const key = h >= 0 ? frameLabelAt(trace, h) : 'none'
      expected.set(key, (expected.get(key) ?? 0) + b.size[k]!)
    }
    const groups = peakGroups(view, trace, peak, 'frame').filter((g) => g.key !== PENDING_GROUP)
    assert.ok(groups.length > 1, 'the snapshot holds memory from several frames')
    assert.deepEqual(
      groups.map((g) => g.rounded).sort((x, y) => x - y),
      [...expected.values()].sort((x, y) => x - y),
    )
    for (const g of groups) {
      const h = headlineAt(trace, b.from[g.largestBlock]!)
      if (h >= 0) assert.equal(g.label, frameLabelAt(trace, h))
    }
  })
})
