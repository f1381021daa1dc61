// Real recordings from an H200 (test/fixtures/pytorch/field-gpu.tar.gz, made by
// scripts/gpu/field-runs.sh with `vramscope record --pytorch` and packed by
// scripts/fixtures/pack_field_gpu.py): transformers models trained with PyTorch's default stacks,
// a ~75 GB Llama step among them, a ring that overflowed, a recording begun after the model was
// loaded, an out-of-memory under a memory fraction, the two ranks of a torchrun job and a program
// killed with kill -9. Each opens; replayed under the settings it recorded, under the limit it ran
// under, its peak reserved and segments are torch.cuda.memory_stats()'s of the same run, to the
// byte; the recorded out-of-memory happens at its request; the device is the H200 the stats beside
// it name; the overflowed and late ones open from their recorded state.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { gunzipSync } from 'node:zlib'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'

import { openInput } from '../../src-main/services/import/open-input.ts'
import { runWhatif } from '../../src-main/services/whatif/whatif.ts'
import { fixture } from '../helpers/cli.ts'

const dir = mkdtempSync(join(tmpdir(), 'vramscope-field-gpu-'))
execFileSync('tar', ['xzf', fixture('pytorch/field-gpu.tar.gz'), '-C', dir])
const runs = join(dir, 'field')
after(() => rmSync(dir, { recursive: true, force: true }))

interface Stats {
  conf: string
  limit_bytes: number | null
  device_name: string
  device_total_bytes: number
  max_entries: number | null
  reason: string
  world_size?: number | null
  oom: { happened: boolean }
  memory_stats: Record<string, number>
}
const stats = (name: string) => JSON.parse(readFileSync(join(runs, `${name}.stats.json`), 'utf8')) as Stats
const names = readdirSync(runs)
  .filter((f) => f.endsWith('.pickle'))
  .map((f) => f.slice(0, -'.pickle'.length))
  .sort()

describe('field recordings from an H200', () => {
  it('holds the runs it says it holds', () => {
    assert.deepEqual(names, [
      'big__default',
      'big__expandable',
      'ddp_rank0__default',
      'ddp_rank1__default',
      'gpt__default',
      'gpt__expandable',
      'gpt__msplit128',
      'gpt_overflow__default',
      'gpt_overflow__expandable',
      'killed__default',
      'late__default',
      'late__msplit128',
      'oom__default',
      'oom_exit__default',
      'profile__default',
    ])
    assert.ok(stats('big__default').memory_stats['reserved_bytes.all.peak']! > 60e9, 'the Llama step reserved over 60 GB')
    assert.equal(stats('gpt_overflow__default').max_entries, 3000)
    assert.equal(stats('killed__default').reason, 'periodic', 'the kill -9 left the periodic snapshot')
    assert.equal(stats('ddp_rank1__default').world_size, 2)
  })

  for (const name of names) {
    it(`${name}: the recorded settings replay to memory_stats' peak reserved and segments, on the H200 the stats name`, async () => {
      const s = stats(name)
      const input = await openInput(join(runs, `${name}.pickle`))
      const out = await runWhatif(input, { confs: ['recorded'], ...(s.limit_bytes !== null && { capBytes: s.limit_bytes }), search: false })
      const row = out.rows[0]!
      assert.equal(row.notRanked, undefined, row.notRanked)
      assert.equal(row.peakReserved, s.memory_stats['reserved_bytes.all.peak'], 'peak reserved, to the byte')
      assert.equal(row.segments, s.memory_stats['segment.all.allocated'], 'segments obtained')
      assert.equal(out.device.name ?? '', 'NVIDIA H200')
      if (s.oom.happened && name === 'oom__default') assert.ok(row.oomReproduced > 0, 'the recorded out-of-memory happens at its request')
      if (name.startsWith('gpt_overflow') || name.startsWith('late'))
        assert.ok(input.pytorch!.overflow.synthesizedBlocks > 0, 'a window that opened on live blocks')
    })
  }

  it("the torch.profiler trace of the same program (profile_memory=True) holds the allocator's memory events", () => {
    const trace = JSON.parse(gunzipSync(readFileSync(fixture('pytorch/field-profile.json.gz'))).toString('utf8')) as {
      profile_memory: number
      traceEvents: { name: string; args?: Record<string, number> }[]
    }
    assert.equal(trace.profile_memory, 1)
    const memory = trace.traceEvents.filter((e) => e.name === '[memory]')
    assert.ok(memory.length > 1000, `${memory.length} [memory] events`)
    const reserved = Math.max(...memory.map((e) => e.args!['Total Reserved']!))
    assert.ok(reserved > 0 && reserved <= stats('profile__default').memory_stats['reserved_bytes.all.peak']!, 'never above the recorded run')
  })

  it('predicts a setting from the default snapshot within 2 % (expandable segments, on both programs)', async () => {
    for (const [program, conf] of [
      ['gpt', 'expandable_segments:True'],
      ['big', 'expandable_segments:True'],
    ] as const) {
      const real = stats(`${program}__expandable`).memory_stats['reserved_bytes.all.peak']!
      const out = await runWhatif(await openInput(join(runs, `${program}__default.pickle`)), { confs: [conf], search: false })
      const predicted = out.rows[0]!.peakReserved
      assert.ok(Math.abs(predicted - real) <= 0.02 * real, `${program}: ${predicted} predicted, ${real} real`)
    }
  })
})
