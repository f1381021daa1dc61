// Recorded settings, --conf and limits at the CLI's edge, run as a user runs them on a real
// PyTorch 2.11 snapshot (the JSON form of oom_fraction__default, with its allocator_settings
// edited): settings PyTorch would refuse are the file's problem (a warning naming the file, the key
// and the value) and replay without the bad item; --conf replays exactly as written; a limit that
// would round to 0 B is refused by name, never read as no limit; numbers past 2^53, repeated
// configurations and very long values are refused naming the argument, with a bounded echo.
import assert from 'node:assert/strict'
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'

import { fixture, shown, vramscope, vramscopeJson } from '../helpers/cli.ts'

const dir = mkdtempSync(join(tmpdir(), 'vramscope-settings-'))
after(() => rmSync(dir, { recursive: true, force: true }))
const REAL_JSON = fixture('pytorch/real/forms/oom_fraction__default.json')
const EXPANDABLE = fixture('pytorch/real/mlp_fragment__expandable.pickle')
const OOM = fixture('pytorch/real/oom_fraction__default.pickle')

/** The real snapshot with its allocator_settings' values replaced (and no configuration string, as older writers leave it). */
function withSettings(name: string, values: Record<string, unknown>): string {
  const snapshot = JSON.parse(readFileSync(REAL_JSON, 'utf8')) as { allocator_settings: Record<string, unknown> }
  const { PYTORCH_CUDA_ALLOC_CONF: _, ...settings } = snapshot.allocator_settings
  snapshot.allocator_settings = { ...settings, ...values }
  const path = join(dir, `${name}.json`)
  writeFileSync(path, JSON.stringify(snapshot))
  return path
}

const divisionsOf = (n: number): Record<string, number> => Object.fromEntries(Array.from({ length: 16 }, (_, i) => [String(2 ** i), n]))

describe('recorded settings PyTorch would refuse', () => {
  const cases: [string, Record<string, unknown>, string, string][] = [
    ['split-1MiB', { max_split_size: 2 ** 20 }, 'max_split_size', '1048576'],
    ['gc-5', { garbage_collection_threshold: 5.0 }, 'garbage_collection_threshold', '5'],
    ['divisions-3', { roundup_power2_divisions: divisionsOf(3) }, 'roundup_power2_divisions', '3'],
    ['split-2^70', { max_split_size: 2 ** 70 }, 'max_split_size', '1180591620717411303424'],
    ['split-negative', { max_split_size: -4 * 2 ** 20 }, 'max_split_size', '-4194304'],
  ]
  for (const [name, values, key, value] of cases)
    it(`${name}: replay and whatif warn naming the file, ${key} and its value, and replay without it`, async () => {
      const file = withSettings(name, { ...values, garbage_collection_threshold: values['garbage_collection_threshold'] ?? 0.6 })
      const replay = await vramscope(['replay', file, '-s', 'caching:preset=pytorch'])
      assert.equal(replay.code, 0, shown(replay))
      assert.doesNotMatch(replay.stdout + replay.stderr, /internal error|ConfError|\n\s+at /, shown(replay))
      const warning = (replay.stdout + replay.stderr).split('\n').find((l) => l.includes(key) && l.includes('refuse'))
      assert.ok(warning, `a warning naming ${key}: ${shown(replay)}`)
      assert.ok(warning.includes(`${name}.json`), warning)
      assert.ok(warning.includes(value), warning)
      // The good item beside the bad one is still replayed (the recorded gc threshold, unless it is the bad one).
      if (key !== 'garbage_collection_threshold') assert.match(replay.stdout, /garbage_collection_threshold:0\.6/, shown(replay))

      const whatif = await vramscope(['whatif', file, '--no-search', '--no-strategies'])
      assert.equal(whatif.code, 0, shown(whatif))
      assert.doesNotMatch(whatif.stderr, /--conf/, shown(whatif))
      assert.ok(
        whatif.stdout.split('\n').some((l) => l.includes(key) && l.includes(value) && l.includes(`${name}.json`)),
        shown(whatif),
      )
    })
})

describe('--conf is replayed exactly as written', () => {
  it('expandable_segments:False on a snapshot recorded with expandable segments replays without them', async () => {
    const out = await vramscopeJson<{
      strategies: { name: string; params: Record<string, string>; summary: Record<string, number> }[]
      recordedSettings: unknown[]
    }>(['replay', EXPANDABLE, '--conf', 'expandable_segments:False'])
    const row = out.strategies.find((s) => !s.name.includes('recorded'))!
    assert.deepEqual(out.recordedSettings, [], JSON.stringify(out.recordedSettings))
    assert.notEqual(row.params['expandable_segments'], 'true', JSON.stringify(row))
    assert.ok(!row.name.includes('['), row.name)
    // Without expandable segments the model makes segments of its own (cudaMalloc), not maps.
    assert.ok((row.summary['deviceCalls.regionAlloc'] ?? 0) > 0, JSON.stringify(row.summary))
  })
})

describe('a limit is never 0 B', () => {
  it('refuses per_process_memory_fraction:1e-12, naming --conf', async () => {
    const run = await vramscope(['whatif', OOM, '--no-search', '--conf', 'per_process_memory_fraction:1e-12'])
    assert.equal(run.code, 2, shown(run))
    assert.match(run.stderr, /--conf.*per_process_memory_fraction.*0 bytes/, shown(run))
  })
  it('refuses a --cap fraction that rounds to 0 B, of the assumed device or of --gpu', async () => {
    for (const args of [
      ['--cap', '0.00000000000001'],
      ['--cap', '0.5', '--gpu', '1'],
    ]) {
      const run = await vramscope(['whatif', OOM, '--no-search', ...args])
      assert.equal(run.code, 2, shown(run))
      assert.match(run.stderr, /--cap.*0 bytes/, shown(run))
    }
  })
})

describe('arguments are checked at the edge, naming the argument', () => {
  it('refuses numbers past 2^53 in --conf without echoing them changed', async () => {
    for (const command of ['whatif', 'replay']) {
      const run = await vramscope([command, OOM, '--conf', 'max_split_size_mb:1000000000000000000000000000000'])
      assert.equal(run.code, 2, shown(run))
      assert.match(run.stderr, /^vramscope: --conf: /m, shown(run))
      assert.doesNotMatch(run.stderr, /1e\+30|Infinity/, shown(run))
      assert.ok(!run.stderr.includes(OOM), shown(run))
    }
  })
  it('refuses the same --conf given twice, naming --conf rather than the file', async () => {
    const run = await vramscope(['replay', OOM, ...Array.from({ length: 500 }, () => ['--conf', 'expandable_segments:True']).flat()])
    assert.equal(run.code, 2, shown(run))
    assert.match(run.stderr, /^vramscope: --conf: /m, shown(run))
    assert.ok(!run.stderr.includes(OOM), shown(run))
  })
  it('echoes a bounded prefix of a 10 kB --cap', async () => {
    const run = await vramscope(['replay', OOM, '-s', 'caching', '--cap', '9'.repeat(10_000)])
    assert.equal(run.code, 2, shown(run))
    assert.match(run.stderr, /--cap/, shown(run))
    assert.ok(run.stderr.length < 400, `${run.stderr.length} characters: ${run.stderr.slice(0, 400)}`)
  })
  it('says how large a size may be in a unit it reads', async () => {
    const ok = await vramscope(['replay', OOM, '-s', 'caching', '--cap', '8191TiB'])
    assert.equal(ok.code, 0, shown(ok))
    const big = await vramscope(['replay', OOM, '-s', 'caching', '--cap', '8192TiB'])
    assert.equal(big.code, 2, shown(big))
    assert.match(big.stderr, /--cap.*at most .*8192 TiB/, shown(big))
    assert.doesNotMatch(big.stderr, /PiB/, shown(big))
  })
})

describe('replay and whatif agree under a cap', () => {
  it('counts the recorded out-of-memory as a request in both (synthetic.pickle: 80 GiB asked, 3 GiB cap)', async () => {
    const file = fixture('pytorch/synthetic.pickle')
    const whatif = await vramscopeJson<{ configs: { conf: string; failures: number }[] }>([
      'whatif',
      file,
      '--conf',
      '',
      '--cap',
      '3GiB',
      '--gpu',
      '80GiB',
      '--no-search',
    ])
    const row = whatif.configs.find((c) => c.conf === '')!
    const replay = await vramscopeJson<{ strategies: { name: string; recorded: boolean; summary: Record<string, number> }[]; oomRequests: number }>([
      'replay',
      file,
      '--conf',
      '',
      '--cap',
      '3GiB',
    ])
    const replayed = replay.strategies.find((s) => !s.recorded)!
    assert.ok(row.failures >= 1, JSON.stringify(row))
    assert.equal(replayed.summary['failures'], row.failures, JSON.stringify(replayed.summary))
    assert.equal(replay.oomRequests, 1)
  })
})

interface WhatifOut {
  deviceBytes: number
  device: { bytes: number; source: string }
  endsAtOom: boolean
  implied: { reservedBytes: number; deviceFree: number } | null
  configs: { rank: number; conf: string; kind: string; peakReserved: number; failures: number; smallestFittingBytes: number | null }[]
}

/** The real OOM snapshot cut just after its out-of-memory: the recording ended there. */
function endingAtOom(): string {
  const snapshot = JSON.parse(readFileSync(REAL_JSON, 'utf8')) as { device_traces: { action: string }[][] }
  const trace = snapshot.device_traces[0]!
  snapshot.device_traces[0] = trace.slice(0, trace.findIndex((e) => e.action === 'oom') + 1)
  const path = join(dir, 'ends-at-oom.json')
  writeFileSync(path, JSON.stringify(snapshot))
  return path
}

describe("the lab's words", () => {
  it('recommends nothing where every configuration fails under the limit: only more memory helps', async () => {
    const run = await vramscope(['whatif', OOM, '--no-strategies'])
    assert.equal(run.code, 0, shown(run))
    const best = run.stdout.split('\n').find((l) => l.startsWith('best:'))!
    assert.match(best, /^best: none: every configuration fails .*only more memory/, best)
    assert.doesNotMatch(best, /^best: PYTORCH_ALLOC_CONF/, best)
  })

  it("takes the device's memory from the out-of-memory (free plus reserved), else from the stats beside the file, else says which is assumed and how --gpu sets it", async () => {
    const oom = await vramscopeJson<WhatifOut>(['whatif', OOM, '--no-search', '--no-strategies'])
    assert.equal(oom.device.source, 'oom')
    assert.equal(oom.device.bytes, oom.implied!.reservedBytes + oom.implied!.deviceFree)
    // The what-if suite's stats beside the snapshot name the H100 it ran on.
    const named = await vramscope(['whatif', fixture('pytorch/real/mlp_fragment__msplit128.pickle'), '--no-search', '--no-strategies'])
    assert.match(
      named.stdout,
      /^device: NVIDIA H100 80GB HBM3, 79\.2 GiB \(as mlp_fragment__msplit128\.stats\.json names it; --gpu sets another\)/m,
      shown(named),
    )
    const alone = join(dir, 'no-stats-beside.pickle')
    copyFileSync(fixture('pytorch/real/mlp_fragment__msplit128.pickle'), alone)
    const plain = await vramscope(['whatif', alone, '--no-search', '--no-strategies'])
    assert.match(plain.stdout, /^device: assumed an H100 80GB, 79\.2 GiB .*--gpu sets it/m, shown(plain))
    const given = await vramscopeJson<WhatifOut>(['whatif', OOM, '--no-search', '--no-strategies', '--gpu', '141GB'])
    assert.deepEqual(given.device, { bytes: 141e9, source: 'option' })
  })

  it("marks as failing every row that reserves more than the device's memory", async () => {
    const out = await vramscopeJson<WhatifOut>(['whatif', fixture('pytorch/real/mlp_fragment__msplit128.pickle'), '--gpu', '3GiB', '--no-search'])
    assert.equal(out.deviceBytes, 3 * 2 ** 30)
    for (const row of out.configs) assert.ok(row.peakReserved <= out.deviceBytes || row.failures > 0, JSON.stringify(row))
    assert.ok(
      out.configs.some((r) => r.failures > 0),
      'some rows need more than 3 GiB',
    )
  })

  it('says "at least" for smallest fitting limits where the recording ended at its out-of-memory', async () => {
    const file = endingAtOom()
    const out = await vramscopeJson<WhatifOut>(['whatif', file, '--no-strategies', '--cap', '80GiB'])
    assert.equal(out.endsAtOom, true)
    const run = await vramscope(['whatif', file, '--no-strategies', '--cap', '80GiB'])
    assert.match(run.stdout, /at least \d/, shown(run))
    assert.match(run.stdout, /ended at its out-of-memory.*lower bound/, shown(run))
  })

  it('says in words what the recorded max_split_size_mb:128 costs against the defaults', async () => {
    const run = await vramscope(['whatif', fixture('pytorch/real/mlp_fragment__msplit128.pickle'), '--no-strategies'])
    const out = await vramscopeJson<WhatifOut>(['whatif', fixture('pytorch/real/mlp_fragment__msplit128.pickle'), '--no-strategies'])
    const recorded = out.configs.find((c) => c.kind === 'recorded')!
    const defaults = out.configs.find((c) => c.kind === 'pytorch' && c.conf === '')!
    const change = Math.round(((recorded.peakReserved - defaults.peakReserved) / defaults.peakReserved) * 100)
    assert.match(
      run.stdout,
      new RegExp(`^the recorded settings \\(max_split_size_mb:128\\) reserve .* \\+${change} % against PyTorch's defaults`, 'm'),
      shown(run),
    )
  })
})
