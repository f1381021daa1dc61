// A real PyTorch snapshot's recorded layout (`pytorch (recorded)`) and the PyTorch-policy model
// replayed at PyTorch's segment addresses, as the app shows them side by side: after every request
// event both hold the same reserved bytes. (The recorded layout is placed on request events by
// time; a segment PyTorch logs just before the allocation that needed it belongs to that
// allocation, as in a replay.)
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { describe, it } from 'node:test'

import { encodeBundle } from '../../src-shared/bundle.ts'
import { replayBundle } from '../../src-main/services/replay/replay-input.ts'
import { openInput, recordedRegionPlacement } from '../../src-main/services/import/open-input.ts'
import { windowOpenState } from '../../src-main/services/replay/initial-state.ts'
import { replayTrace } from '../../src-main/services/replay/replay.ts'
import { decodeReplay } from '../../src-renderer/viz/data.ts'
import { figuresAt } from '../../src-renderer/viz/model.ts'

const FIXTURES = join(import.meta.dirname, '..', 'fixtures', 'pytorch')

describe('recorded PyTorch layout against the replayed PyTorch policy, event by event', () => {
  for (const name of ['convnet_varimg', 'inference_mixed', 'mlp_varbatch', 'transformer_varseq']) {
    it(`${name}: the same reserved bytes after every event`, async () => {
      const input = await openInput(join(FIXTURES, `${name}.pickle`))
      const results = await replayTrace(
        input.trace,
        [{ label: 'caching (pytorch)', strategy: 'caching', params: { preset: 'pytorch' }, regionPlacement: recordedRegionPlacement(input.strategies) }],
        { layout: true },
      )
      const bytes = encodeBundle(replayBundle(input.trace, input.strategies, results))
      const [recorded, replayed] = decodeReplay(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer)
      const n = input.trace.events.kind.length
      for (let e = 0; e < n; e++) {
        const a = figuresAt(recorded!.model, e).reserved
        const b = figuresAt(replayed!.model, e).reserved
        if (a !== b) assert.fail(`after event ${e}: recorded ${a} B, replayed ${b} B`)
      }
    })
  }
})

describe('an overflowed recording replayed from the recorded state, event by event', () => {
  it('mlp_varbatch_overflowed: the seeded segments and blocks are in the map from event 0, and the same reserved bytes after every event', async () => {
    const input = await openInput(join(FIXTURES, 'mlp_varbatch_overflowed.pickle'))
    const open = windowOpenState(input.trace, input.strategies)
    assert.equal(open.kind, 'state')
    if (open.kind !== 'state') return
    const results = await replayTrace(
      input.trace,
      [
        {
          label: 'caching (pytorch)',
          strategy: 'caching',
          params: { preset: 'pytorch' },
          regionPlacement: recordedRegionPlacement(input.strategies),
          initialState: open.open.state,
        },
      ],
      { layout: true },
    )
    const bytes = encodeBundle(replayBundle(input.trace, input.strategies, results))
    const [recorded, replayed] = decodeReplay(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer)
    const n = input.trace.events.kind.length
    for (let e = 0; e < n; e++) {
      const a = figuresAt(recorded!.model, e).reserved
      const b = figuresAt(replayed!.model, e).reserved
      if (a !== b) assert.fail(`after event ${e}: recorded ${a} B, replayed ${b} B`)
    }
    assert.equal(figuresAt(replayed!.model, 0).liveBlocks >= open.open.blocks, true, 'the seeded blocks are live at event 0')
  })
})
