// The diff view's figures (src-renderer/viz/diff.ts): strategies matched by name, B − A and the
// relative change per compared metric, better or worse by each metric's direction, and strategies
// that only one side holds kept and marked.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { diffStrategies, type SideStrategy } from '../../../../src-renderer/viz/diff.ts'

describe('diff of two replays', () => {
  const a: SideStrategy[] = [
    { name: 'slab', summary: { peakReserved: 100, failures: 2, externalFragmentationAtPeak: 0.5, peakRequested: 80 } },
    { name: 'buddy', summary: { peakReserved: 50 } },
  ]
  const b: SideStrategy[] = [
    { name: 'slab', summary: { peakReserved: 150, failures: 0, externalFragmentationAtPeak: 0.5, peakRequested: 90 } },
    { name: 'arena', summary: { peakReserved: 10 } },
  ]
  const rows = diffStrategies(a, b)
  const cell = (strategy: string, key: string) => rows.find((r) => r.name === strategy)!.cells.find((c) => c.metric.key === key)!

  it('matches strategies by name and marks the ones only one side has', () => {
    assert.deepEqual(
      rows.map((r) => [r.name, r.onlyIn]),
      [
        ['slab', undefined],
        ['buddy', 'a'],
        ['arena', 'b'],
      ],
    )
  })

  it('gives B − A and the change relative to A', () => {
    assert.equal(cell('slab', 'peakReserved').delta, 50)
    assert.equal(cell('slab', 'peakReserved').relative, 0.5)
    assert.equal(cell('slab', 'failures').relative, -1)
    assert.equal(cell('buddy', 'peakReserved').delta, undefined)
  })

  it('judges better and worse by the metric, and not at all where no direction applies', () => {
    assert.equal(cell('slab', 'peakReserved').verdict, -1, 'more reserved is worse')
    assert.equal(cell('slab', 'failures').verdict, 1, 'fewer failures is better')
    assert.equal(cell('slab', 'externalFragmentationAtPeak').verdict, 0, 'unchanged')
    assert.equal(cell('slab', 'peakRequested').verdict, 0, "the program's own demand is not a contest")
  })
})
