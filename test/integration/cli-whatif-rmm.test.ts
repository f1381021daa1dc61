// `vramscope whatif LOG.csv` on an RMM log (test/fixtures/rmm/fragmenting.csv, made by
// scripts/fixtures/make-rmm-log.ts): the grid is RMM's own allocators, ranked, each with its
// smallest fitting device size (what RMM users bisect by hand with REPLAY_BENCH -s), and PyTorch's
// defaults beside them; every RMM row replays every request of the log; each smallest fitting size
// holds at least the peak of live bytes, the replay at it fits and one well below it does not; the
// ranking follows the figures.
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { describe, it } from 'node:test'

import { fixture, vramscope, vramscopeJson } from '../helpers/cli.ts'

const LOG = fixture('rmm/fragmenting.csv')
const RMM = new Set(['rmm_pool', 'rmm_arena', 'rmm_binning'])

interface Row {
  rank: number
  conf: string
  kind: string
  label: string
  strategy: string
  params: Record<string, string>
  peakReserved: number
  peakAllocated: number
  peakRequested: number
  failures: number
  firstFailureEvent: number
  smallestFittingBytes: number | null
  notRanked: string | null
}
interface ReplayJson {
  strategies: { name: string; summary: Record<string, number> }[]
}

/** The log read on its own terms: its allocations and the peak of the bytes live at once. */
function logFigures(): { allocations: number; peakLive: number } {
  const live = new Map<string, number>()
  let bytes = 0
  let peakLive = 0
  let allocations = 0
  for (const line of readFileSync(LOG, 'utf8').split('\n').slice(1)) {
    const [, , action, pointer, size] = line.split(',')
    if (action === 'allocate') {
      allocations++
      live.set(pointer!, Number(size))
      bytes += Number(size)
      peakLive = Math.max(peakLive, bytes)
    } else if (action === 'free') {
      bytes -= live.get(pointer!)!
      live.delete(pointer!)
    }
  }
  return { allocations, peakLive }
}

describe('whatif on an RMM log', () => {
  it("ranks RMM's allocators by their smallest fitting device, PyTorch's defaults beside them", async () => {
    const { peakLive } = logFigures()
    const out = await vramscopeJson<{ configs: Row[]; limit: { bytes: number | null } }>(['whatif', LOG, '--json'])
    assert.equal(out.limit.bytes, null)
    const rmm = out.configs.filter((r) => RMM.has(r.strategy))
    assert.deepEqual(new Set(rmm.map((r) => r.strategy)), RMM)
    for (const r of rmm) {
      assert.ok(r.rank > 0, `${r.label} is ranked`)
      assert.equal(r.notRanked, null)
      // Every request replayed, none failed: the log's own peak of requested bytes is reached.
      assert.equal(r.failures, 0, r.label)
      assert.equal(r.firstFailureEvent, -1)
      assert.equal(r.peakRequested, peakLive, r.label)
      assert.ok(r.smallestFittingBytes !== null, `${r.label} fits somewhere`)
      assert.ok(r.smallestFittingBytes >= r.peakAllocated && r.peakAllocated >= peakLive, r.label)
    }
    // The ranked rows are RMM's, in the order of their figures (ties within the search's 1 %).
    const ranked = out.configs.filter((r) => r.rank > 0).sort((a, b) => a.rank - b.rank)
    assert.deepEqual(
      ranked.map((r) => r.strategy).filter((s) => !RMM.has(s)),
      [],
    )
    for (let k = 1; k < ranked.length; k++)
      assert.ok(ranked[k - 1]!.smallestFittingBytes! <= ranked[k]!.smallestFittingBytes! * 1.01, `${ranked[k - 1]!.label} before ${ranked[k]!.label}`)
    // PyTorch's defaults stand beside them; PyTorch's other settings are not an RMM user's.
    const pytorch = out.configs.filter((r) => r.kind === 'pytorch')
    assert.deepEqual(
      pytorch.map((r) => r.conf),
      [''],
    )
    assert.equal(pytorch[0]!.rank, 0)
    assert.match(pytorch[0]!.notRanked!, /allocated through RMM/)
    // Binning gives every small request a 256 KiB block at least: it needs more than the pool.
    const pool = rmm.find((r) => r.strategy === 'rmm_pool' && r.params['initial_pool_percent'] === '100')!
    const binning = rmm.find((r) => r.strategy === 'rmm_binning')!
    assert.ok(binning.peakAllocated > pool.peakAllocated)
  })

  it('each smallest fitting device replays the whole log, and one well below it does not', async () => {
    const out = await vramscopeJson<{ configs: Row[] }>(['whatif', LOG, '--json'])
    for (const r of out.configs.filter((c) => RMM.has(c.strategy))) {
      const spec = [r.strategy, ...Object.entries(r.params).map(([k, v]) => `${k}=${v}`)].join(':')
      const at = await vramscopeJson<ReplayJson>(['replay', LOG, '-s', spec, '--cap', String(r.smallestFittingBytes), '--json'])
      assert.equal(at.strategies[0]!.summary['failures'], 0, `${r.label} at ${r.smallestFittingBytes}`)
      const below = Math.floor(r.smallestFittingBytes! * 0.9)
      const under = await vramscopeJson<ReplayJson>(['replay', LOG, '-s', spec, '--cap', String(below), '--json'])
      assert.ok(under.strategies[0]!.summary['failures']! > 0, `${r.label} at ${below}`)
    }
  })

  it("leads with the floor and the best RMM allocator's device, not PyTorch's defaults", async () => {
    const out = await vramscopeJson<{ configs: Row[]; floor: { peakLiveRoundedBytes: number } }>(['whatif', LOG, '--json'])
    const best = out.configs.find((r) => r.rank === 1)!
    const text = (await vramscope(['whatif', LOG])).stdout
    const first = text.split('\n')[0]!
    assert.match(first, /live at the peak/)
    assert.ok(first.includes(`the best allocator (${best.label}) runs it in `), first)
    assert.doesNotMatch(first, /PyTorch's defaults/)
    assert.ok(best.smallestFittingBytes! >= out.floor.peakLiveRoundedBytes)
    assert.match(text, new RegExp(`best: ${best.label.replace(/[()]/g, '\\$&')}`))
  })

  it("keeps RMM's rows with --no-strategies, and --conf runs the PyTorch settings given alone", async () => {
    const bare = await vramscopeJson<{ configs: Row[] }>(['whatif', LOG, '--no-strategies', '--no-search', '--json'])
    assert.deepEqual(bare.configs.map((r) => r.strategy).sort(), ['caching', 'rmm_arena', 'rmm_binning', 'rmm_pool', 'rmm_pool', 'rmm_pool'])
    const given = await vramscopeJson<{ configs: Row[] }>(['whatif', LOG, '--conf', 'expandable_segments:True', '--no-search', '--json'])
    assert.deepEqual(
      given.configs.map((r) => [r.kind, r.conf, r.rank]),
      [['pytorch', 'expandable_segments:True', 1]],
    )
  })
})
