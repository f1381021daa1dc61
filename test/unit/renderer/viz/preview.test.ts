// A map drawn before its history has crossed (src-shared/wire.ts, layoutAt and previewOf): every
// strategy replayed by the real addon on a real snapshot (and its recorded layout), each layout
// cut at several events, the cut packed and decoded as the page decodes it, and its model held
// against the whole layout's: the same blocks and regions present at the cut's event, the same
// address space, failures, resets and trims, the same figures and fragmentation there. A strategy that cannot be
// cut (bump allocators) travels whole.
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { describe, it } from 'node:test'

import { encodeBundle } from '../../../../src-shared/bundle.ts'
import { openInput } from '../../../../src-main/services/import/open-input.ts'
import { replayTrace } from '../../../../src-main/services/replay/replay.ts'
import { recordedOnEvents, replayedOnEvents } from '../../../../src-main/services/replay/replay-input.ts'
import { LayoutOp, reuseKindOf } from '../../../../src-shared/layout.ts'
import { reservedAt } from '../../../../src-shared/layout-accounting.ts'
import { cutAt, layoutAt, packReplay, previewOf, type StrategyToSend } from '../../../../src-shared/wire.ts'
import { decodeReplay } from '../../../../src-renderer/viz/data.ts'
import { blocksPresentAt, figuresAt, fragmentationAt, regionsPresentAt, type StrategyModel } from '../../../../src-renderer/viz/model.ts'
import { strategyConfigs } from '../../services/replay/strategy-configs.ts'

const SNAPSHOT = join(import.meta.dirname, '..', '..', '..', 'fixtures', 'pytorch', 'convnet_varimg.pickle')

/** The blocks present after `e`, each as its record's fields, in address order. */
function present(model: StrategyModel, e: number) {
  const b = model.blocks
  return Array.from(blocksPresentAt(model, e))
    .map((k) => [b.address[k], b.size[k], b.requested[k], b.stream[k], b.from[k], b.pendingFrom[k], b.deadFrom[k], b.to[k]])
    .sort((x, y) => x[0]! - y[0]! || x[4]! - y[4]!)
}

/** The regions present after `e`, each as its record's fields, in address order. */
function regionsAt(model: StrategyModel, e: number) {
  const r = model.regions
  return Array.from(regionsPresentAt(model, e))
    .map((k) => [r.kind[k], r.address[k], r.size[k], r.from[k], r.to[k]])
    .sort((x, y) => x[1]! - y[1]! || x[3]! - y[3]!)
}

describe('a map before its history: the layout cut at an event', async () => {
  const input = await openInput(SNAPSHOT)
  const targets = strategyConfigs().map((c) => ({ label: c.label, strategy: c.strategy, params: c.params }))
  const results = await replayTrace(input.trace, targets, { layout: true, structureEvents: false })
  const sent: StrategyToSend[] = [...input.strategies.filter((s) => s.layout).map((s) => recordedOnEvents(input.trace, s)), ...results.map(replayedOnEvents)]
  const events = input.trace.events.kind.length

  it('covers a recorded layout, bump allocators and a strategy that maps and unmaps', () => {
    assert.ok(sent.some((s) => s.recorded))
    assert.ok(sent.some((s) => reuseKindOf(s.strategy, s.params) !== 'any'))
    assert.ok(sent.some((s) => s.layout.op.includes(LayoutOp.unmap)))
    assert.ok(
      sent.some((s) => reuseKindOf(s.strategy, s.params) === 'any' && s.layout.op.includes(LayoutOp.regionRelease)),
      'some strategy releases regions',
    )
  })

  it('each cut model holds what the whole one holds at the event: blocks, regions, failures, resets, trims, figures, fragmentation', () => {
    let cuts = 0
    for (const s of sent) {
      const whole = decodeReplay(encodeBundle(packReplay([s])).slice().buffer)[0]!
      const peak = s.summary['peakReservedEvent']
      for (const at of [0, Math.floor(events / 3), Number.isInteger(peak) && peak! >= 0 ? peak! : events >> 1, events - 1]) {
        const preview = previewOf(s, at)
        if (reuseKindOf(s.strategy, s.params) !== 'any') {
          assert.equal(preview.previewAt, undefined, `${s.name}: a bump allocator travels whole`)
          assert.equal(preview.layout, s.layout)
          continue
        }
        assert.equal(preview.previewAt, at, s.name)
        const cut = decodeReplay(encodeBundle(packReplay([preview])).slice().buffer)[0]!
        assert.equal(cut.previewAt, at, `${s.name}: the decoded view says which event it shows`)
        const what = `${s.name} at event ${at}`
        assert.deepEqual(present(cut.model, at), present(whole.model, at), `${what}: blocks present`)
        assert.equal(cut.model.blocks.count, blocksPresentAt(whole.model, at).length, `${what}: only the blocks present`)
        assert.deepEqual(regionsAt(cut.model, at), regionsAt(whole.model, at), `${what}: regions present`)
        assert.deepEqual([...cut.model.failures], [...whole.model.failures], `${what}: failures`)
        assert.deepEqual([...cut.model.resets], [...whole.model.resets], `${what}: resets`)
        assert.deepEqual(reservedAt(cut.model.reserved, at), reservedAt(whole.model.reserved, at), `${what}: reserved and address space`)
        assert.deepEqual(figuresAt(cut.model, at), figuresAt(whole.model, at), `${what}: figures`)
        assert.deepEqual(fragmentationAt(cut.model, at), fragmentationAt(whole.model, at), `${what}: fragmentation`)
        assert.deepEqual(cut.placed.spans, whole.placed.spans, `${what}: the map's address space`)
        assert.deepEqual(cut.metrics, whole.metrics, `${what}: metrics`)
        cuts++
      }
    }
    assert.ok(cuts >= 20, `${cuts} cuts checked`)
  })

  it("the native replay's own cut, in each target's thread, is the reference cut, at an event and at each target's peak", async () => {
    const plain = (c: { event: number; kept: Uint32Array; goneStart: BigUint64Array; goneEnd: BigUint64Array } | undefined) =>
      c && { event: c.event, kept: [...c.kept], goneStart: [...c.goneStart], goneEnd: [...c.goneEnd] }
    let compared = 0
    for (const previewAt of [Math.floor(events / 3), events - 1, 'peak'] as const) {
      const cut = await replayTrace(input.trace, targets, { layout: true, structureEvents: false, previewAt })
      for (const r of cut) {
        const at = previewAt === 'peak' ? r.summary.peakReservedEvent : previewAt
        assert.ok(r.preview, `${r.label}: a cut at ${previewAt}`)
        assert.deepEqual(plain(r.preview), plain(cutAt(r.layout, at, 'any')), `${r.label} at ${previewAt}`)
        compared++
        // The send path takes the native cut: the same preview as the reference cut's.
        const sent = replayedOnEvents(r)
        assert.ok(sent.cut)
        if (reuseKindOf(r.strategy, r.params) === 'any')
          assert.deepEqual(previewOf(sent, at).layout, layoutAt({ ...sent.layout }, at, 'any'), `${r.label}: its preview at ${at}`)
      }
    }
    assert.ok(compared >= 3 * targets.length)
    // A layout with no regions has no cut; an event past the last makes none.
    const none = await replayTrace(input.trace, targets.slice(0, 1), { layout: true, previewAt: events })
    assert.equal(none[0]!.preview, undefined)
    await assert.rejects(replayTrace(input.trace, targets.slice(0, 1), { previewAt: -1 } as never), /options\.previewAt/)
  })

  it('a cut holds far fewer events than the whole where blocks came and went', () => {
    const caching = sent.find((s) => s.strategy === 'caching' && !s.recorded)!
    const at = caching.summary['peakReservedEvent']!
    const whole = caching.layout.op.length
    const cut = previewOf(caching, at).layout.op.length
    assert.ok(cut < whole / 4, `cut ${cut} events, whole ${whole}`)
  })

  it('a layout with no regions is not cut (its address space comes from every block)', () => {
    const l = {
      op: Uint8Array.from([LayoutOp.alloc, LayoutOp.alloc, LayoutOp.free]),
      address: BigUint64Array.from([0x1000n, 0x2000n, 0x1000n]),
      size: Float64Array.from([512, 512, 0]),
      requested: Float64Array.from([500, 500, 0]),
      stream: Uint32Array.from([0, 0, 0]),
      event: Uint32Array.from([0, 1, 2]),
    }
    assert.equal(layoutAt(l, 2, 'any'), undefined)
    const withRegion = {
      op: Uint8Array.from([LayoutOp.regionReserve, ...l.op]),
      address: BigUint64Array.from([0x1000n, ...l.address]),
      size: Float64Array.from([8192, ...l.size]),
      requested: Float64Array.from([0, ...l.requested]),
      stream: Uint32Array.from([0xffffffff, ...l.stream]),
      event: Uint32Array.from([0, ...l.event]),
    }
    const cut = layoutAt(withRegion, 2, 'any')!
    // At event 2 the first block is freed: the region and the second block stay.
    assert.deepEqual([...cut.op], [LayoutOp.regionReserve, LayoutOp.alloc])
    assert.deepEqual([...cut.address], [0x1000n, 0x2000n])
    assert.deepEqual([...layoutAt(withRegion, 1, 'any')!.op], [LayoutOp.regionReserve, LayoutOp.alloc, LayoutOp.alloc, LayoutOp.free])
    // Regions released before the event (and one reserved after it) stand in joined, reserved and
    // released at event 0: present at no event, their ranges still in the map's address space.
    const released = {
      op: Uint8Array.from([
        LayoutOp.regionReserve,
        LayoutOp.regionReserve,
        LayoutOp.regionRelease,
        LayoutOp.regionRelease,
        LayoutOp.regionReserve,
        LayoutOp.regionReserve,
      ]),
      address: BigUint64Array.from([0x10000n, 0x12000n, 0x10000n, 0x12000n, 0x20000n, 0x30000n]),
      size: Float64Array.from([0x2000, 0x1000, 0, 0, 0x1000, 0x1000]),
      requested: new Float64Array(6),
      stream: new Uint32Array(6).fill(0xffffffff),
      event: Uint32Array.from([1, 2, 3, 4, 5, 9]),
    }
    const r = layoutAt(released, 6, 'any')!
    assert.deepEqual(
      [...r.op].map((op, i) => [op, r.address[i], r.size[i], r.event[i]]),
      [
        [LayoutOp.regionReserve, 0x10000n, 0x3000, 0],
        [LayoutOp.regionRelease, 0x10000n, 0x3000, 0],
        [LayoutOp.regionReserve, 0x30000n, 0x1000, 0],
        [LayoutOp.regionRelease, 0x30000n, 0x1000, 0],
        [LayoutOp.regionReserve, 0x20000n, 0x1000, 5],
      ],
    )
  })
})
