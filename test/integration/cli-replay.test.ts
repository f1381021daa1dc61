// `vramscope replay`, run as a user runs it: the side-by-side table with winners marked, --json for
// scripts (the same figures as the replay service gives), the device cap, results saved with -o,
// and the fidelity test through the whole path: a real PyTorch snapshot replayed through
// caching:preset=pytorch reproduces torch.cuda.memory_stats() of the run that recorded it (peak
// reserved within 1 %, segments exactly), for every fixture recorded on the GPU.
import assert from 'node:assert/strict'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'

import { openInput } from '../../src-main/services/import/open-input.ts'
import { replayInput } from '../../src-main/services/replay/replay-input.ts'
import { parseStrategySpecs } from '../../src-main/services/replay/strategy-spec.ts'
import { readTrace } from '../../src-main/services/trace/file.ts'
import { fixture, PYTORCH_WORKLOADS, shown, vramscope, vramscopeJson } from '../helpers/cli.ts'

interface ReplayJson {
  file: string
  events: number
  cap: number | null
  output: string | null
  strategies: {
    name: string
    strategy: string
    params: Record<string, unknown>
    recorded: boolean
    recordedPlacement: number
    summary: Record<string, number>
    unranked: string | null
  }[]
  winners: Record<string, string[]>
  fidelity: { model: string; recorded: string; modelPeakReserved: number; recordedPeakReserved: number; modelSegments: number; recordedSegments: number }[]
}

const summaryOf = (result: ReplayJson, name: string): Record<string, number> => {
  const found = result.strategies.find((s) => s.name === name)
  assert.ok(found, `${name} in ${result.strategies.map((s) => s.name).join(', ')}`)
  return found.summary
}

let scratch: string
before(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'vramscope-cli-replay-'))
})
after(async () => {
  await rm(scratch, { recursive: true, force: true })
})

describe('vramscope replay: PyTorch fidelity through the whole path', () => {
  for (const workload of PYTORCH_WORKLOADS) {
    it(`${workload}: caching:preset=pytorch reproduces PyTorch's peak reserved within 1 % and its segment count exactly`, async () => {
      const stats = JSON.parse(await readFile(fixture(`pytorch/${workload}.stats.json`), 'utf8')).memory_stats
      const result = await vramscopeJson<ReplayJson>(['replay', fixture(`pytorch/${workload}.pickle`), '--strategies', 'caching:preset=pytorch'])
      const model = summaryOf(result, 'caching (pytorch)')
      const torchPeak: number = stats['reserved_bytes.all.peak']
      const error = Math.abs(model['peakReserved']! - torchPeak) / torchPeak
      assert.ok(error <= 0.01, `peak reserved ${model['peakReserved']} vs PyTorch's ${torchPeak}: ${(error * 100).toFixed(3)} %`)
      assert.equal(model['deviceCalls.regionAlloc'], stats['segment.all.allocated'], 'segments (cudaMalloc calls)')
      assert.equal(model['deviceCalls.regionAlloc']! - model['deviceCalls.regionFree']!, stats['segment.all.current'], 'segments held at the end')
      assert.equal(model['failures'], 0)
      // The recorded allocator is printed beside the model, and it is PyTorch's own figure.
      assert.equal(summaryOf(result, 'pytorch (recorded)')['peakReserved'], torchPeak)
      assert.equal(result.strategies.find((s) => s.name === 'caching (pytorch)')!.recordedPlacement, stats['segment.all.allocated'])
      assert.equal(result.fidelity.length, 1)
      assert.equal(result.fidelity[0]!.recordedPeakReserved, torchPeak)
    })
  }
})

describe('vramscope replay', () => {
  const snapshot = fixture('pytorch/mlp_varbatch.pickle')
  const strategies = 'caching:preset=pytorch,slab,buddy:pool_size=4GiB'

  it('prints the strategies side by side with the winner of each metric marked', async () => {
    const run = await vramscope(['replay', snapshot, '--strategies', strategies])
    assert.equal(run.code, 0, shown(run))
    const lines = run.stdout.split('\n')
    const header = lines.find((l) => l.includes('caching (pytorch)'))!
    for (const name of ['caching (pytorch)', 'slab', 'buddy (pool_size=4GiB)', 'pytorch (recorded)']) assert.ok(header.includes(name), header)
    for (const metric of [
      'peak requested',
      'peak reserved',
      'internal waste at peak',
      'external fragmentation at peak',
      'failures',
      'device calls',
      'events/s',
    ])
      assert.ok(
        lines.some((l) => l.startsWith(metric)),
        `a row for ${metric}`,
      )
    // The 4 GiB buddy pool reserves the most, so it cannot win peak reserved; someone does.
    const peakRow = lines.find((l) => l.startsWith('peak reserved'))!
    assert.match(peakRow, /\*/)
    assert.match(peakRow, /4\.00 GiB(?! \*)/, 'buddy reserves its whole 4 GiB pool and is not marked')
    assert.match(run.stdout, /caching \(pytorch\): peak reserved 268 MiB vs pytorch \(recorded\) 268 MiB/)
    assert.equal(run.stderr, '')
  })

  it('--json gives the figures the replay service gives, and names the winners', async () => {
    const result = await vramscopeJson<ReplayJson>(['replay', snapshot, '--strategies', strategies])
    const input = await openInput(snapshot)
    const direct = await replayInput(input, parseStrategySpecs([strategies]))
    assert.equal(result.events, input.trace.events.kind.length)
    assert.deepEqual(
      result.strategies.map((s) => s.name),
      ['caching (pytorch)', 'slab', 'buddy (pool_size=4GiB)', 'pytorch (recorded)'],
    )
    for (const r of direct.results)
      for (const key of ['peakRequested', 'peakReserved', 'internalWasteAtPeak', 'externalFragmentationAtPeak', 'failures', 'deviceCalls'] as const)
        assert.equal(summaryOf(result, r.name)[key], r.summary![key], `${r.name} ${key}`)
    const reserved = direct.results.map((r) => r.summary!['peakReserved']!)
    const best = Math.min(...reserved)
    assert.deepEqual(
      result.winners['peakReserved'],
      direct.results.filter((r) => r.summary!['peakReserved'] === best).map((r) => r.name),
    )
    assert.ok(!Object.values(result.winners).flat().includes('pytorch (recorded)'), 'the recorded allocator is the reference, not ranked')
  })

  it('ranks only strategies that served every request and kept every live block, and says why not', async () => {
    // Under a 64 MiB cap the trace cannot be served: a strategy that failed is never best, however little it reserved.
    const capped = await vramscopeJson<ReplayJson>([
      'replay',
      snapshot,
      '--strategies',
      'caching:preset=pytorch,slab,buddy:pool_size=32MiB,arena',
      '--cap',
      '64MiB',
    ])
    const failed = new Set(
      capped.strategies.filter((s) => !s.recorded && ((s.summary['failures'] ?? 0) > 0 || (s.summary['droppedByReset'] ?? 0) > 0)).map((s) => s.name),
    )
    assert.ok(failed.has('buddy (pool_size=32MiB)'), 'the small pool fails')
    for (const names of Object.values(capped.winners)) for (const n of names) assert.ok(!failed.has(n), `${n} failed yet is starred`)
    const buddy = capped.strategies.find((s) => s.name === 'buddy (pool_size=32MiB)')!
    assert.equal(buddy.unranked, `${buddy.summary['failures']!.toLocaleString('en-US')} failures`)
    const arena = capped.strategies.find((s) => s.name === 'arena')!
    if (arena.summary['droppedByReset']! > 0) assert.match(arena.unranked!, /dropped [\d,]+ live blocks at resets/)
    const text = await vramscope(['replay', snapshot, '--strategies', 'slab,buddy:pool_size=32MiB', '--cap', '64MiB'])
    assert.match(text.stdout, /^ranked\s+(yes|no: .*)\s+no: [\d,]+ failures?\b/m)
    assert.match(text.stdout, /^live blocks dropped at resets/m)
  })

  it('sizes the pools of pool strategies named without sizes from the trace, so none fails for lack of a pool', async () => {
    const result = await vramscopeJson<ReplayJson & { sized: { label: string; params: string }[] }>([
      'replay',
      snapshot,
      '--strategies',
      'block_pool,buddy,slab',
    ])
    for (const s of result.strategies.filter((r) => !r.recorded)) assert.equal(s.summary['failures'], 0, `${s.name} serves every request`)
    assert.deepEqual(
      result.sized.map((z) => z.label),
      ['block_pool', 'buddy'],
    )
    assert.ok(Number(result.strategies.find((s) => s.name === 'buddy')!.params['pool_size']) > 0)
  })

  it('--cap makes requests that do not fit fail, and they are counted', async () => {
    const free = await vramscopeJson<ReplayJson>(['replay', snapshot, '--strategies', 'caching:preset=pytorch'])
    const peak = summaryOf(free, 'caching (pytorch)')['peakRequested']!
    const capped = await vramscopeJson<ReplayJson>(['replay', snapshot, '--strategies', 'caching:preset=pytorch', '--cap', '64MiB'])
    assert.ok(peak > 64 * 2 ** 20, 'the trace needs more than the cap')
    assert.equal(capped.cap, 64 * 2 ** 20)
    assert.ok(summaryOf(capped, 'caching (pytorch)')['failures']! > 0)
    assert.ok(summaryOf(capped, 'caching (pytorch)')['peakReserved']! <= 64 * 2 ** 20)
    assert.equal(summaryOf(free, 'caching (pytorch)')['failures'], 0)
  })

  it('-o saves the trace with every result, which export and info then read', async () => {
    const out = join(scratch, 'replayed.vramscope')
    const run = await vramscope(['replay', fixture('rmm/clock-time.csv'), '--strategies', 'slab,buddy', '-o', out])
    assert.equal(run.code, 0, shown(run))
    const saved = await readTrace(out)
    assert.deepEqual(
      saved.strategies.map((s) => s.name),
      ['slab', 'buddy'],
    )
    for (const s of saved.strategies) {
      assert.ok(s.layout && s.layout.op.length > 0, `${s.name} keeps its layout events`)
      assert.ok(s.metrics && s.metrics.time.length > 0, `${s.name} keeps its metrics`)
      assert.ok((s.summary?.['peakReserved'] ?? 0) > 0)
    }
    assert.equal(saved.trace.events.kind.length, (await openInput(fixture('rmm/clock-time.csv'))).trace.events.kind.length)
  })

  it("reads strategy lists: parameters after colons or commas, a size list's own commas, bracketed values", async () => {
    const result = await vramscopeJson<ReplayJson>([
      'replay',
      fixture('rmm/clock-time.csv'),
      '-s',
      'slab:classes=256,1KiB,4KiB,buddy:pool_size=1GiB,min_block=512',
      '-s',
      'caching:preset=pytorch:max_split_size=[40MiB]',
    ])
    assert.deepEqual(
      result.strategies.map((s) => [s.strategy, s.params]),
      [
        ['slab', { classes: '256,1KiB,4KiB' }],
        ['buddy', { pool_size: '1GiB', min_block: '512' }],
        ['caching', { preset: 'pytorch', max_split_size: '40MiB' }],
      ],
    )
  })

  it('accepts caching:preset=seed as pow2 (its former name) with a one-line deprecation warning on stderr', async () => {
    const csv = fixture('rmm/clock-time.csv')
    const old = await vramscope(['replay', csv, '--json', '-s', 'caching:preset=seed'])
    assert.equal(old.code, 0, shown(old))
    const warnings = old.stderr.split('\n').filter((line) => line !== '')
    assert.equal(warnings.length, 1, old.stderr)
    assert.match(warnings[0]!, /warning: .*preset=seed is deprecated, use preset=pow2/)
    const renamed = await vramscopeJson<ReplayJson>(['replay', csv, '-s', 'caching:preset=pow2'])
    const result = JSON.parse(old.stdout) as ReplayJson
    assert.deepEqual(
      result.strategies.map((s) => [s.name, s.params]),
      [['caching (pow2)', { preset: 'pow2' }]],
    )
    for (const key of ['peakRequested', 'peakReserved', 'internalWasteAtPeak', 'externalFragmentationAtPeak', 'failures', 'deviceCalls'])
      assert.equal(summaryOf(result, 'caching (pow2)')[key], summaryOf(renamed, 'caching (pow2)')[key], key)
  })

  it('replays several --strategies options and repeated strategies with distinct labels', async () => {
    const result = await vramscopeJson<ReplayJson>(['replay', fixture('rmm/clock-time.csv'), '-s', 'slab', '-s', 'slab:slab_size=4MiB,slab'])
    assert.deepEqual(
      result.strategies.map((s) => s.name),
      ['slab', 'slab (slab_size=4MiB)', 'slab #2'],
    )
  })
})

describe('vramscope replay of an overflowed recording', () => {
  const file = fixture('pytorch/mlp_varbatch_overflowed.pickle')

  it('starts the PyTorch policy from the recorded state, says so, and reaches the recorded peak and segments', async () => {
    const run = await vramscope(['replay', file, '-s', 'caching:preset=pytorch,slab'])
    assert.equal(run.code, 0, shown(run))
    const text = run.stdout
    assert.match(
      text,
      /caching \(pytorch\): started from the recorded state when recording began: 16 segments with 36 live blocks and the free space between them/,
    )
    assert.match(
      text,
      /slab: started empty, with the blocks live when recording began allocated at t = 0 \(only the PyTorch policy replays from the recorded segments\)/,
    )
    const result = await vramscopeJson<ReplayJson & { start: { label: string; seeded: boolean }[] }>(['replay', file, '-s', 'caching:preset=pytorch'])
    assert.deepEqual(
      result.start.map((s) => [s.label, s.seeded]),
      [['caching (pytorch)', true]],
    )
    const f = result.fidelity[0]!
    assert.equal(f.modelPeakReserved, f.recordedPeakReserved)
    assert.equal(f.modelSegments, f.recordedSegments)
  })

  it('--no-recorded-state starts it empty, as before, and says why', async () => {
    const run = await vramscope(['replay', file, '-s', 'caching:preset=pytorch', '--no-recorded-state'])
    assert.equal(run.code, 0, shown(run))
    assert.match(
      run.stdout,
      /caching \(pytorch\): started empty, with the blocks live when recording began allocated at t = 0 \(the recorded state was not asked for\)/,
    )
  })
})
