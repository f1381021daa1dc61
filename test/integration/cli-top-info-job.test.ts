// `vramscope top` and `vramscope info` on a job of many ranks, the real CLI on the two ranks of a
// real torchrun job recorded on an H200 (test/fixtures/pytorch/field-gpu.tar.gz; rank 1 trained on
// twice rank 0's batch): ranks from the stats beside each snapshot (else their names), each rank's
// section as the command prints it for that one file, the part that says what differs naming what
// really differs, one file's output as before (no `ranks`), and a missing file refused, named.
import assert from 'node:assert/strict'
import { copyFileSync, mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'

import { shown, vramscope } from '../helpers/cli.ts'
import { ddpRanks } from '../helpers/field-ddp.ts'

const { dir, src, peak: recordedPeak } = ddpRanks('vramscope-top-info-job-')

// As record --pytorch leaves a torchrun job (stats beside each snapshot), given in reverse order.
const job = join(dir, 'job')
mkdirSync(job)
for (const r of [0, 1]) {
  copyFileSync(src(r, 'pickle'), join(job, `rank${r}.pickle`))
  copyFileSync(src(r, 'stats.json'), join(job, `rank${r}.stats.json`))
}
const files = [join(job, 'rank1.pickle'), join(job, 'rank0.pickle')]
// The same snapshots without stats, named by rank, ranks given in place of the stats' numbers.
const bare = join(dir, 'bare')
mkdirSync(bare)
copyFileSync(src(0, 'pickle'), join(bare, 'worker_r7.pickle'))
copyFileSync(src(1, 'pickle'), join(bare, 'worker_r3.pickle'))

const run = async (args: string[]) => {
  const r = await vramscope(args)
  assert.equal(r.code, 0, shown(r))
  return r.stdout
}
const json = async <T>(args: string[]) => JSON.parse(await run([...args, '--json'])) as T

interface RankEntry {
  file: string
  rank: number
  rankFrom: string
  [key: string]: unknown
}
interface InfoJob {
  ranks: (RankEntry & { peakRequested: number; strategies: { name: string; summary?: Record<string, number> }[] })[]
  differs: { fields: { field: string; byRank: { rank: number; value: number | string | null }[] }[]; alike: string[] }
}
interface TopJob {
  ranks: (RankEntry & { at: { bytes: number }; groups: { key: string; bytes: number }[] })[]
  differs: { by: string; groups: { key: string; bytes: number; byRank: { rank: number; bytes: number }[]; most: number | null }[] }
}

/** The job's entry of a rank less what the job adds: the single file's JSON, as one file gives it. */
const asSingle = ({ rank: _rank, rankFrom: _from, ...rest }: RankEntry) => rest

describe('info on a job of many ranks', () => {
  it('ranks from their stats, each rank as one file gives it, the fields that differ with integer bytes', async () => {
    const out = await json<InfoJob>(['info', ...files])
    assert.deepEqual(
      out.ranks.map((r) => [r.rank, r.rankFrom, r.file]),
      [
        [0, 'stats', files[1]],
        [1, 'stats', files[0]],
      ],
    )
    for (const r of out.ranks) {
      const single = await json<Record<string, unknown>>(['info', r.file])
      assert.equal('ranks' in single, false)
      assert.deepEqual(asSingle(r), single)
    }
    // Rank 1 trained on twice the batch: its recorded peak reserved (the stats' own) is higher.
    const peak = out.differs.fields.find((f) => f.field === 'peakReserved')
    assert.ok(peak, JSON.stringify(out.differs))
    assert.deepEqual(peak.byRank, [
      { rank: 0, value: recordedPeak(0) },
      { rank: 1, value: recordedPeak(1) },
    ])
    assert.ok(recordedPeak(1) > recordedPeak(0))
    assert.ok(out.differs.fields.some((f) => f.field === 'peakRequested'))
    for (const f of out.differs.fields) {
      assert.equal(new Set(f.byRank.map((b) => b.value)).size, 2, f.field)
      assert.equal(out.differs.alike.includes(f.field), false)
    }
    // One program, two ranks: the same events, settings and device.
    for (const f of ['events', 'settings', 'device', 'warnings']) assert.ok(out.differs.alike.includes(f), f)
  })

  it('text: a header a rank, its usual output indented, then a table of what differs and what is alike', async () => {
    const text = await run(['info', job])
    assert.match(text, new RegExp(`^rank 0: ${files[1]!.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} \\(rank from the stats beside it\\)\n`))
    for (const [rank, file] of [
      [0, files[1]!],
      [1, files[0]!],
    ] as const) {
      const single = await run(['info', file])
      assert.match(single, new RegExp(`^${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\n`))
      const indented = single
        .trimEnd()
        .split('\n')
        .map((l) => `  ${l}`)
        .join('\n')
      assert.ok(text.includes(`rank ${rank}: ${file} (rank from the stats beside it)\n${indented}\n`), `rank ${rank}'s section:\n${text}`)
    }
    const differs = text.slice(text.indexOf('what differs between the 2 ranks:'))
    assert.match(differs, /^ {2}recorded peak reserved +\d.* MiB +\d.*GiB$/m)
    assert.match(differs, /^every rank alike in: .*\bsettings\b.*\bevents\b/m)
  })

  it('ranks from the names where no stats say them', async () => {
    const out = await json<InfoJob>(['info', join(bare, 'worker_r*.pickle')])
    assert.deepEqual(
      out.ranks.map((r) => [r.rank, r.rankFrom, r.file.endsWith(`worker_r${r.rank}.pickle`)]),
      [
        [3, 'name', true],
        [7, 'name', true],
      ],
    )
    // worker_r3 is rank 1's snapshot, worker_r7 rank 0's.
    assert.ok(out.ranks[0]!.peakRequested > out.ranks[1]!.peakRequested)
  })

  it('refuses a missing file, naming it (exit 2)', async () => {
    const r = await vramscope(['info', files[0]!, join(job, 'nope.pickle')])
    assert.equal(r.code, 2, shown(r))
    assert.match(r.stderr, /nope\.pickle: no such file or folder/)
    assert.equal(r.stdout, '')
  })
})

describe('top on a job of many ranks', () => {
  it("each rank as one file gives it, then the groups side by side: each rank's bytes, the rank that holds the most", async () => {
    const out = await json<TopJob>(['top', ...files])
    assert.deepEqual(
      out.ranks.map((r) => [r.rank, r.rankFrom]),
      [
        [0, 'stats'],
        [1, 'stats'],
      ],
    )
    for (const r of out.ranks) {
      const single = await json<Record<string, unknown>>(['top', r.file])
      assert.equal('ranks' in single, false)
      assert.deepEqual(asSingle(r), single)
    }
    const groups = out.differs.groups
    assert.equal(out.differs.by, 'frame')
    // Every group of every rank, each rank's bytes its own, the sum, largest first.
    const keys = new Set(out.ranks.flatMap((r) => r.groups.map((g) => g.key)))
    assert.equal(groups.length, keys.size)
    for (const g of groups) {
      for (const b of g.byRank) {
        const own = out.ranks.find((r) => r.rank === b.rank)!.groups.find((x) => x.key === g.key)
        assert.equal(b.bytes, own?.bytes ?? 0)
        assert.ok(Number.isSafeInteger(b.bytes))
      }
      assert.equal(
        g.bytes,
        g.byRank.reduce((a, b) => a + b.bytes, 0),
      )
      const [a, b] = g.byRank
      assert.equal(g.most, a!.bytes === b!.bytes ? null : a!.bytes > b!.bytes ? 0 : 1, g.key)
    }
    assert.deepEqual(
      groups.map((g) => g.bytes),
      groups.map((g) => g.bytes).sort((a, b) => b - a),
    )
    // The batch's activations: the largest group, twice as large on rank 1; the optimizer's state alike.
    assert.equal(groups[0]!.most, 1)
    assert.ok(groups[0]!.byRank[1]!.bytes > groups[0]!.byRank[0]!.bytes)
    assert.ok(groups.some((g) => g.most === null && g.bytes > 0))
    assert.ok(out.ranks[1]!.at.bytes > out.ranks[0]!.at.bytes)
  })

  it('text: a header a rank, its usual output indented, then the largest groups of all ranks side by side', async () => {
    const text = await run(['top', job, '--limit', '4'])
    for (const [rank, file] of [
      [0, files[1]!],
      [1, files[0]!],
    ] as const) {
      const single = await run(['top', file, '--limit', '4'])
      assert.match(single, new RegExp(`^${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} at event `))
      const indented = single
        .trimEnd()
        .split('\n')
        .map((l) => (l === '' ? '' : `  ${l}`))
        .join('\n')
      assert.ok(text.includes(`rank ${rank}: ${file} (rank from the stats beside it)\n${indented}\n`), `rank ${rank}'s section:\n${text}`)
    }
    const differs = text.slice(text.indexOf('what differs: the largest groups over all 2 ranks, by frame'))
    assert.match(differs, /^ +rank 0 +rank 1 +most +allocated at/m)
    assert.match(differs, /^ +\S+ MiB +\S+ MiB +rank 1 +\S/m)
    assert.match(differs, /^ +\S+ MiB +\S+ MiB +alike +\S/m)
    assert.match(differs, /\(all live\)\n {2}… \d+ more groups/)
  })

  it('refuses a missing file, naming it (exit 2)', async () => {
    const r = await vramscope(['top', join(job, 'nope.pickle'), files[0]!])
    assert.equal(r.code, 2, shown(r))
    assert.match(r.stderr, /nope\.pickle: no such file or folder/)
  })
})
