// Pool strategies named without sizes get pools sized from the trace (sized-defaults.ts).
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { sizedForTrace, sizedParams, traceSizes } from '../../../../src-main/services/replay/sized-defaults.ts'
import type { RequestTrace } from '../../../../src-main/services/trace/model.ts'

const MiB = 2 ** 20

function trace(events: [kind: number, id: number, size: number][]): RequestTrace {
  return {
    events: {
      kind: Uint8Array.from(events.map((e) => e[0])),
      id: Uint32Array.from(events.map((e) => e[1])),
      size: Float64Array.from(events.map((e) => e[2])),
    },
  } as unknown as RequestTrace
}

describe('sized defaults', () => {
  it('reads the peak requested bytes, the largest request and the most live blocks', () => {
    const t = trace([
      [0, 0, 10 * MiB],
      [0, 1, 300 * MiB],
      [1, 0, 0],
      [0, 2, 5 * MiB],
      [1, 1, 0],
    ])
    assert.deepEqual(traceSizes(t), { peakRequested: 310 * MiB, largestRequest: 300 * MiB, peakLiveBlocks: 2 })
  })

  it('gives buddy pools that hold the largest request and, together, twice the peak', () => {
    const p = sizedParams('buddy', { peakRequested: 3000 * MiB, largestRequest: 300 * MiB, peakLiveBlocks: 50 })!
    const pool = Number(p['pool_size'])
    assert.ok(pool >= 300 * MiB && (pool & (pool - 1)) === 0, 'a power of two that holds the largest request')
    assert.ok(pool * Number(p['max_pools']) >= 2 * 3000 * MiB)
  })

  it('gives block_pool blocks of the largest request and room for every live block', () => {
    const p = sizedParams('block_pool', { peakRequested: 100 * MiB, largestRequest: 5 * MiB + 3, peakLiveBlocks: 37 })!
    const block = Number(p['block_size'])
    assert.ok(block >= 5 * MiB + 3 && block % 256 === 0)
    assert.ok((Number(p['pool_size']) / block) * (Number(p['max_regions']) - 1) >= 37)
  })

  it('keeps sizes a user gave, and leaves strategies without pools alone', () => {
    const sizes = { peakRequested: MiB, largestRequest: MiB, peakLiveBlocks: 1 }
    const given = { label: 'buddy (pool_size=4GiB)', strategy: 'buddy', params: { pool_size: '4GiB' } }
    assert.equal(sizedForTrace(given, sizes).spec, given)
    assert.equal(sizedForTrace({ label: 'slab', strategy: 'slab', params: {} }, sizes).sized, undefined)
    const buddy = sizedForTrace({ label: 'buddy', strategy: 'buddy', params: {} }, sizes)
    assert.equal(buddy.spec.label, 'buddy', 'the label stays as written')
    assert.match(buddy.sized!, /pool_size=1MiB, max_pools=\d+/)
  })
})
