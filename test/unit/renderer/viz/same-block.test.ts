// A block selected in one map is shown in every other (MemoryMap's selectedHere): the block the same
// request's alloc made in each strategy's model (blockAllocatedAt). On a real snapshot replayed
// through the static plan and caching beside its recorded layout, the block found in each holds the
// same request's bytes; a request that made no block (a free) finds none.
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { describe, it } from 'node:test'

import { encodeBundle } from '../../../../src-shared/bundle.ts'
import { openInput } from '../../../../src-main/services/import/open-input.ts'
import { replayBundle } from '../../../../src-main/services/replay/replay-input.ts'
import { replayTrace } from '../../../../src-main/services/replay/replay.ts'
import { EventKind } from '../../../../src-main/services/trace/model.ts'
import { decodeReplay } from '../../../../src-renderer/viz/data.ts'
import { blockAllocatedAt } from '../../../../src-renderer/viz/model.ts'

const SNAPSHOT = join(import.meta.dirname, '..', '..', '..', 'fixtures', 'pytorch', 'real', 'mlp_fragment__default.pickle')

describe('the same block in every map', () => {
  it('finds, for each block of one map, the block the same request made in the others', async () => {
    const input = await openInput(SNAPSHOT)
    const results = await replayTrace(input.trace, [{ strategy: 'planned' }, { strategy: 'caching', params: { preset: 'pytorch' } }], { layout: true })
    const encoded = encodeBundle(replayBundle(input.trace, input.strategies, results))
    const views = decodeReplay(encoded.buffer.slice(encoded.byteOffset, encoded.byteOffset + encoded.byteLength) as ArrayBuffer)
    assert.deepEqual(
      views.map((v) => v.name),
      ['pytorch (recorded)', 'planned', 'caching (pytorch)'],
    )
    const e = input.trace.events
    let matched = 0
    for (const from of views) {
      const b = from.model.blocks
      for (let k = 0; k < b.count; k += 7) {
        const event = b.from[k]!
        if (e.kind[event] !== EventKind.alloc) continue
        for (const to of views) {
          const found = blockAllocatedAt(to.model, event)
          assert.ok(found >= 0, `${to.name} has the block of event ${event}`)
          assert.equal(to.model.blocks.requested[found], e.size[event], `${to.name}: the block of event ${event} holds its request`)
          matched++
        }
      }
    }
    assert.ok(matched > 100, `${matched} blocks matched`)
    const free = e.kind.findIndex((k) => k === EventKind.free)
    for (const v of views) assert.equal(blockAllocatedAt(v.model, free), -1, 'a free made no block')
  })
})
