// The checkpointed interval index (src-renderer/viz/interval-index.ts) answers "which records exist
// after event e" exactly as a scan of every record does, for random interval sets shaped like
// traces (short-lived churn, long-lived blocks, records that never end), at every event.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { aliveAt, buildIntervalIndex, endedWithin } from '../../../../src-renderer/viz/interval-index.ts'

const NEVER = 0xffffffff

function randomIntervals(count: number, events: number, seed: number): { from: Uint32Array; to: Uint32Array } {
  let state = seed
  const rand = () => (state = (state * 1103515245 + 12345) >>> 0) / 4294967296
  const from = new Uint32Array(count)
  const to = new Uint32Array(count)
  let event = 0
  for (let k = 0; k < count; k++) {
    // Several records may start at one event; starts never go back.
    if (rand() < 0.7) event = Math.min(events - 1, event + Math.floor(rand() * 4))
    from[k] = event
    const kind = rand()
    to[k] = kind < 0.1 ? NEVER : kind < 0.8 ? event + 1 + Math.floor(rand() * 30) : event + 1 + Math.floor(rand() * events)
  }
  return { from, to }
}

describe('interval index', () => {
  for (const [count, seed] of [
    [50, 1],
    [5000, 2],
    [20000, 3],
  ] as const) {
    it(`finds exactly the records a full scan finds, at every event (${count} records)`, () => {
      const { from, to } = randomIntervals(count, count, seed)
      const index = buildIntervalIndex(from, to, count)
      assert.ok(index, 'records in start order get an index')
      if (count > 2048) assert.ok(index.checkpointEvent.length > 1, 'long traces get several checkpoints')
      const out = new Uint32Array(index.maxAlive)
      const lastEvent = from[count - 1]! + 40
      for (let e = 0; e <= lastEvent; e++) {
        const got = [...out.subarray(0, aliveAt(index, from, to, count, e, out))].sort((a, b) => a - b)
        const expected: number[] = []
        for (let k = 0; k < count; k++) if (from[k]! <= e && e < to[k]!) expected.push(k)
        assert.deepEqual(got, expected, `event ${e}`)
      }
    })
  }

  it('lists the records that ended within a window of events', () => {
    const { from, to } = randomIntervals(3000, 3000, 9)
    const index = buildIntervalIndex(from, to, 3000)!
    for (const [lo, hi] of [
      [0, 5],
      [100, 140],
      [2000, 2001],
      [2990, 6000],
    ] as const) {
      const [g0, g1] = endedWithin(index, lo, hi)
      const got = [...index.endedOrder.subarray(g0, g1)].sort((a, b) => a - b)
      const expected: number[] = []
      for (let k = 0; k < 3000; k++) if (to[k] !== NEVER && to[k]! > lo && to[k]! <= hi) expected.push(k)
      assert.deepEqual(got, expected, `(${lo}, ${hi}]`)
    }
  })

  it('orders ended records by their end the same whatever was indexed before (its buckets are reused)', () => {
    for (const [count, seed] of [
      [20000, 4],
      [300, 5],
      [7000, 6],
      [300, 5],
    ] as const) {
      const { from, to } = randomIntervals(count, count, seed)
      const index = buildIntervalIndex(from, to, count)!
      const ended = [...Array(count).keys()].filter((k) => to[k] !== NEVER).sort((a, b) => to[a]! - to[b]! || a - b)
      assert.deepEqual([...index.endedOrder], ended, `${count} records`)
      assert.deepEqual(
        [...index.endedAt],
        ended.map((k) => to[k]!),
      )
    }
  })

  it('indexes a few records spread over many events (sorted, not counted) as a scan finds them', () => {
    let state = 11
    const rand = () => (state = (Math.imul(state, 1103515245) + 12345) >>> 0) / 4294967296
    const count = 400
    const from = Uint32Array.from({ length: count }, () => Math.floor(rand() * 2_000_000)).sort()
    const to = Uint32Array.from(from, (f) => (rand() < 0.1 ? NEVER : f + 1 + Math.floor(rand() * (rand() < 0.3 ? 3 : 2_000_000))))
    const index = buildIntervalIndex(from, to, count)!
    const ended = [...Array(count).keys()].filter((k) => to[k] !== NEVER).sort((a, b) => to[a]! - to[b]! || a - b)
    assert.deepEqual([...index.endedOrder], ended)
    assert.deepEqual(
      [...index.endedAt],
      ended.map((k) => to[k]!),
    )
    const out = new Uint32Array(index.maxAlive)
    for (let probe = 0; probe < 300; probe++) {
      const e = probe < count ? from[probe]! : Math.floor(rand() * 4_000_000)
      const got = [...out.subarray(0, aliveAt(index, from, to, count, e, out))].sort((a, b) => a - b)
      const expected: number[] = []
      for (let k = 0; k < count; k++) if (from[k]! <= e && e < to[k]!) expected.push(k)
      assert.deepEqual(got, expected, `event ${e}`)
      const [g0, g1] = endedWithin(index, e, e + 50_000)
      const within = [...index.endedOrder.subarray(g0, g1)].sort((a, b) => a - b)
      assert.deepEqual(
        within,
        [...Array(count).keys()].filter((k) => to[k] !== NEVER && to[k]! > e && to[k]! <= e + 50_000),
      )
    }
  })

  it('declines records that are not in start order, so callers scan them all', () => {
    assert.equal(buildIntervalIndex(Uint32Array.from([0, 5, 3]), Uint32Array.from([9, 9, 9]), 3), null)
  })
})
