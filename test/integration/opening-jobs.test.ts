// The opening of a trace, started by the open itself (AppSession.startOpening, src-shared/opening.ts):
// the open's summary names the replay of its first maps (cut at the opening event) and the
// others' (cut where the first cut), and the page fetches their maps with `wait`, asking nothing
// else. The same for a file named on the command line, a file the desktop window was given, and
// a file dropped into an open page. On a real RMM log (no recorded layouts, so the first job
// replays a strategy and the others are cut where it peaked), and on a real PyTorch snapshot (the
// first map is its recorded layout, cut where it peaked).
import assert from 'node:assert/strict'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'

import type { TraceSummary } from '../../src-shared/contract.ts'
import { listedStrategies } from '../../src-shared/wire.ts'
import { reservedPeakEvent } from '../../src-shared/layout-accounting.ts'
import { AppSession, DEFAULT_STRATEGIES } from '../../src-main/services/app-session.ts'
import { openInput } from '../../src-main/services/import/open-input.ts'
import { recordedOnEvents } from '../../src-main/services/replay/replay-input.ts'

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

describe('the opening, started by the open', () => {
  let dir: string
  let file: string
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'vramscope-opening-'))
    file = join(dir, 'waves.csv')
    await writeFile(file, rmmLog(400))
  })
  after(() => rm(dir, { recursive: true, force: true }))

  /** A page's open of `path` through `open`: its summary, read from the status that says it is done. */
  async function opened(s: AppSession, started: { jobId: string }): Promise<TraceSummary> {
    const status = await s.jobStatus(started.jobId, 1000)
    assert.equal(status.state, 'done')
    assert.ok(status.summary, "a done open's status carries its summary")
    assert.deepEqual(status.summary, s.jobResult(started.jobId))
    return status.summary
  }

  it("names the first map's replay and the others', cut where the first peaked; the page's fetches wait for them", async () => {
    const s = new AppSession({ version: 'test', host: 'web', samplesDir: dir, initialFile: file, allowedPaths: new Set([file]) })
    const info = await s.info()
    const summary = await opened(s, s.openRecent(info.initialFile!, 'page-1'))
    assert.deepEqual(summary.stored, [], 'an RMM log records no layout')
    const opening = summary.opening!
    assert.equal(opening.strategies, DEFAULT_STRATEGIES)
    // Fetched at once, each waits for its job: the page asks no status.
    const preview = await s.replayResult(opening.first, undefined, true, true)
    const cut = listedStrategies(preview.meta)
    assert.equal(cut.length, 1, 'the first strategy')
    assert.ok(Number.isInteger(cut[0]!.previewAt), 'the first map was cut at its peak')
    const whole = listedStrategies((await s.replayResult(opening.first, undefined, false, true)).meta)
    assert.equal(cut[0]!.previewAt, whole[0]!.summary['peakReservedEvent'], "cut at the first strategy's reserved peak")
    const rest = listedStrategies((await s.replayResult(opening.rest, undefined, true, true)).meta)
    assert.equal(rest.length, DEFAULT_STRATEGIES.split(',').length - 1, 'every default strategy after the first')
    assert.ok(
      rest.every((c) => c.previewAt === cut[0]!.previewAt),
      'each cut where the first map peaked',
    )
    // The page's: closing it ends both.
    s.closePage('page-1')
    for (const jobId of [opening.first, opening.rest]) assert.equal(s.jobs.status(jobId).state, 'cancelled')
  })

  it('on a real PyTorch snapshot, draws the recorded map at once, cut at its peak, and replays the others there', async () => {
    const snapshot = join(import.meta.dirname, '..', 'fixtures', 'pytorch', 'real', 'mlp_fragment__default.pickle')
    const s = new AppSession({ version: 'test', host: 'web', samplesDir: dir, initialFile: snapshot, allowedPaths: new Set([snapshot]) })
    s.prefetchInitial()
    const info = await s.info()
    const started = s.openRecent(info.initialFile!, 'page-1')
    assert.equal(started.jobId, s.prefetchedJob, "the page's open took the one the host started with")
    const summary = await opened(s, started)
    assert.equal(summary.stored.length, 1, 'the recorded layout')
    assert.equal(summary.oom, undefined, 'no out-of-memory: the maps open at the peak')
    const recorded = listedStrategies((await s.replayResult(summary.opening!.first, undefined, true, true)).meta)
    assert.equal(recorded.length, 1, 'the recorded layout alone: nothing replayed first')
    // Where the one accounting puts the recorded layout's peak.
    const input = await openInput(snapshot)
    const expected = reservedPeakEvent(recordedOnEvents(input.trace, input.strategies[0]!).layout, summary.events)
    assert.equal(recorded[0]!.previewAt, expected)
    assert.ok(expected > 0 && expected < summary.events - 1, `cut inside the trace (${expected})`)
    const cuts = listedStrategies((await s.replayResult(summary.opening!.rest, undefined, true, true)).meta)
    assert.equal(cuts.length, DEFAULT_STRATEGIES.split(',').length, 'every default strategy')
    assert.ok(
      cuts.every((c) => c.previewAt === expected),
      'each cut where the recorded map peaked',
    )
    // Handed to the page with the open: closing the page ends them.
    s.closePage('page-1')
    assert.equal(s.jobs.status(summary.opening!.rest).state, 'cancelled')
  })

  it("does the same for a file dropped into an open page and for the desktop app's window", async () => {
    const s = new AppSession({ version: 'test', host: 'electron', samplesDir: dir })
    const dropped = await opened(s, s.openBytes('waves.csv', new Uint8Array(await readFile(file)), 'page-1'))
    const named = (() => {
      s.prefetchPath(file)
      return s.prefetchedJob!
    })()
    const windowed = await opened(s, s.openPath(file, 'page-2'))
    assert.equal(s.jobResult(named).traceId, windowed.traceId, "the window's open took the prefetched one")
    for (const summary of [dropped, windowed]) {
      const cut = listedStrategies((await s.replayResult(summary.opening!.first, undefined, true, true)).meta)
      const rest = listedStrategies((await s.replayResult(summary.opening!.rest, undefined, true, true)).meta)
      assert.equal(rest.length, DEFAULT_STRATEGIES.split(',').length - 1)
      assert.ok(rest.every((c) => c.previewAt === cut[0]!.previewAt))
    }
  })

  it('a fetch with wait of a job that fails says why; one without wait of a running job says it is not done', async () => {
    const s = new AppSession({ version: 'test', host: 'web', samplesDir: dir })
    const summary = await opened(s, s.openBytes('waves.csv', new Uint8Array(await readFile(file)), 'page-1'))
    const own = s.startReplay({ traceId: summary.traceId, strategies: 'slab' }, 'page-1')
    await assert.rejects(s.replayResult(own.jobId), /is (queued|running), not done/)
    s.jobs.cancel(own.jobId, 'the page asked for another replay')
    // Cancelled as it waited or ran: the code says so, the message says why (or that it was cancelled).
    await assert.rejects(s.replayResult(own.jobId, undefined, false, true), (e: { code?: string; message: string }) => {
      assert.equal(e.code, 'CANCELLED')
      assert.match(e.message, /another replay|cancelled/)
      return true
    })
  })
})
