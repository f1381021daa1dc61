// The stitching strategy (GMLake's virtual memory stitching, docs/strategies.md#stitching) on real
// PyTorch snapshots, through the CLI as a user runs it: `replay -s stitching` reserves no more at
// its peak than PyTorch's own policy (caching:preset=pytorch) on every recorded workload, and under
// a device no larger than what PyTorch's policy needed it fails no request; `whatif` carries it as
// a row beside PyTorch's settings, marked as an allocator PyTorch does not ship, in the text and
// in --json. With stitching off (stitch_limit=0) it is PyTorch's policy: the same memory obtained
// and given back, at the same events, as caching:preset=pytorch on the same backing.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { openInput } from '../../src-main/services/import/open-input.ts'
import { replayTrace, type ReplayLayoutColumns } from '../../src-main/services/replay/replay.ts'
import { LayoutOp } from '../../src-shared/layout.ts'
import { fixture, PYTORCH_WORKLOADS, vramscope, vramscopeJson } from '../helpers/cli.ts'

interface ReplayJson {
  strategies: { name: string; strategy: string; summary: Record<string, number> }[]
}

interface WhatifJson {
  configs: {
    kind: string
    conf: string
    label: string
    strategy: string
    peakReserved: number
    failures: number
    smallestFittingBytes: number | null
    notRanked: string | null
    notInPytorch: string | null
  }[]
}

const FIXTURES = [
  ...PYTORCH_WORKLOADS.map((w) => `pytorch/${w}.pickle`),
  'pytorch/real/mlp_fragment__default.pickle',
  'pytorch/real/cuda_graph__default.pickle',
]

function summaries(result: ReplayJson): { stitching: Record<string, number>; caching: Record<string, number> } {
  const of = (strategy: string): Record<string, number> => {
    const found = result.strategies.find((s) => s.strategy === strategy && !s.name.includes('recorded'))
    assert.ok(found, `${strategy} in ${result.strategies.map((s) => s.name).join(', ')}`)
    return found.summary
  }
  return { stitching: of('stitching'), caching: of('caching') }
}

describe('stitching on real PyTorch snapshots', () => {
  for (const file of FIXTURES)
    it(`${file}: peak reserved at most caching (pytorch)'s, and no failure on a device of that size`, async () => {
      const path = fixture(file)
      const free = summaries(await vramscopeJson<ReplayJson>(['replay', path, '-s', 'stitching,caching:preset=pytorch']))
      assert.equal(free.stitching['failures'], 0)
      assert.equal(free.caching['failures'], 0)
      assert.ok(
        free.stitching['peakReserved']! <= free.caching['peakReserved']!,
        `stitching ${free.stitching['peakReserved']} B > caching (pytorch) ${free.caching['peakReserved']} B`,
      )
      // Every request fits a device the size PyTorch's policy needed, and one the size stitching
      // itself reserved at its peak: a stitch never needs more than it holds.
      for (const cap of [free.caching['peakReserved']!, free.stitching['peakReserved']!]) {
        const capped = summaries(await vramscopeJson<ReplayJson>(['replay', path, '-s', 'stitching,caching:preset=pytorch', '--cap', String(cap)]))
        assert.equal(capped.stitching['failures'], 0, `stitching failed under a cap of ${cap} B`)
        assert.ok(capped.stitching['peakReserved']! <= cap)
      }
    })

  it('whatif: a stitching row beside the settings, marked as not shipped by PyTorch, in JSON and text', async () => {
    const path = fixture('pytorch/real/mlp_fragment__default.pickle')
    const json = await vramscopeJson<WhatifJson>(['whatif', path])
    const row = json.configs.find((c) => c.strategy === 'stitching')
    assert.ok(row, 'a stitching row')
    assert.equal(row.kind, 'strategy')
    assert.match(row.notInPytorch ?? '', /GMLake/)
    assert.match(row.notRanked ?? '', /PyTorch does not ship/)
    assert.equal(row.failures, 0)
    // PyTorch's own settings are not marked.
    for (const c of json.configs) if (c.kind !== 'strategy') assert.equal(c.notInPytorch, null, c.label)
    const recorded = json.configs.find((c) => c.kind === 'recorded')
    assert.ok(recorded)
    assert.ok(row.peakReserved < recorded.peakReserved, `stitching ${row.peakReserved} B vs recorded ${recorded.peakReserved} B`)
    assert.ok(row.smallestFittingBytes !== null && row.smallestFittingBytes <= row.peakReserved)
    const text = await vramscope(['whatif', path])
    assert.equal(text.code, 0, text.stderr)
    assert.match(text.stdout, /stitching of free VMM chunks \(GMLake\) \(not in PyTorch\)/)
    assert.match(text.stdout, /^not in PyTorch: stitching of free VMM chunks \(GMLake\): GMLake's virtual memory stitching/m)
  })
})

/** Memory obtained (+) and given back (-), with the request event of each: regions, or mapped ranges. */
function memoryEvents(layout: ReplayLayoutColumns): string[] {
  const out: string[] = []
  for (let k = 0; k < layout.op.length; k++) {
    const op = layout.op[k]
    if (op === LayoutOp.regionReserve || op === LayoutOp.map) out.push(`+${layout.size[k]}@${layout.event[k]}`)
    else if (op === LayoutOp.regionRelease || op === LayoutOp.unmap) out.push(`-${layout.size[k]}@${layout.event[k]}`)
  }
  return out
}

describe('stitching with stitch_limit=0 is PyTorch policy', () => {
  // Not the CUDA-graph run: stitching does not model private pools (docs/strategies.md#stitching).
  for (const file of FIXTURES.filter((f) => !f.includes('cuda_graph')))
    it(`${file}: the same memory obtained and released at the same events as caching (pytorch)`, async () => {
      const input = await openInput(fixture(file))
      const [off, caching] = await replayTrace(
        input.trace,
        [
          { strategy: 'stitching', params: { stitch_limit: '0' }, label: 'stitching off' },
          { strategy: 'caching', params: { preset: 'pytorch' }, label: 'caching (pytorch)' },
        ],
        { layout: true, buckets: 16 },
      )
      assert.deepEqual(memoryEvents(off!.layout), memoryEvents(caching!.layout))
      assert.equal(off!.summary.peakReserved, caching!.summary.peakReserved)
      assert.equal(off!.summary.failures, 0)
    })
})
