// Replay from the recorded state: a recording cut as an overflowed ring buffer cuts it (its first K
// trace entries dropped, its final `segments` kept) replays under its recorded settings to the peak
// reserved and segment count of the whole run, because PyTorch's policy starts from the segments
// as they stood when the window opened (docs/architecture.md, "Replay from the recorded state").
import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'

import { cutSnapshot, plainSnapshot } from '../../../../scripts/fixtures/cut-snapshot.ts'
import { openInput } from '../../../../src-main/services/import/open-input.ts'
import { RECORDED_LAYOUT_NAME, STAND_IN_ROWS } from '../../../../src-main/services/import/pytorch/types.ts'
import { withLayoutMetrics } from '../../../../src-main/services/analysis/layout-metrics.ts'
import { windowOpenState } from '../../../../src-main/services/replay/initial-state.ts'
import { replayInput } from '../../../../src-main/services/replay/replay-input.ts'
import { replayTrace } from '../../../../src-main/services/replay/replay.ts'
import { parseStrategySpecs } from '../../../../src-main/services/replay/strategy-spec.ts'
import { readTrace, writeTrace } from '../../../../src-main/services/trace/file.ts'

const fixtures = join(import.meta.dirname, '../../../fixtures/pytorch')
const dir = mkdtempSync(join(tmpdir(), 'vramscope-initial-state-'))
after(() => rmSync(dir, { recursive: true, force: true }))

type Snapshot = ReturnType<typeof plainSnapshot>

function load(name: string): Snapshot {
  return plainSnapshot(readFileSync(join(fixtures, name)))
}

/** The snapshot with its first `k` trace entries dropped, as a full ring buffer drops them; the final segments stay. */
function cut(snapshot: Snapshot, k: number, name: string): string {
  const path = join(dir, name)
  writeFileSync(path, cutSnapshot(snapshot, k))
  return path
}

const pytorch = parseStrategySpecs(['caching:preset=pytorch'], 'strategies')

/**
 * Peak reserved and segments obtained of the PyTorch policy under the recorded settings, and the
 * segments of the recorded layout (those the window saw obtained, and those in use when it opened).
 */
async function replayed(path: string, recordedState = true): Promise<{ peak: number; segments: number; recordedSegments: number; seeded: boolean }> {
  const input = await openInput(path)
  const r = await replayInput(input, pytorch, { recordedState })
  const s = r.results[0]!.summary!
  const recorded = withLayoutMetrics(input.strategies.find((x) => x.name === RECORDED_LAYOUT_NAME)!).summary!
  return {
    peak: s['peakReserved']!,
    segments: s['deviceCalls.regionAlloc']!,
    recordedSegments: recorded['deviceCalls.regionAlloc']!,
    seeded: r.start[0]?.seeded ?? false,
  }
}

function within1(actual: number, expected: number, what: string): void {
  const error = Math.abs(actual - expected) / expected
  assert.ok(error <= 0.01, `${what}: ${actual} B against ${expected} B (${(error * 100).toFixed(2)} %, more than 1 %)`)
}

// Recordings whose whole replay reproduces the run (the model's own fidelity, docs/fidelity.md):
// segments of both kinds, private pools, side streams, max_split_size.
const RECORDINGS = [
  'mlp_varbatch.pickle',
  'convnet_varimg.pickle',
  'transformer_varseq.pickle',
  'real/mlp_fragment__default.pickle',
  'real/mlp_fragment__msplit128.pickle',
  'real/mlp_fragment__expandable.pickle',
  'real/cuda_graph__default.pickle',
  'real/cuda_graph__expandable.pickle',
  'real/multistream__expandable.pickle',
]

describe('a recording with its head cut off replays from the recorded state', () => {
  for (const name of RECORDINGS) {
    test(`${name}: cut at a quarter, a half and three quarters, the whole run's peak reserved within 1 % and the recorded segments`, async () => {
      const snapshot = load(name)
      const whole = await replayed(join(fixtures, name))
      const n = snapshot.device_traces[0]!.length
      for (const fraction of [0.25, 0.5, 0.75]) {
        const k = Math.floor(n * fraction)
        const r = await replayed(cut(snapshot, k, `${name.replace('/', '_')}-${k}.json`))
        assert.ok(r.seeded, `cut at ${k} of ${n}: started from the recorded state`)
        within1(r.peak, whole.peak, `cut at ${k} of ${n}, peak reserved`)
        assert.equal(r.segments, r.recordedSegments, `cut at ${k} of ${n}: segments obtained`)
      }
    })
  }

  test("real/mlp_fragment__default.pickle cut at a quarter: the run's own torch.cuda.memory_stats, where starting empty misses them", async () => {
    const name = 'real/mlp_fragment__default.pickle'
    const stats = JSON.parse(readFileSync(join(fixtures, name.replace('.pickle', '.stats.json')), 'utf8')).memory_stats
    const snapshot = load(name)
    const path = cut(snapshot, Math.floor(snapshot.device_traces[0]!.length / 4), 'mlp_fragment-quarter.json')
    const seeded = await replayed(path)
    within1(seeded.peak, stats['reserved_bytes.all.peak'], 'seeded peak reserved')
    assert.equal(seeded.segments, stats['segment.all.allocated'])
    // What a replay from empty, with the live blocks allocated at t = 0, gives instead.
    const empty = await replayed(path, false)
    assert.notEqual(empty.segments, stats['segment.all.allocated'])
  })

  test('the overflowed fixture (its ring kept the last entries) replays to the recorded peak and segments', async () => {
    const overflowed = await replayed(join(fixtures, 'mlp_varbatch_overflowed.pickle'))
    const whole = await replayed(join(fixtures, 'mlp_varbatch.pickle'))
    assert.ok(overflowed.seeded)
    within1(overflowed.peak, whole.peak, 'peak reserved')
    assert.equal(overflowed.segments, whole.segments)
  })
})

describe('the window-open state', () => {
  test('read back from a trace file as from the snapshot: the same state', async () => {
    const snapshot = load('mlp_varbatch.pickle')
    const input = await openInput(cut(snapshot, 1000, 'mlp-1000.json'))
    const fromSnapshot = windowOpenState(input.trace, input.strategies)
    assert.equal(fromSnapshot.kind, 'state')
    const file = join(dir, 'mlp-1000.vramscope')
    await writeTrace(file, input.trace, input.strategies)
    const back = await readTrace(file)
    const fromFile = windowOpenState(back.trace, back.strategies)
    assert.deepEqual(fromFile, fromSnapshot)
  })

  test('a recording that began before its first allocation has none, and replays as before', async () => {
    const input = await openInput(join(fixtures, 'mlp_varbatch.pickle'))
    assert.equal(input.trace.meta.properties[STAND_IN_ROWS], undefined)
    assert.deepEqual(windowOpenState(input.trace, input.strategies), { kind: 'empty' })
    const r = await replayInput(input, parseStrategySpecs(['caching:preset=pytorch,slab'], 'strategies'))
    assert.deepEqual(r.start, [])
  })

  test('only the PyTorch policy of the same segment kind is seeded; the others say why they start empty', async () => {
    const input = await openInput(join(fixtures, 'mlp_varbatch_overflowed.pickle'))
    const r = await replayInput(input, parseStrategySpecs(['caching:preset=pytorch,caching:preset=pytorch:expandable_segments=true,slab'], 'strategies'))
    assert.deepEqual(
      r.start.map((s) => [s.seeded, s.reason ?? '']),
      [
        [true, ''],
        [false, "the recorded segments are not expandable and this setting's are"],
        [false, 'only the PyTorch policy replays from the recorded segments'],
      ],
    )
    assert.equal(r.results[0]!.summary!['seededSegments'], r.start[0]!.segments)
    assert.equal(r.results[1]!.summary!['seededSegments'], 0)
  })

  test('an initial state on another strategy, or with a block outside its segments, is refused naming it', async () => {
    const input = await openInput(join(fixtures, 'mlp_varbatch_overflowed.pickle'))
    const open = windowOpenState(input.trace, input.strategies)
    assert.equal(open.kind, 'state')
    if (open.kind !== 'state') return
    await assert.rejects(
      replayTrace(input.trace, [{ strategy: 'slab', initialState: open.open.state }]),
      /targets\[0\]\.initialState: only caching with preset pytorch/,
    )
    const moved = { ...open.open.state, blockAddress: open.open.state.blockAddress.map((a) => a + (1n << 40n)) }
    await assert.rejects(
      replayTrace(input.trace, [{ strategy: 'caching', params: { preset: 'pytorch' }, initialState: moved }]),
      /targets\[0\]\.initialState: block 0 at 0x[0-9a-f]+ \(\d+ B\) lies in no one segment/,
    )
  })
})

describe('a device smaller than the recorded state', () => {
  test('starts empty, says why, and counts the requests that do not fit as failures', async () => {
    const input = await openInput(join(fixtures, 'mlp_varbatch_overflowed.pickle'))
    const r = await replayInput(input, pytorch, { cap: 64 * 2 ** 20 })
    assert.equal(r.start[0]!.seeded, false)
    assert.match(r.start[0]!.reason!, /^the [\d.]+ MiB in use when recording began exceed the device's 64(\.0)? MiB$/)
    assert.ok(r.results[0]!.summary!['failures']! > 0)
  })
})

describe('a window-open state replay would refuse', () => {
  test('two listed segments that overlap: every target starts empty, and says why', async () => {
    const snapshot = load('mlp_varbatch.pickle') as Snapshot & { segments: { address: number; total_size: number }[] }
    // A second copy of a segment 512 B further on: a file no allocator wrote.
    const first = snapshot.segments[0]!
    snapshot.segments.push({ ...first, address: first.address + 512 })
    const input = await openInput(cut(snapshot, 1000, 'mlp-overlapping.json'))
    const open = windowOpenState(input.trace, input.strategies)
    assert.equal(open.kind, 'unusable')
    const r = await replayInput(input, pytorch)
    assert.equal(r.start[0]!.seeded, false)
    assert.match(r.start[0]!.reason!, /segments \d+ and \d+ overlap/)
    assert.ok(r.results[0]!.summary!['peakReserved']! > 0)
  })
})
