// `vramscope whatif`, run as a user runs it, on real PyTorch 2.11 snapshots recorded on an H100
// (test/fixtures/pytorch/real/): the grid and its JSON contract, --conf (PyTorch's own syntax,
// 'recorded'), the smallest fitting limit checked by replaying just above and below it, the limit a
// recorded out-of-memory implies and the out-of-memory reproduced under it, the fidelity of the
// recorded settings, and bad configurations refused by name.
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { describe, it } from 'node:test'

import { fixture, shown, vramscope, vramscopeJson } from '../helpers/cli.ts'

interface Row {
  rank: number
  conf: string
  kind: 'recorded' | 'pytorch' | 'strategy'
  label: string
  line: string | null
  peakReserved: number
  peakAllocated: number
  segments: number
  deviceCalls: number
  failures: number
  firstFailureEvent: number
  oomReproduced: number
  smallestFittingBytes: number | null
  notRanked: string | null
}
interface WhatifJson {
  events: number
  recordedConf: string | null
  limit: { bytes: number | null; source: string }
  implied: { lowBytes: number; highBytes: number; size: number; event: number; source: string } | null
  configs: Row[]
  fidelity: {
    recordedPeakReserved: number
    replayedPeakReserved: number
    peakReservedError: number
    recordedSegments: number
    replayedSegments: number
    firstSegmentDifference: number
  } | null
  replays: number
  eventsPerSecondPerCore: number
}

const MLP = fixture('pytorch/real/mlp_fragment__msplit128.pickle')
const OOM = fixture('pytorch/real/oom_fraction__default.pickle')
const stats = (name: string) =>
  JSON.parse(readFileSync(fixture(`pytorch/real/${name}.stats.json`), 'utf8')) as {
    conf: string
    limit_bytes: number | null
    memory_stats: Record<string, number>
  }
const MiB = 2 ** 20

describe('vramscope whatif', () => {
  it('runs a grid of at least 20 configurations, ranked, with the recorded settings and their fidelity', async () => {
    const out = await vramscopeJson<WhatifJson>(['whatif', MLP])
    assert.equal(out.recordedConf, 'max_split_size_mb:128')
    assert.ok(out.configs.length >= 20, `${out.configs.length} configurations`)
    for (const r of out.configs) {
      for (const key of ['peakReserved', 'peakAllocated', 'segments', 'deviceCalls', 'failures'] as const)
        assert.ok(Number.isSafeInteger(r[key]), `${r.label} ${key}`)
      if (r.smallestFittingBytes !== null) {
        assert.ok(Number.isSafeInteger(r.smallestFittingBytes))
        assert.ok(r.smallestFittingBytes >= r.peakAllocated, `${r.label}: fits below its own peak allocated`)
      }
    }
    const ranked = out.configs.filter((r) => r.rank > 0)
    assert.deepEqual(
      ranked.map((r) => r.rank),
      ranked.map((_, i) => i + 1),
    )
    assert.equal(ranked[0]!.failures, 0)
    // By smallest fitting, where limits within the search's 1 % are a tie ranked by peak reserved.
    for (let i = 1; i < ranked.length; i++)
      if (ranked[i]!.failures === 0) {
        const [before, now] = [ranked[i - 1]!, ranked[i]!]
        const later = (now.smallestFittingBytes ?? Infinity) >= (before.smallestFittingBytes ?? Infinity)
        const tie = before.smallestFittingBytes! - now.smallestFittingBytes! <= 0.01 * before.smallestFittingBytes! && now.peakReserved >= before.peakReserved
        assert.ok(later || tie, `ranked by smallest fitting: ${before.label} before ${now.label}`)
      }
    const recorded = out.configs.find((r) => r.kind === 'recorded')!
    assert.equal(recorded.conf, 'max_split_size_mb:128')
    assert.equal(recorded.line, 'PYTORCH_ALLOC_CONF=max_split_size_mb:128')
    // Replayed under its own settings the snapshot gives what its run reserved.
    const s = stats('mlp_fragment__msplit128')
    assert.ok(Math.abs(recorded.peakReserved - s.memory_stats['reserved_bytes.all.peak']!) <= 0.01 * s.memory_stats['reserved_bytes.all.peak']!)
    assert.equal(recorded.segments, s.memory_stats['segment.all.allocated'])
    assert.ok(out.fidelity)
    assert.ok(Math.abs(out.fidelity.peakReservedError) <= 0.01)
    assert.equal(out.fidelity.replayedSegments, out.fidelity.recordedSegments)
    for (const r of out.configs.filter((c) => c.kind === 'strategy'))
      assert.ok(r.notRanked, `${r.label} is not a PyTorch setting and stands beside the ranking`)
    assert.ok(out.eventsPerSecondPerCore > 0)
  })

  it('takes configurations in PyTorch syntax and runs only those; the smallest fitting limit fits and 1 % less does not', async () => {
    const out = await vramscopeJson<WhatifJson>([
      'whatif',
      MLP,
      '--conf',
      'recorded',
      '--conf',
      'max_split_size_mb:64',
      '--conf',
      'roundup_power2_divisions:[256:1,>:4]',
    ])
    assert.deepEqual(out.configs.map((r) => r.conf).sort(), ['max_split_size_mb:128', 'max_split_size_mb:64', 'roundup_power2_divisions:[256:1,>:4]'])
    const row = out.configs.find((r) => r.conf === 'max_split_size_mb:64')!
    const smallest = row.smallestFittingBytes!
    assert.ok(smallest > 0 && smallest <= row.peakReserved)
    const at = await vramscopeJson<WhatifJson>(['whatif', MLP, '--conf', 'max_split_size_mb:64', '--cap', String(smallest), '--no-search'])
    assert.equal(at.configs[0]!.failures, 0, 'fits at the smallest limit found')
    const below = Math.floor(smallest - Math.max(0.01 * smallest, 2 * MiB))
    const under = await vramscopeJson<WhatifJson>(['whatif', MLP, '--conf', 'max_split_size_mb:64', '--cap', String(below), '--no-search'])
    assert.ok(under.configs[0]!.failures > 0, 'fails just below it')
    // The same configuration through `replay --conf` gives the same peak.
    const replay = await vramscopeJson<{ strategies: { name: string; summary: Record<string, number> }[] }>(['replay', MLP, '--conf', 'max_split_size_mb:64'])
    assert.equal(replay.strategies.find((s) => s.name === 'pytorch (max_split_size_mb:64)')!.summary['peakReserved'], row.peakReserved)
  })

  it('opens a snapshot that ran out of memory, bounds the limit it ran under, and reproduces the failure there', async () => {
    const s = stats('oom_fraction__default')
    const limit = s.limit_bytes!
    const out = await vramscopeJson<WhatifJson>(['whatif', OOM, '--conf', 'recorded', '--conf', 'expandable_segments:False,max_split_size_mb:256'])
    assert.ok(out.implied, 'an implied limit')
    assert.equal(out.implied.source, 'fraction')
    assert.ok(out.implied.lowBytes <= limit && limit < out.implied.highBytes, `${out.implied.lowBytes} <= ${limit} < ${out.implied.highBytes}`)
    assert.equal(out.limit.source, 'implied')
    const recorded = out.configs.find((r) => r.kind === 'recorded')!
    assert.equal(recorded.oomReproduced, 1, shown({ code: 0, stdout: JSON.stringify(recorded), stderr: '' }))
    // The limit as set_per_process_memory_fraction's argument: a fraction of the GPU's memory.
    const byFraction = await vramscopeJson<WhatifJson>(['whatif', OOM, '--conf', 'recorded', '--cap', '0.025', '--gpu', String(limit * 40), '--no-search'])
    assert.equal(byFraction.limit.bytes, limit)
    // Under the run's true limit too.
    const atLimit = await vramscopeJson<WhatifJson>(['whatif', OOM, '--conf', 'recorded', '--cap', String(limit)])
    assert.equal(atLimit.limit.source, 'option')
    assert.equal(atLimit.configs[0]!.oomReproduced, 1)
    assert.ok(atLimit.configs[0]!.smallestFittingBytes! > limit, 'the whole trace (the failed request included) needs more than the limit')
  })

  it('refuses a bad configuration by name, and prints the table and the line to paste', async () => {
    const bad = await vramscope(['whatif', MLP, '--conf', 'max_split_size_mb:10'])
    assert.equal(bad.code, 2, shown(bad))
    assert.match(bad.stderr, /--conf: 'max_split_size_mb:10': max_split_size_mb too small, must be >= 20/)
    const typo = await vramscope(['whatif', MLP, '--conf', 'expandable_segment:True'])
    assert.equal(typo.code, 2, shown(typo))
    assert.match(typo.stderr, /unknown setting 'expandable_segment'/)
    const text = await vramscope(['whatif', MLP, '--conf', 'recorded', '--conf', 'garbage_collection_threshold:0.6', '--cap', '4GB'])
    assert.equal(text.code, 0, shown(text))
    assert.match(text.stdout, /recorded with PYTORCH_ALLOC_CONF=max_split_size_mb:128/)
    assert.match(text.stdout, /limit: 3\.73 GiB \(--cap\)/)
    assert.match(text.stdout, /best: PYTORCH_ALLOC_CONF=/)
    assert.match(text.stdout, /fidelity of the recorded settings: peak reserved .* segments 48 vs 48/)
  })
})
