// A job of many ranks opened in the app's session (services/ranks-job.ts), on the two ranks of a
// real torchrun job recorded on an H200 (test/fixtures/pytorch/field-gpu.tar.gz): each file staged
// as a page hands it over, the job read rank by rank, each rank's recorded peak reserved exact
// against memory_stats of its run, its reserved-over-time series, the worst rank; one rank opened as
// a trace; the what-if lab over every rank; the page's files gone when it closes; bad input named.
import assert from 'node:assert/strict'
import { existsSync, readFileSync } from 'node:fs'
import { readdir } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { describe, it } from 'node:test'

import type { RanksSummary, RanksWhatifReport } from '../../src-shared/ranks.ts'
import { AppSession } from '../../src-main/services/app-session.ts'
import { openInput } from '../../src-main/services/import/open-input.ts'
import { fixture, shown, vramscope } from '../helpers/cli.ts'
import { ddpRanks } from '../helpers/field-ddp.ts'

const { dir, src, peak } = ddpRanks('vramscope-ranks-open-')

async function done(s: AppSession, jobId: string): Promise<void> {
  for (;;) {
    const status = await s.jobStatus(jobId, 1000)
    if (status.state === 'done') return
    if (status.state !== 'running' && status.state !== 'queued') throw new Error(`job ${status.state}: ${status.error?.message ?? ''}`)
  }
}

async function stagedJob(s: AppSession, page: string, files: [string, string][]): Promise<{ jobId: string }> {
  const keys: string[] = []
  for (const [name, path] of files) keys.push((await s.stageRankFile(name, readFileSync(path), page)).key)
  return s.openRanks(keys, page)
}

const rankFolders = async () => (await readdir(tmpdir())).filter((f) => f.startsWith('vramscope-ranks-'))

describe('a job of many ranks in the app', () => {
  it("reads every rank, one at a time: ranks from the stats beside them, each rank's recorded peak exact, the worst rank, a series per rank", async () => {
    const s = new AppSession({ version: 'test', host: 'web', samplesDir: dir })
    const before = await rankFolders()
    // Staged out of rank order, with the stats beside each snapshot: the ranks come from the stats.
    const { jobId } = await stagedJob(s, 'page-1', [
      ['b.pickle', src(1, 'pickle')],
      ['b.stats.json', src(1, 'stats.json')],
      ['a.pickle', src(0, 'pickle')],
      ['a.stats.json', src(0, 'stats.json')],
    ])
    await done(s, jobId)
    const job: RanksSummary = s.ranksResult(jobId)
    assert.deepEqual(
      job.ranks.map((r) => [r.rank, r.rankFrom, r.name]),
      [
        [0, 'stats', 'a.pickle'],
        [1, 'stats', 'b.pickle'],
      ],
    )
    for (const r of job.ranks) {
      assert.equal(r.series.of, 'reserved', 'a snapshot has a recorded layout')
      assert.equal(r.peakBytes, peak(r.rank), `rank ${r.rank}'s recorded peak reserved is memory_stats' exactly`)
      assert.equal(Math.max(...r.series.max), r.peakBytes, "the series' highest bucket is the peak")
      assert.equal(r.series.max.length, 400)
      assert.ok(r.series.endNs > r.series.startNs)
      assert.ok(r.floorBytes > 0 && r.floorBytes <= r.peakBytes)
    }
    const worst = job.ranks.reduce((a, b) => (b.peakBytes > a.peakBytes ? b : a)).rank
    assert.equal(job.worstRank, worst)
    assert.deepEqual(job.oomRanks, [])

    // One rank opened as a trace, its opening replays with it.
    const opened = s.openRank(job.ranksId, 1, 'page-1')
    await done(s, opened.jobId)
    const summary = s.jobResult(opened.jobId)
    assert.equal(summary.name, 'b.pickle')
    assert.ok(summary.opening, 'its maps start replaying as it opens')
    assert.throws(() => s.openRank(job.ranksId, 7, 'page-1'), /the job has no rank 7 \(its ranks: 0, 1\)/)

    // The lab over every rank: the recorded settings and one more, ranked on fitting every rank.
    const lab = s.startRanksWhatif({ ranksId: job.ranksId, confs: ['recorded', 'expandable_segments:True'] }, 'page-1')
    await done(s, lab.jobId)
    const report: RanksWhatifReport = s.ranksWhatifResult(lab.jobId)
    assert.deepEqual(
      report.ranks.map((r) => [r.rank, r.name]),
      [
        [0, 'a.pickle'],
        [1, 'b.pickle'],
      ],
    )
    assert.equal(report.worstRank, worst)
    const recorded = report.configs.find((c) => c.kind === 'recorded')!
    for (const p of recorded.perRank) assert.equal(p.peakReserved, peak(p.rank), "the recorded row's peak is each rank's own")
    assert.ok(report.configs.every((c) => c.perRank.length === 2))
    assert.ok(report.replays > 0 && report.elapsedMs >= 0)
    assert.throws(() => s.startRanksWhatif({ ranksId: job.ranksId, confs: ['max_split_size_mb:lots'] }, 'page-1'), /configuration 1 'max_split_size_mb:lots'/)

    // The page goes: its staged files with it.
    s.closePage('page-1')
    await new Promise((r) => setTimeout(r, 200))
    assert.deepEqual(await rankFolders(), before, "the page's folder of staged files is removed")
    assert.throws(() => s.openRank(job.ranksId, 0, 'page-1'), /no open job/)
  })

  it('refuses what it cannot read, naming the file as the user knows it, never the host folder', async () => {
    const s = new AppSession({ version: 'test', host: 'web', samplesDir: dir })
    assert.throws(() => s.openRanks(['no-such-key'], 'page-2'), /no staged file "no-such-key"/)
    const keys = [(await s.stageRankFile('rank0.pickle', readFileSync(src(0, 'pickle')), 'page-2')).key]
    keys.push((await s.stageRankFile('rank1.pickle', new TextEncoder().encode('not a pickle at all'), 'page-2')).key)
    const { jobId } = s.openRanks(keys, 'page-2')
    const status = await s.jobs.settled(jobId)
    assert.equal(status.state, 'failed')
    assert.match(status.error!.message, /rank1\.pickle/)
    assert.doesNotMatch(status.error!.message, /vramscope-ranks-/, 'no folder of the host in the message')
    // Stats alone are no job.
    const stats = (await s.stageRankFile('rank0.stats.json', readFileSync(src(0, 'stats.json')), 'page-2')).key
    assert.throws(() => s.openRanks([stats], 'page-2'), /none of the files is a snapshot/)
    s.closePage('page-2')
    await new Promise((r) => setTimeout(r, 200))
    assert.ok(!existsSync(keys[0]!), 'keys are not paths')
  })

  it("a folder of the ranks' whatif --json outputs (a cluster's tasks'): the job from them, merged as `ranks` merges it, no maps", async () => {
    const s = new AppSession({ version: 'test', host: 'web', samplesDir: dir })
    const keys: string[] = []
    for (const r of [1, 0]) {
      const out = await vramscope(['whatif', src(r, 'pickle'), '--conf', 'recorded', '--conf', 'expandable_segments:True', '--json'])
      assert.equal(out.code, 0, shown(out))
      keys.push((await s.stageRankFile(`result${r}.json`, new TextEncoder().encode(out.stdout), 'page-3')).key)
    }
    const { jobId } = s.openRanks(keys, 'page-3')
    await done(s, jobId)
    const job = s.ranksResult(jobId)
    assert.equal(job.from, 'results')
    assert.deepEqual(
      job.ranks.map((r) => [r.rank, r.name, r.peakBytes]),
      [
        [0, 'result0.json', peak(0)],
        [1, 'result1.json', peak(1)],
      ],
    )
    assert.equal(job.worstRank, peak(1) > peak(0) ? 1 : 0)
    const recorded = job.report!.configs.find((c) => c.kind === 'recorded')!
    assert.deepEqual(
      recorded.perRank.map((p) => p.peakReserved),
      [peak(0), peak(1)],
    )
    assert.throws(() => s.openRank(job.ranksId, 0, 'page-3'), /no open job/, 'a job of results has no files to open')
    // A damaged output among them is named as the user knows it.
    const bad = [keys[0]!, (await s.stageRankFile('result2.json', new TextEncoder().encode('{"configs": [], "rank": "two"}'), 'page-3')).key]
    const failed = await s.jobs.settled(s.openRanks(bad, 'page-3').jobId)
    assert.equal(failed.state, 'failed')
    assert.match(failed.error!.message, /^result2\.json: its "rank" is "two"/)
    s.closePage('page-3')
  })

  it('the job a host was started with (`vramscope serve DIR`): read where the files are, never deleted', async () => {
    const files = [src(0, 'pickle'), src(1, 'pickle')]
    const s = new AppSession({ version: 'test', host: 'web', samplesDir: dir, initialJob: files })
    assert.deepEqual((await s.info()).initialJob, { files: 2 })
    const { jobId } = s.openInitialRanks('page-4')
    await done(s, jobId)
    const job = s.ranksResult(jobId)
    assert.deepEqual(
      job.ranks.map((r) => [r.rank, r.rankFrom, r.peakBytes]),
      [
        [0, 'stats', peak(0)],
        [1, 'stats', peak(1)],
      ],
    )
    s.closePage('page-4')
    await new Promise((r) => setTimeout(r, 200))
    for (const f of files) assert.ok(existsSync(f), `${f} is the user's: left where it is`)
    assert.throws(() => new AppSession({ version: 'test', host: 'web', samplesDir: dir }).openInitialRanks(), /started with no job/)
  })

  it("a job of torch.profiler traces (.json.gz): each rank's strip is the profiler's recorded reserved, its peak exact", async () => {
    const s = new AppSession({ version: 'test', host: 'web', samplesDir: dir })
    const bytes = readFileSync(fixture('pytorch/field-profile.json.gz'))
    const keys = [(await s.stageRankFile('rank0.json.gz', bytes, 'page-5')).key, (await s.stageRankFile('rank1.json.gz', bytes, 'page-5')).key]
    const { jobId } = s.openRanks(keys, 'page-5')
    await done(s, jobId)
    const job = s.ranksResult(jobId)
    const input = await openInput(fixture('pytorch/field-profile.json.gz'))
    const recorded = Math.max(...input.trace.recordedReserved!.bytes)
    for (const r of job.ranks) {
      assert.equal(r.series.of, 'reserved', "the profiler's Total Reserved, not the bytes live")
      assert.equal(r.peakBytes, recorded)
      assert.equal(Math.max(...r.series.max), recorded)
    }
    s.closePage('page-5')
  })
})
