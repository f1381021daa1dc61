// The metrics of a recorded layout (services/analysis/layout-metrics.ts) follow the one definition
// (docs/architecture.md#metrics) as the native replay does: a block freed by the program but held
// for its stream (free_pending) counts in neither requested nor rounded bytes.
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'

import { allocateLayout, LayoutOp, type LayoutTrace } from '../../../../src-shared/layout.ts'
import { layoutMetrics } from '../../../../src-main/services/analysis/layout-metrics.ts'

type Row = [op: number, address: number, size: number, requested: number]

function layoutOf(rows: Row[]): LayoutTrace {
  const layout = allocateLayout(rows.length)
  rows.forEach(([op, address, size, requested], i) => {
    layout.op[i] = op
    layout.address[i] = BigInt(address)
    layout.size[i] = size
    layout.requested[i] = requested
    layout.time[i] = i * 1000
  })
  return layout
}

describe('metrics of a recorded layout', () => {
  test('requested, rounded and reserved after each event; a pending block leaves both requested and rounded at free_pending', () => {
    const { metrics, summary } = layoutMetrics(
      layoutOf([
        [LayoutOp.regionReserve, 0, 2 << 20, 0],
        [LayoutOp.alloc, 0, 1024, 1000],
        [LayoutOp.alloc, 1024, 512, 500],
        [LayoutOp.freePending, 0, 1024, 1000],
        [LayoutOp.freeCompleted, 0, 1024, 0],
        [LayoutOp.free, 1024, 512, 500],
        [LayoutOp.regionRelease, 0, 2 << 20, 0],
      ]),
    )
    assert.deepEqual([...metrics.requested], [0, 1000, 1500, 500, 500, 0, 0])
    assert.deepEqual([...metrics.rounded], [0, 1024, 1536, 512, 512, 0, 0], 'pending bytes are not rounded bytes (as allocator_stats::rounded_live)')
    assert.deepEqual([...metrics.reserved], [2 << 20, 2 << 20, 2 << 20, 2 << 20, 2 << 20, 2 << 20, 0])
    assert.equal(summary['peakRequested'], 1500)
    assert.equal(summary['peakReserved'], 2 << 20)
    assert.equal(summary['deviceCalls'], 2)
    assert.ok(metrics.externalFragmentation.every(Number.isNaN), 'fragmentation is not derived from a recorded layout')
  })
})
