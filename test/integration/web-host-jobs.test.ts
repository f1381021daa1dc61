// One job lifecycle in the web host as `vramscope serve` runs it (its session in a worker
// process): a job outlives nothing it depends on. Closing a trace, a page, a page gone idle or a
// trace evicted by the page's next open while its jobs run leaves the worker (and every other
// page's traces) alive, and those jobs read `cancelled`, never `done` and never an error; a second
// cancel says the job was not running; running jobs are bounded per page and per host, the rest
// queued, and a cancel of a hundred ends them at once.
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'

import type { JobStatus } from '../../src-shared/contract.ts'
import { startWebHost, type WebHost } from '../../src-main/web/server.ts'
import { workerSession, type WorkerSession } from '../../src-main/web/worker-session.ts'
import { postApi, type HostAddress } from '../helpers/web-host.ts'

const ROOT = join(import.meta.dirname, '..', '..')
const SAMPLE = 'transformer_varseq.pickle'

let host: WebHost
let session: WorkerSession
let staticDir: string
const crashes: string[] = []

const json = (r: { body: string }) => JSON.parse(r.body) as { ok: boolean; result?: any; error?: { code: string; message: string } }
const post = (channel: string, arg: unknown, page: string, to: HostAddress = host) =>
  postApi(to, channel, arg === undefined ? '' : JSON.stringify(arg), { 'x-vramscope-page': page }, 'latin1')
const call = async (channel: string, arg: unknown, page: string, to: HostAddress = host) => {
  const reply = json(await post(channel, arg, page, to))
  assert.ok(reply.ok, `${channel}: ${JSON.stringify(reply.error)}`)
  return reply.result
}
const status = async (jobId: string, page: string, waitMs = 0): Promise<JobStatus> => call('job:status', { jobId, ...(waitMs > 0 && { waitMs }) }, page)

async function settle(jobId: string, page: string): Promise<JobStatus> {
  for (;;) {
    const s = await status(jobId, page, 500)
    if (s.state !== 'running' && s.state !== 'queued') return s
  }
}

async function open(page: string, to: HostAddress = host): Promise<string> {
  const { jobId } = await call('trace:openSample', { name: SAMPLE }, page, to)
  const s = await settle(jobId, page)
  assert.equal(s.state, 'done', JSON.stringify(s.error))
  return (await call('job:result', { jobId }, page, to)).traceId
}

const whatif = async (traceId: string, page: string, to: HostAddress = host): Promise<string> => (await call('whatif:start', { traceId }, page, to)).jobId

/** Time for the worker's status pushes to have looked at every job several times. */
const pause = () => new Promise((r) => setTimeout(r, 400))

/** The worker is the one it was, no crash was reported, and `traceId` of `page` still answers. */
async function aliveWith(pid: number | undefined, traceId: string, page: string): Promise<void> {
  assert.deepEqual(crashes, [], 'the worker did not die')
  assert.equal(session.client.pid, pid, 'the same worker process')
  assert.equal((await post('trace:data', { traceId }, page)).status, 200, "another page's trace is still open")
}

describe('one job lifecycle in the web host', () => {
  before(async () => {
    staticDir = await mkdtemp(join(tmpdir(), 'vramscope-jobs-host-'))
    await writeFile(join(staticDir, 'index.html'), '<!doctype html><title>vramscope</title>')
    session = workerSession({ version: 'test', host: 'web', samplesDir: join(ROOT, 'resources', 'samples'), allowedPaths: new Set() }, (message) =>
      crashes.push(message),
    )
    host = await startWebHost({ session, staticDir, pageIdleMs: 600_000 })
  })
  after(async () => {
    await host.close()
    await session.close()
    await rm(staticDir, { recursive: true, force: true })
  })

  it('closing a trace while three what-if jobs run keeps the worker and the other traces, and the jobs read cancelled (5 times)', async () => {
    const other = await open('bystander')
    const pid = session.client.pid
    for (let round = 0; round < 5; round++) {
      const traceId = await open('closer')
      const jobs = [await whatif(traceId, 'closer'), await whatif(traceId, 'closer'), await whatif(traceId, 'closer')]
      // Closed while their replays run on the native threads, at a different moment each round.
      await new Promise((r) => setTimeout(r, 100 + 40 * round))
      assert.deepEqual(await call('trace:close', { traceId }, 'closer'), { closed: true })
      await pause()
      await aliveWith(pid, other, 'bystander')
      for (const jobId of jobs) {
        const s = await status(jobId, 'closer')
        assert.equal(s.state, 'cancelled', `round ${round}: ${JSON.stringify(s)}`)
        assert.match(s.error?.message ?? '', /its trace was closed/)
      }
    }
  })

  it('closing a page while its jobs run keeps the worker and the other pages, and its jobs read cancelled', async () => {
    const other = await open('bystander')
    const pid = session.client.pid
    const traceId = await open('leaving')
    const jobs = [await whatif(traceId, 'leaving'), await whatif(traceId, 'leaving')]
    jobs.push((await call('replay:start', { traceId, strategies: 'caching,slab,buddy' }, 'leaving')).jobId)
    assert.equal((await call('page:close', undefined, 'leaving')).closed, 1)
    await pause()
    await aliveWith(pid, other, 'bystander')
    for (const jobId of jobs) assert.equal((await status(jobId, 'bystander')).state, 'cancelled')
  })

  it('a page closed as idle while its jobs run leaves the worker and the pages still calling', async () => {
    // A second host on the same worker session, sweeping idle pages every 50 ms.
    const quick = await startWebHost({ session, staticDir, pageIdleMs: 300 })
    try {
      const other = await open('busy', quick)
      const pid = session.client.pid
      const traceId = await open('quiet', quick)
      const jobs = [await whatif(traceId, 'quiet', quick), await whatif(traceId, 'quiet', quick)]
      // 'busy' keeps calling; 'quiet' says nothing and is closed.
      for (let i = 0; i < 12; i++) {
        await call('page:alive', undefined, 'busy', quick)
        await new Promise((r) => setTimeout(r, 100))
      }
      assert.equal((await post('trace:data', { traceId }, 'busy', quick)).status, 404, 'the quiet page was closed')
      assert.deepEqual(crashes, [])
      assert.equal(session.client.pid, pid)
      assert.equal((await post('trace:data', { traceId: other }, 'busy', quick)).status, 200)
      for (const jobId of jobs) assert.equal((await status(jobId, 'busy', 0)).state, 'cancelled')
    } finally {
      await quick.close()
    }
  })

  it("a page's fourth open closes its oldest trace while that trace replays, and the worker stays", async () => {
    const other = await open('bystander')
    const pid = session.client.pid
    const oldest = await open('dropper')
    const job = await whatif(oldest, 'dropper')
    const replay = (await call('replay:start', { traceId: oldest, strategies: 'caching,slab,buddy,vmm_growable' }, 'dropper')).jobId
    await open('dropper')
    await open('dropper')
    await open('dropper')
    await pause()
    await aliveWith(pid, other, 'bystander')
    assert.equal((await post('trace:data', { traceId: oldest }, 'dropper')).status, 404, 'the oldest was closed')
    for (const jobId of [job, replay]) assert.equal((await status(jobId, 'dropper')).state, 'cancelled')
  })

  it('a finished job whose trace was closed reads cancelled, not done, and its result is gone', async () => {
    const traceId = await open('finisher')
    const { jobId } = await call('replay:start', { traceId, strategies: 'slab', includeStored: false }, 'finisher')
    assert.equal((await settle(jobId, 'finisher')).state, 'done')
    await call('trace:close', { traceId }, 'finisher')
    const s = await status(jobId, 'finisher')
    assert.equal(s.state, 'cancelled', JSON.stringify(s))
    assert.match(s.error!.message, /its trace was closed/)
    const result = await post('replay:result', { jobId }, 'finisher')
    assert.equal(result.status, 400, result.body)
    assert.match(json(result).error!.message, /cancelled/)
  })

  it('runs at most 3 jobs a page and 6 in all, queues the rest, refuses beyond 64 waiting a page, and a cancel of them all frees every slot at once', async (t) => {
    const traceId = await open('owner')
    const started: { page: string; jobId: string }[] = []
    for (let p = 0; p < 4; p++) for (let i = 0; i < 25; i++) started.push({ page: `many-${p}`, jobId: await whatif(traceId, `many-${p}`) })
    const states = async () => Promise.all(started.map(async ({ page, jobId }) => ({ page, state: (await status(jobId, page)).state })))
    const now = await states()
    const running = now.filter((s) => s.state === 'running')
    assert.ok(running.length <= 6, `${running.length} running in all`)
    for (let p = 0; p < 4; p++) assert.ok(running.filter((s) => s.page === `many-${p}`).length <= 3, `page ${p} runs at most 3`)
    assert.ok(
      now.every((s) => ['running', 'queued', 'done'].includes(s.state)),
      'none is refused or fails',
    )
    assert.ok(now.filter((s) => s.state === 'queued').length >= 50, 'the rest wait their turn')
    const queued = (await status(started.at(-1)!.jobId, 'many-3')) as JobStatus
    assert.match(queued.phase, /^waiting for \d+ jobs to end: what-if/, 'a waiting job says so')
    // One page asking for 70 more: 64 wait, the rest are refused with 429 BUSY.
    let refused = 0
    for (let i = 0; i < 70; i++) {
      const r = await post('whatif:start', { traceId }, 'greedy')
      if (r.status === 429) {
        refused++
        assert.equal(json(r).error!.code, 'BUSY')
        assert.match(json(r).error!.message, /this page has 64 jobs waiting/)
      } else started.push({ page: 'greedy', jobId: json(r).result.jobId })
    }
    assert.equal(refused, 6)
    const rss = Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${session.client.pid}/status`, 'utf8'))![1]) / 1024
    t.diagnostic(`${started.length} what-if jobs accepted at once, the worker's RSS ${rss.toFixed(0)} MB`)
    for (const { page, jobId } of started) {
      const cancel = await call('job:cancel', { jobId }, page)
      assert.ok(cancel.cancelled || cancel.state === 'done', JSON.stringify(cancel))
      assert.ok(['cancelled', 'done'].includes((await status(jobId, page)).state), 'reads cancelled at once')
    }
    // Every slot is free again: a new job of a page that had three running starts as soon as the
    // cancelled jobs' replays have stopped (test/unit/services/replay/replay-cancel.test.ts holds
    // that to 100 ms; here a loaded machine may add the HTTP round trips).
    const cancelledAt = performance.now()
    const fresh = await whatif(traceId, 'many-0')
    let freshState = (await status(fresh, 'many-0')).state
    while (freshState === 'queued' && performance.now() - cancelledAt < 5000) {
      await new Promise((r) => setTimeout(r, 10))
      freshState = (await status(fresh, 'many-0')).state
    }
    const freed = performance.now() - cancelledAt
    t.diagnostic(`a new job ran ${freed.toFixed(0)} ms after the last cancel`)
    assert.notEqual(freshState, 'queued', 'the cancelled jobs no longer hold their slots')
    assert.ok(freed < 1000, `a new job waited ${freed.toFixed(0)} ms for a slot`)
    await call('job:cancel', { jobId: fresh }, 'many-0')
  })

  it('a job of a worker closed on purpose (the host going away) reads cancelled', async () => {
    const own = workerSession({ version: 'test', host: 'web', samplesDir: join(ROOT, 'resources', 'samples'), allowedPaths: new Set() })
    try {
      const { jobId: openJob } = await own.client.call('trace:openSample', { name: SAMPLE }, 'p')
      let opened = await own.client.call('job:status', { jobId: openJob }, 'p')
      while (opened.state === 'running') opened = await own.client.call('job:status', { jobId: openJob, waitMs: 1000 }, 'p')
      assert.equal(opened.state, 'done')
      const { traceId } = await own.client.call('job:result', { jobId: openJob }, 'p')
      const { jobId } = await own.client.call('whatif:start', { traceId }, 'p')
      await own.close()
      for (const id of [jobId, openJob]) {
        const s = await own.client.call('job:status', { jobId: id }, 'p')
        assert.equal(s.state, 'cancelled', JSON.stringify(s))
        assert.match(s.error!.message, /^cancelled: the worker process \(pid \d+\) was closed$/)
      }
    } finally {
      await own.close()
    }
  })

  it('a second cancel says the job was not running any more', async () => {
    const traceId = await open('canceller')
    const jobId = await whatif(traceId, 'canceller')
    assert.deepEqual(await call('job:cancel', { jobId }, 'canceller'), { cancelled: true, state: 'cancelled' })
    assert.deepEqual(await call('job:cancel', { jobId }, 'canceller'), { cancelled: false, state: 'cancelled' })
    assert.equal((await status(jobId, 'canceller')).state, 'cancelled')
    const unknown = await call('job:cancel', { jobId: 'no-such-job' }, 'canceller')
    assert.deepEqual(unknown, { cancelled: false })
  })
})
