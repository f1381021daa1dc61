// Replays started ahead of the page (AppSession.prefetchInitial, src-shared/opening.ts): the host
// started with a file opens it and replays the maps a page will ask for first; the page's requests
// take those jobs, and a page that asks for something else cancels them. On a real RMM log (no
// recorded layouts, so the first job replays a strategy and the others are cut where it peaked),
// and on a real PyTorch snapshot (the first map is its recorded layout, cut where it peaked).
import assert from 'node:assert/strict'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'

import type { TraceSummary } from '../../src-shared/contract.ts'
import { firstReplay, replayKey, restReplay } from '../../src-shared/opening.ts'
import { listedStrategies } from '../../src-shared/wire.ts'
import { AppSession, DEFAULT_STRATEGIES } from '../../src-main/services/app-session.ts'

/** An RMM log of `n` allocations of varied sizes, freed in waves, so pools grow, split and are reused. */
function rmmLog(n: number): string {
  const lines = ['Thread,Time,Action,Pointer,Size,Stream']
  const live: [number, number][] = []
  let t = 0
  for (let i = 0; i < n; i++) {
    const size = (1 + ((i * 7919) % 61)) * 65536
    const ptr = 0x7f0000000000 + i * 0x10000000
    lines.push(`1,${(t += 0.00001).toFixed(6)},allocate,0x${ptr.toString(16)},${size},0x0`)
    live.push([ptr, size])
    if (i % 5 === 4) for (const [p, s] of live.splice(0, 3)) lines.push(`1,${(t += 0.00001).toFixed(6)},free,0x${p.toString(16)},${s},0x0`)
  }
  for (const [p, s] of live) lines.push(`1,${(t += 0.00001).toFixed(6)},free,0x${p.toString(16)},${s},0x0`)
  return lines.join('\n') + '\n'
}

describe('replays started ahead of the page', () => {
  let dir: string
  let file: string
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'vramscope-ahead-'))
    file = join(dir, 'waves.csv')
    await writeFile(file, rmmLog(400))
  })
  after(() => rm(dir, { recursive: true, force: true }))

  const started = () => new AppSession({ version: 'test', host: 'web', samplesDir: dir, initialFile: file, allowedPaths: new Set([file]) })
  /** Jobs the session knows (its registry's count): a page's request that took a job started ahead adds none. */
  const known = (s: AppSession) => s.jobs.counts().known

  /** The page's open of the initial file, taken from the prefetch: its summary. */
  async function opened(s: AppSession): Promise<TraceSummary> {
    s.prefetchInitial()
    const info = await s.info()
    const { jobId } = s.openRecent(info.initialFile!, 'page-1')
    assert.equal(jobId, s.prefetchedJob)
    assert.equal((await s.jobs.settled(jobId)).state, 'done')
    return s.jobResult(jobId)
  }

  it("gives the page the first map's replay, then the others' cut where it peaked, each started before the page asked", async () => {
    const s = started()
    const summary = await opened(s)
    assert.deepEqual(summary.stored, [], 'an RMM log records no layout')
    const held = known(s)
    const first = s.startReplay(firstReplay(summary, DEFAULT_STRATEGIES), 'page-1')
    assert.equal(known(s), held, 'the page took the job started ahead')
    assert.equal((await s.jobs.settled(first.jobId)).state, 'done')
    // The first map's preview says where it was cut: the event the page moves the playhead to.
    const preview = s.replayResult(first.jobId, undefined, true)
    const cut = listedStrategies(preview.meta)[0]!
    assert.ok(Number.isInteger(cut.previewAt), 'the first map was cut at its peak')
    assert.equal(known(s), held + 1, 'the others are replaying ahead of the page')
    const rest = s.startReplay(restReplay(summary, DEFAULT_STRATEGIES, cut.previewAt!), 'page-1')
    assert.equal(known(s), held + 1, 'the page took that job too')
    assert.equal((await s.jobs.settled(rest.jobId)).state, 'done')
    const names = listedStrategies(s.replayResult(rest.jobId).meta).map((l) => l.name)
    assert.equal(names.length, DEFAULT_STRATEGIES.split(',').length - 1, 'every default strategy after the first')
    // Taken once: the same request again is a replay of its own.
    s.startReplay(restReplay(summary, DEFAULT_STRATEGIES, cut.previewAt!), 'page-1')
    assert.equal(known(s), held + 2)
    // Now the page's: closing the page ends both jobs it took, finished as they are.
    s.closePage('page-1')
    for (const jobId of [first.jobId, rest.jobId]) assert.equal(s.jobs.status(jobId).state, 'cancelled')
  })

  it("on a real PyTorch snapshot, cuts the recorded map at its peak and replays the others there, the page's request taking them", async () => {
    const snapshot = join(import.meta.dirname, '..', 'fixtures', 'pytorch', 'real', 'mlp_fragment__default.pickle')
    const s = new AppSession({ version: 'test', host: 'web', samplesDir: dir, initialFile: snapshot, allowedPaths: new Set([snapshot]) })
    const summary = await opened(s)
    assert.equal(summary.stored.length, 1, 'the recorded layout')
    assert.equal(summary.oom, undefined, 'no out-of-memory: the maps open at the peak')
    const held = known(s)
    const first = s.startReplay(firstReplay(summary, DEFAULT_STRATEGIES), 'page-1')
    assert.equal(known(s), held, 'the page took the first job started ahead')
    await s.jobs.settled(first.jobId)
    const recorded = listedStrategies(s.replayResult(first.jobId, undefined, true).meta)
    assert.equal(recorded.length, 1)
    assert.ok(recorded[0]!.previewAt! > 0 && recorded[0]!.previewAt! < summary.events - 1, `the recorded map cut at its peak (${recorded[0]!.previewAt})`)
    // The page puts the playhead where that cut is and asks for the others there: started ahead.
    assert.equal(known(s), held + 1, 'the others are replaying ahead of the page')
    const rest = s.startReplay(restReplay(summary, DEFAULT_STRATEGIES, recorded[0]!.previewAt!), 'page-1')
    assert.equal(known(s), held + 1, 'the page took that job too')
    assert.equal((await s.jobs.settled(rest.jobId)).state, 'done')
    const cuts = listedStrategies(s.replayResult(rest.jobId, undefined, true).meta)
    assert.equal(cuts.length, DEFAULT_STRATEGIES.split(',').length, 'every default strategy')
    assert.ok(
      cuts.every((c) => c.previewAt === recorded[0]!.previewAt),
      'each cut where the recorded map peaked',
    )
  })

  it("does the same for the desktop app's window: prefetchPath opens the file, and the page's openPath takes it and its maps", async () => {
    const s = new AppSession({ version: 'test', host: 'electron', samplesDir: dir })
    s.prefetchPath(file)
    const prefetched = s.prefetchedJob
    const { jobId } = s.openPath(file, 'page-1')
    assert.equal(jobId, prefetched, "the page's open took the prefetched job")
    await s.jobs.settled(jobId)
    const summary = s.jobResult(jobId)
    const held = known(s)
    const first = s.startReplay(firstReplay(summary, DEFAULT_STRATEGIES), 'page-1')
    assert.equal(known(s), held, 'the first map, replayed ahead')
    await s.jobs.settled(first.jobId)
    const cut = listedStrategies(s.replayResult(first.jobId, undefined, true).meta)[0]!
    const rest = s.startReplay(restReplay(summary, DEFAULT_STRATEGIES, cut.previewAt!), 'page-1')
    assert.equal(known(s), held + 1, 'the others, replayed ahead')
    assert.equal((await s.jobs.settled(rest.jobId)).state, 'done')
    // Another open of the file is one of its own.
    assert.notEqual(s.openPath(file, 'page-2').jobId, prefetched)
    assert.throws(() => s.prefetchPath(''), /path: a file path is needed/)
  })

  it('cancels what it started ahead when the page asks for another replay of the trace', async () => {
    const s = started()
    const seen = new Map<string, string>()
    s.jobs.subscribe((status) => seen.set(status.jobId, status.state))
    const summary = await opened(s)
    const ahead = [...seen].filter(([, state]) => state === 'running').map(([id]) => id)
    assert.equal(ahead.length, 1, "the first map's replay, started ahead")
    const own = s.startReplay({ ...firstReplay(summary, DEFAULT_STRATEGIES), cap: '64MiB' }, 'page-1')
    assert.notEqual(own.jobId, ahead[0], 'a request under a cap is not the one started ahead')
    assert.equal((await s.jobs.settled(ahead[0]!)).state, 'cancelled')
    assert.equal((await s.jobs.settled(own.jobId)).state, 'done')
    // Nothing more is started ahead for it: the cancelled first job cut nothing.
    assert.deepEqual(
      [...seen.values()].filter((state) => state === 'running' || state === 'queued'),
      [],
    )
  })

  it('keys a request by what the host reads from it, defaults filled in', () => {
    const summary = { traceId: 't', stored: [], events: 10 } as unknown as TraceSummary
    const a = firstReplay(summary, 'slab')
    assert.equal(replayKey(a), replayKey({ ...a, cap: '', recordedSettings: true }))
    assert.notEqual(replayKey(a), replayKey({ ...a, previewAt: 3 }))
    assert.notEqual(replayKey(a), replayKey({ ...a, strategies: 'buddy' }))
    assert.notEqual(replayKey(a), replayKey({ ...a, includeStored: false }))
  })
})
