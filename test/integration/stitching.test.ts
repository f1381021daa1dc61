// The stitching strategy (GMLake's virtual memory stitching, docs/strategies.md#stitching) on real
// PyTorch snapshots, through the CLI as a user runs it: `replay -s stitching` reserves no more at
// its peak than PyTorch's own policy (caching:preset=pytorch) on every recorded workload, and under
// a device no larger than what PyTorch's policy needed it fails no request; `whatif` carries it as
// a row beside PyTorch's settings, marked as an allocator PyTorch does not ship, in the text and
// in --json.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

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
