// Where a layout's reserved bytes peak, found by the host from the layout's events
// (src-shared/layout-accounting.ts), is where the page puts the playhead when that layout is the first
// map (src-renderer/viz/peak.ts, from the model): on real H100 snapshots' recorded layouts, with
// and without expandable segments (mapped and unmapped ranges), and on every strategy's replayed
// layout of one of them (regions released, ranges mapped and unmapped).
import assert from 'node:assert/strict'
import { readdirSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'

import { encodeBundle } from '../../../src-shared/bundle.ts'
import { LayoutOp } from '../../../src-shared/layout.ts'
import { reservedPeakEvent } from '../../../src-shared/layout-accounting.ts'
import { packReplay, type StrategyToSend } from '../../../src-shared/wire.ts'
import { openInput } from '../../../src-main/services/import/open-input.ts'
import { replayTrace } from '../../../src-main/services/replay/replay.ts'
import { recordedOnEvents, replayedOnEvents } from '../../../src-main/services/replay/replay-input.ts'
import { decodeReplay } from '../../../src-renderer/viz/data.ts'
import { sweptPeak } from '../../../src-renderer/viz/peak.ts'
import { strategyConfigs } from '../services/replay/strategy-configs.ts'

const REAL = join(import.meta.dirname, '..', '..', 'fixtures', 'pytorch', 'real')

/** The renderer's peak of the layout's model, as the page finds it for a recorded first map. */
function pagePeak(s: StrategyToSend, events: number): number {
  const view = decodeReplay(encodeBundle(packReplay([s])).slice().buffer)[0]!
  return sweptPeak(view.model, events).event
}

describe("a layout's peak of reserved bytes, found by the host as the page finds it", () => {
  it("is the page's on every real snapshot's recorded layout", async () => {
    const files = readdirSync(REAL).filter((f) => f.endsWith('.pickle'))
    assert.ok(files.length >= 20, `${files.length} snapshots`)
    let mapped = 0
    for (const file of files) {
      const input = await openInput(join(REAL, file))
      const events = input.trace.events.kind.length
      for (const stored of input.strategies.filter((s) => s.layout)) {
        const s = recordedOnEvents(input.trace, stored)
        if (s.layout.op.includes(LayoutOp.unmap)) mapped++
        assert.equal(reservedPeakEvent(s.layout, events), pagePeak(s, events), file)
      }
    }
    assert.ok(mapped >= 3, `${mapped} recorded layouts map and unmap (expandable segments)`)
  })

  it("is the page's on every strategy's replayed layout", async () => {
    const input = await openInput(join(REAL, '..', 'convnet_varimg.pickle'))
    const events = input.trace.events.kind.length
    const targets = strategyConfigs().map((c) => ({ label: c.label, strategy: c.strategy, params: c.params }))
    const results = await replayTrace(input.trace, targets, { layout: true, structureEvents: false })
    const ops = new Set<number>()
    for (const s of results.map(replayedOnEvents)) {
      for (const op of s.layout.op) ops.add(op)
      assert.equal(reservedPeakEvent(s.layout, events), pagePeak(s, events), s.name)
    }
    for (const op of [LayoutOp.regionRelease, LayoutOp.map, LayoutOp.unmap]) assert.ok(ops.has(op), `some layout has op ${op}`)
  })
})
