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
