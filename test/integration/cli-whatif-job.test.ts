// `vramscope whatif` on a job of many ranks, the real CLI on the two ranks of a real torchrun job
// recorded on an H200 by record --pytorch (test/fixtures/pytorch/field-gpu.tar.gz): a folder as
// record --pytorch leaves it (job.json, ranks from the stats beside each snapshot), files named by
// rank, files in order, a pattern; each rank's recorded peak exact, the worst rank, the
// configurations ranked on whether they fit every rank and the smallest device that fits them all;
// two files of one rank and a missing file refused, named.
import assert from 'node:assert/strict'
import { copyFileSync, mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'

import { rankInName } from '../../src-main/services/whatif/job.ts'
import { shown, vramscope } from '../helpers/cli.ts'
import { ddpRanks } from '../helpers/field-ddp.ts'

const { dir, src, peak } = ddpRanks('vramscope-whatif-job-')

// As record --pytorch leaves a torchrun job: rank0.pickle, rank1.pickle, their stats, job.json.
const job = join(dir, 'job')
mkdirSync(job)
for (const r of [0, 1]) {
  copyFileSync(src(r, 'pickle'), join(job, `rank${r}.pickle`))
  copyFileSync(src(r, 'stats.json'), join(job, `rank${r}.stats.json`))
}
writeFileSync(join(job, 'job.json'), JSON.stringify({ processes: [{ snapshot: 'rank1.pickle' }, { snapshot: 'rank0.pickle' }] }))
// The same snapshots without stats: named by rank, and named without a number.
const bare = join(dir, 'bare')
mkdirSync(bare)
for (const [r, name] of [
  [0, 'worker_r0.pickle'],
  [1, 'worker_r1.pickle'],
  [0, 'alpha.pickle'],
  [1, 'beta.pickle'],
  [1, 'again_rank1.pickle'],
] as const)
  copyFileSync(src(r, 'pickle'), join(bare, name))

interface Job {
  ranks: { file: string; rank: number; rankFrom: string; device: { name?: string } }[]
  worstRank: number
  configs: {
    rank: number
    conf: string
    kind: string
    fitsEveryRank: boolean
    smallestFittingBytes: number | null
    worstRank: number
    perRank: { rank: number; peakReserved: number; failures: number; smallestFittingBytes: number | null }[]
  }[]
}
const run = async (args: string[]): Promise<Job> => {
  const r = await vramscope(['whatif', ...args, '--json'])
  assert.equal(r.code, 0, shown(r))
  return JSON.parse(r.stdout) as Job
}

describe('whatif on a job of many ranks', () => {
  it("a record --pytorch folder: ranks from their stats, each rank's recorded peak exact, the worst rank, ranked on fitting every rank", async () => {
    const out = await run([job, '--conf', 'recorded', '--conf', 'expandable_segments:True', '--conf', 'max_split_size_mb:64'])
    assert.deepEqual(
      out.ranks.map((r) => [r.rank, r.rankFrom, r.file.endsWith(`rank${r.rank}.pickle`), r.device.name]),
      [
        [0, 'stats', true, 'NVIDIA H200'],
        [1, 'stats', true, 'NVIDIA H200'],
      ],
    )
    const recorded = out.configs.find((c) => c.kind === 'recorded')!
    assert.deepEqual(
      recorded.perRank.map((p) => p.peakReserved),
      [peak(0), peak(1)],
      "each rank's recorded peak, to the byte",
    )
    assert.equal(out.worstRank, 1, 'rank 1 trained on twice the batch')
    for (const c of out.configs) {
      assert.equal(c.perRank.length, 2)
      assert.equal(c.fitsEveryRank, true)
      assert.equal(c.smallestFittingBytes, Math.max(...c.perRank.map((p) => p.smallestFittingBytes!)))
    }
    const order = out.configs.map((c) => c.smallestFittingBytes!)
    assert.deepEqual(
      order,
      [...order].sort((a, b) => a - b),
      'ranked by the smallest device that fits every rank',
    )
  })

  it('under a limit only the smaller rank fits: that configuration fits not every rank, and ranks below one that does', async () => {
    const limit = Math.floor((peak(0) + peak(1)) / 2)
    const out = await run([
      src(0, 'pickle'),
      src(1, 'pickle'),
      '--conf',
      'recorded',
      '--conf',
      'expandable_segments:True',
      '--cap',
      String(limit),
      '--no-search',
    ])
    const recorded = out.configs.find((c) => c.kind === 'recorded')!
    assert.equal(recorded.fitsEveryRank, false)
    assert.deepEqual(
      recorded.perRank.map((p) => p.failures > 0),
      [false, true],
    )
    const text = await vramscope(['whatif', src(0, 'pickle'), src(1, 'pickle'), '--conf', 'recorded', '--cap', String(limit), '--no-search'])
    assert.match(text.stdout, /no \(1 fail\)/, shown(text))
    assert.match(text.stdout, /a job of 2 ranks:/)
  })

  it('ranks from names, else from the order given, saying which; a pattern; refuses a rank twice and a missing file', async () => {
    const named = await run([join(bare, 'worker_r1.pickle'), join(bare, 'worker_r0.pickle'), '--conf', 'recorded'])
    assert.deepEqual(
      named.ranks.map((r) => [r.rank, r.rankFrom]),
      [
        [0, 'name'],
        [1, 'name'],
      ],
    )
    const ordered = await run([join(bare, 'beta.pickle'), join(bare, 'alpha.pickle'), '--conf', 'recorded'])
    assert.deepEqual(
      ordered.ranks.map((r) => [r.rank, r.rankFrom, r.file.endsWith('beta.pickle')]),
      [
        [0, 'order', true],
        [1, 'order', false],
      ],
    )
    const text = await vramscope(['whatif', join(bare, 'beta.pickle'), join(bare, 'alpha.pickle'), '--conf', 'recorded'])
    assert.match(text.stdout, /rank 0: .*beta\.pickle \(rank from its place among the files\)/, shown(text))
    const pattern = await run([join(bare, 'worker_r*.pickle'), '--conf', 'recorded'])
    assert.equal(pattern.ranks.length, 2)
    const twice = await vramscope(['whatif', join(bare, 'worker_r1.pickle'), join(bare, 'again_rank1.pickle'), '--conf', 'recorded'])
    assert.equal(twice.code, 2, shown(twice))
    assert.match(twice.stderr, /again_rank1\.pickle: says it is rank 1, as .*worker_r1\.pickle does/)
    const missing = await vramscope(['whatif', join(bare, 'worker_r0.pickle'), join(bare, 'nope.pickle')])
    assert.equal(missing.code, 2)
    assert.match(missing.stderr, /nope\.pickle: no such file or folder/)
  })

  it('reads a rank from a name as people write it', () => {
    for (const [name, rank] of [
      ['rank3.pickle', 3],
      ['snapshot_rank_12.pickle', 12],
      ['oom-rank-7.oom.pickle', 7],
      ['r5.json', 5],
      ['step100_r2.pickle', 2],
      ['memory_snapshot_4.pickle', 4],
      ['trace.pickle', undefined],
    ] as const)
      assert.equal(rankInName(name), rank, name)
  })
})
