// The bundled recordings (resources/samples/h100-*.vramscope: vramscope's own workloads run on an
// H100, kernels writing and verifying every block) replayed through the model of the strategy that
// recorded them, at the recorded region addresses: the model must place every block where the real
// allocator on real CUDA memory did, and reach the same peak reserved and device calls.
import assert from 'node:assert/strict'
import { readdirSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'

import { isRecorded } from '../../src-shared/compare.ts'
import { openInput } from '../../src-main/services/import/open-input.ts'
import { replayInput } from '../../src-main/services/replay/replay-input.ts'
import { LayoutOp, type LayoutTrace } from '../../src-shared/layout.ts'

const SAMPLES = join(import.meta.dirname, '..', '..', 'resources', 'samples')
const recordings = readdirSync(SAMPLES).filter((f) => f.startsWith('h100-') && f.endsWith('.vramscope'))

function placements(layout: LayoutTrace): string[] {
  const out: string[] = []
  for (let i = 0; i < layout.op.length; i++) if (layout.op[i] === LayoutOp.alloc) out.push(`${layout.address[i]!.toString(16)}+${layout.size[i]}`)
  return out
}

describe('bundled H100 recordings replay exactly', () => {
  it('there are recordings to check', () => assert.ok(recordings.length >= 2, recordings.join(', ')))
  for (const file of recordings) {
    it(`${file}: the model places every block where the real allocator did`, async () => {
      const input = await openInput(join(SAMPLES, file))
      const recorded = input.strategies.find(isRecorded)
      assert.ok(recorded?.layout, 'the recording keeps its real layout')
      const params = Object.fromEntries(Object.entries(recorded.params).map(([k, v]) => [k, String(v)]))
      const { results, placed } = await replayInput(input, [{ label: 'model', strategy: recorded.strategy, params }], { layout: true })
      assert.equal(placed.length, 1, 'replayed at the recorded region addresses')
      const model = results[0]!
      assert.deepEqual(placements(model.layout!), placements(recorded.layout))
      assert.equal(model.summary!['peakReserved'], recorded.summary!['peakReserved'])
      assert.equal(model.summary!['deviceCalls'], recorded.summary!['deviceCalls'])
    })
  }
})
