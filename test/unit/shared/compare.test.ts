// Only a strategy that served every request and kept every live block is ranked (starred best).
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { compareResults, isRanked, plural, unrankedReason } from '../../../src-shared/compare.ts'
import type { StrategyResult } from '../../../src-shared/results.ts'

function result(name: string, summary: Record<string, number>, strategy = name): StrategyResult {
  return { name, strategy, params: {}, summary }
}

const base = { peakRequested: 100, internalWasteAtPeak: 0, externalFragmentationAtPeak: 0, deviceCalls: 1, eventsPerSecond: 1, droppedByReset: 0 }

describe('compareResults ranks only strategies that did the job', () => {
  it('a strategy with failures is never best, however little it reserved', () => {
    const results = [
      result('buddy', { ...base, peakReserved: 10, failures: 874 }),
      result('caching', { ...base, peakReserved: 300, failures: 0, deviceCalls: 5 }),
      result('slab', { ...base, peakReserved: 200, failures: 0, deviceCalls: 9 }),
    ]
    const rows = compareResults(results)
    const peak = rows.find((r) => r.metric.key === 'peakReserved')!
    assert.deepEqual(peak.winners, [2], 'slab, not buddy')
    const calls = rows.find((r) => r.metric.key === 'deviceCalls')!
    assert.deepEqual(calls.winners, [1], 'caching, not buddy with 1 call')
    assert.equal(unrankedReason(results[0]!), '874 failures')
    assert.equal(isRanked(results[0]!), false)
  })

  it('a strategy that failed every request gets no star for 0 B reserved', () => {
    const results = [result('dead', { ...base, peakReserved: 0, failures: 3333, deviceCalls: 0 }), result('caching', { ...base, peakReserved: 3, failures: 0 })]
    for (const row of compareResults(results)) assert.ok(!row.winners.includes(0), `${row.metric.key}: the failed strategy is not best`)
  })

  it('arena dropping live blocks at resets is not ranked, and says so', () => {
    const arena = result('arena', { ...base, peakReserved: 1, failures: 0, droppedByReset: 657 })
    assert.equal(unrankedReason(arena), 'dropped 657 live blocks at resets')
    const rows = compareResults([arena, result('slab', { ...base, peakReserved: 5, failures: 0 })])
    assert.deepEqual(rows.find((r) => r.metric.key === 'peakReserved')!.winners, [1])
    assert.ok(
      rows.some((r) => r.metric.key === 'droppedByReset'),
      'dropped blocks are a compared figure, a kind of failure',
    )
  })

  it('recorded results are neither ranked nor given a reason', () => {
    const recorded = result('pytorch (recorded)', { peakReserved: 1, failures: 0 }, 'pytorch')
    assert.equal(isRanked(recorded), false)
    assert.equal(unrankedReason(recorded), undefined)
  })

  it('ties among every ranked strategy mark none', () => {
    const rows = compareResults([result('a', { ...base, peakReserved: 5, failures: 0 }), result('b', { ...base, peakReserved: 5, failures: 0 })])
    assert.deepEqual(rows.find((r) => r.metric.key === 'peakReserved')!.winners, [])
  })

  it('plural', () => {
    assert.equal(plural(1, 'failure'), '1 failure')
    assert.equal(plural(2186, 'failure'), '2,186 failures')
    assert.equal(plural(0, 'device'), '0 devices')
  })
})
