// `vramscope ranks`, the real CLI on the two ranks of a real torchrun job recorded on an H200 by
// record --pytorch (test/fixtures/pytorch/field-gpu.tar.gz): each rank's `whatif FILE --json` run
// on its own, as a cluster runs one rank a task, then merged; the merged report equals what
// `whatif R0 R1 ...` prints for the same files on one machine, text and --json. A result that is
// not JSON, one without configs, one without a rank and two results of one rank are refused
// (exit 2), naming the file.
import assert from 'node:assert/strict'
import { copyFileSync, mkdirSync, readFileSync, truncateSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { before, describe, it } from 'node:test'

import { shown, vramscope } from '../helpers/cli.ts'
import { ddpRanks } from '../helpers/field-ddp.ts'

const { dir, src, peak } = ddpRanks('vramscope-ranks-')
const snapshot = (rank: number) => src(rank, 'pickle')
const CONFS = ['--conf', 'recorded', '--conf', 'expandable_segments:True']
const results = join(dir, 'results')
mkdirSync(results)
const result = (rank: number) => join(results, `rank${rank}.json`)

interface Job {
  ranks: { file: string; rank: number; rankFrom: string; events: number }[]
  worstRank: number
  configs: {
    rank: number
    conf: string
    kind: string
    fitsEveryRank: boolean
    smallestFittingBytes: number | null
    worstRank: number
    perRank: { rank: number; peakReserved: number; smallestFittingBytes: number | null }[]
  }[]
}

async function ok(args: string[]): Promise<string> {
  const r = await vramscope(args)
  assert.equal(r.code, 0, shown(r))
  return r.stdout
}

async function refused(args: string[], file: string, problem: RegExp): Promise<void> {
  const r = await vramscope(['ranks', ...args, '--json'])
  assert.equal(r.code, 2, shown(r))
  const error = (JSON.parse(r.stdout) as { error: { kind: string; file: string; problem: string } }).error
  assert.equal(error.kind, 'input')
  assert.equal(error.file, file)
  assert.match(error.problem, problem)
  assert.match(r.stderr, new RegExp(`${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: `))
}

describe('ranks: a job report merged from one whatif --json a rank', () => {
  before(async () => {
    // One rank a task, as a cluster runs them: each writes its own result.
    for (const rank of [0, 1]) writeFileSync(result(rank), await ok(['whatif', snapshot(rank), '--json', ...CONFS]))
  })

  it("each rank's whatif --json carries its rank, from the stats beside the snapshot", () => {
    for (const rank of [0, 1]) {
      const out = JSON.parse(readFileSync(result(rank), 'utf8')) as { file: string; rank: number; rankFrom: string; configs: unknown[] }
      assert.deepEqual([out.file, out.rank, out.rankFrom, out.configs.length], [snapshot(rank), rank, 'stats', 2])
    }
  })

  it('ranks --json equals whatif R0 R1 --json: the ranks, the worst rank, every configuration', async () => {
    const merged = JSON.parse(await ok(['ranks', result(1), result(0), '--json'])) as Job
    const together = JSON.parse(await ok(['whatif', snapshot(0), snapshot(1), '--json', ...CONFS])) as Job
    // Nothing differs, not even the files: each rank's result names the snapshot it was run on.
    assert.deepEqual(merged.ranks, together.ranks)
    assert.equal(merged.worstRank, together.worstRank)
    assert.deepEqual(merged.configs, together.configs)
    assert.deepEqual(merged, together)
    // And what it says is the job's: both ranks, their recorded peaks exact, rank 1 the worst.
    assert.deepEqual(
      merged.ranks.map((r) => [r.rank, r.rankFrom, r.file]),
      [
        [0, 'stats', snapshot(0)],
        [1, 'stats', snapshot(1)],
      ],
    )
    const recorded = merged.configs.find((c) => c.kind === 'recorded')!
    assert.deepEqual(
      recorded.perRank.map((p) => p.peakReserved),
      [peak(0), peak(1)],
    )
    assert.equal(merged.worstRank, peak(1) > peak(0) ? 1 : 0)
    assert.deepEqual(
      merged.configs.map((c) => [c.rank, c.fitsEveryRank, c.worstRank]),
      together.configs.map((c) => [c.rank, c.fitsEveryRank, c.worstRank]),
    )
    // The smallest device that fits the job is that of its neediest rank.
    for (const c of merged.configs) assert.equal(c.smallestFittingBytes, Math.max(...c.perRank.map((p) => p.smallestFittingBytes!)))
  })

  it('its text is what whatif R0 R1 prints; a folder and a pattern give the same', async () => {
    const together = await ok(['whatif', snapshot(0), snapshot(1), ...CONFS])
    assert.equal(await ok(['ranks', result(0), result(1)]), together)
    assert.equal(await ok(['ranks', results]), together)
    assert.equal(await ok(['ranks', join(results, 'rank*.json')]), together)
    assert.match(together, /^a job of 2 ranks:/)
  })

  it('a file that is not JSON, one without configs, one without a rank, two of one rank: refused, exit 2, naming the file', async () => {
    const bad = join(dir, 'bad')
    mkdirSync(bad)
    const notJson = join(bad, 'snapshot.json')
    writeFileSync(notJson, '\x80\x02}q\x00(not json')
    await refused([result(0), notJson], notJson, /is not JSON/)
    const noConfigs = join(bad, 'no-configs.json')
    writeFileSync(noConfigs, JSON.stringify({ file: 'x.pickle', rank: 2, rankFrom: 'name' }))
    await refused([noConfigs, result(0)], noConfigs, /no "configs" array/)
    const withoutRank = JSON.parse(readFileSync(result(1), 'utf8')) as Record<string, unknown>
    delete withoutRank['rank']
    const noRank = join(bad, 'old.json')
    writeFileSync(noRank, JSON.stringify(withoutRank))
    await refused([result(0), noRank], noRank, /no "rank"/)
    const halfRank = join(bad, 'half.json')
    writeFileSync(halfRank, JSON.stringify({ ...withoutRank, rank: 1.5 }))
    await refused([result(0), halfRank], halfRank, /"rank" is 1\.5, not an integer/)
    // Bounded: a file over 64 MiB (a snapshot given by mistake) is refused before it is read.
    const huge = join(bad, 'huge.json')
    writeFileSync(huge, '')
    truncateSync(huge, (64 << 20) + 1)
    await refused([result(0), huge], huge, /is 67108865 bytes, over the 67108864/)
    const again = join(bad, 'again.json')
    copyFileSync(result(0), again)
    await refused([result(0), result(1), again], again, new RegExp(`is rank 0, as ${result(0).replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} is`))
  })
})
