// Pool strategies named without sizes get pools sized from the trace (sized-defaults.ts).
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { sizedForTrace, sizedParams, sizeStrategy, traceSizes } from '../../../../src-main/services/replay/sized-defaults.ts'
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

  it('gives pools up to 2^52 B for requests up to 2^52 B, and for a larger one the reason instead', () => {
    const fits = sizeStrategy('buddy', { peakRequested: 3 * 2 ** 51, largestRequest: 2 ** 52, peakLiveBlocks: 3 })
    assert.deepEqual(fits, { params: { pool_size: String(2 ** 52), max_pools: '5' } })
    const huge = sizeStrategy('buddy', { peakRequested: 2 ** 53 - 1, largestRequest: 2 ** 53 - 1, peakLiveBlocks: 1 })
    assert.ok(huge && 'unsized' in huge)
    assert.match(huge.unsized, /largest request \(9007199254740991 B\) would be 9007199254740992 B.*2\^52/)
    const spec = { label: 'buddy', strategy: 'buddy', params: {} }
    const sized = sizedForTrace(spec, { peakRequested: 2 ** 53 - 1, largestRequest: 2 ** 53 - 1, peakLiveBlocks: 1 })
    assert.equal(sized.spec, spec, 'replayed as written')
    assert.match(sized.unsized!, /^a pool that holds/)
  })

  it('gives block_pool regions of at most 2^20 blocks and 2^52 B, however many blocks are live', () => {
    const many = sizedParams('block_pool', { peakRequested: 2 ** 40, largestRequest: 2 ** 20, peakLiveBlocks: 2 ** 30 })!
    assert.equal(Number(many['pool_size']) / Number(many['block_size']), 2 ** 20)
    assert.ok((Number(many['max_regions']) - 1) * 2 ** 20 >= 2 ** 30)
    const big = sizedParams('block_pool', { peakRequested: 2 ** 52, largestRequest: 2 ** 50, peakLiveBlocks: 100 })!
    assert.ok(Number(big['pool_size']) <= 2 ** 52)
  })

  it('reserves for vmm_growable twice the peak where that passes its own 64 GiB, and leaves it alone below', () => {
    assert.equal(sizeStrategy('vmm_growable', { peakRequested: 30 * 2 ** 30, largestRequest: MiB, peakLiveBlocks: 9 }), undefined)
    assert.deepEqual(sizedParams('vmm_growable', { peakRequested: 61e9, largestRequest: MiB, peakLiveBlocks: 9 }), { reserve: String(2 ** 37) })
    const huge = sizeStrategy('vmm_growable', { peakRequested: 2 ** 53 - 1, largestRequest: 2 ** 53 - 1, peakLiveBlocks: 1 })
    assert.ok(huge && 'unsized' in huge && /peak requested/.test(huge.unsized))
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
