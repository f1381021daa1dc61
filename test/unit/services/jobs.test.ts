// The job registry (src-main/services/jobs.ts): running jobs bounded per page and in all, the rest
// queued in order and refused beyond the queue's bound; a cancel is said once; a job whose trace
// or page went reads cancelled, a finished one too (its result freed), and never throws; ended
// jobs stay readable as tombstones, a bounded number of them; a listener that throws breaks
// nothing; status with waitMs answers when the job ends.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { ApiError } from '../../../src-shared/api-error.ts'
import type { JobStatus } from '../../../src-shared/contract.ts'
import { JobRegistry, type JobContext } from '../../../src-main/services/jobs.ts'
import { MAX_STATUS_WAIT_MS } from '../../../src-shared/job-wait.ts'

/** Work that runs until released (or aborted), so a test decides when each job ends. */
function gate<T>(value: T) {
  let open: () => void = () => {}
  const opened = new Promise<void>((resolve) => (open = resolve))
  const work = async (job: JobContext) => {
    await new Promise<void>((resolve, reject) => {
      void opened.then(resolve)
      job.signal.addEventListener('abort', () => reject(job.signal.reason as Error), { once: true })
    })
    return value
  }
  return { work, open }
}

const tick = () => new Promise((r) => setImmediate(r))

describe('job registry', () => {
  it('runs at most maxRunningPerPage of a page and maxRunning in all, starting the queued ones in order as slots free', async () => {
    const jobs = new JobRegistry({ maxRunningPerPage: 2, maxRunning: 3 })
    const gates = Array.from({ length: 6 }, (_, i) => gate(i))
    const a = gates.slice(0, 4).map((g) => jobs.start({ page: 'a' }, 'working', g.work))
    const b = gates.slice(4).map((g) => jobs.start({ page: 'b' }, 'working', g.work))
    const states = () => [...a, ...b].map((id) => jobs.status(id).state)
    assert.deepEqual(states(), ['running', 'running', 'queued', 'queued', 'running', 'queued'])
    assert.deepEqual(jobs.counts(), { queued: 3, running: 3, known: 6 })
    assert.match(jobs.status(a[2]!).phase, /^waiting for \d+ jobs to end: working$/)
    gates[0]!.open()
    await tick()
    // a's slot goes to a's next job; b still waits for a slot in all.
    assert.deepEqual(states(), ['done', 'running', 'running', 'queued', 'running', 'queued'])
    assert.equal(jobs.status(a[2]!).phase, 'working', 'a job that runs no longer says it waits')
    gates[4]!.open()
    await tick()
    assert.deepEqual(states(), ['done', 'running', 'running', 'queued', 'done', 'running'])
    for (const g of gates) g.open()
    for (const id of [...a, ...b]) assert.equal((await jobs.settled(id)).state, 'done')
    assert.deepEqual(jobs.counts(), { queued: 0, running: 0, known: 6 })
  })

  it("bounds DEFAULT_PAGE's jobs only in all, and refuses a job beyond the queue's bound as BUSY", () => {
    const jobs = new JobRegistry({ maxRunningPerPage: 1, maxRunning: 3, maxQueuedPerPage: 2, maxQueued: 3 })
    const hold = gate(0)
    for (let i = 0; i < 3; i++) jobs.start({ page: '' }, 'ahead', hold.work)
    assert.equal(jobs.counts().running, 3, 'the page of a host without pages is bounded in all only')
    jobs.start({ page: 'p' }, 'one', hold.work)
    jobs.start({ page: 'p' }, 'two', hold.work)
    assert.throws(
      () => jobs.start({ page: 'p' }, 'three', hold.work),
      (e: ApiError) => e.code === 'BUSY' && /this page has 2 jobs waiting/.test(e.message),
    )
    jobs.start({ page: 'q' }, 'other page', hold.work)
    assert.throws(
      () => jobs.start({ page: 'r' }, 'one too many', hold.work),
      (e: ApiError) => e.code === 'BUSY' && /3 jobs waiting/.test(e.message),
    )
    assert.deepEqual(jobs.counts(), { queued: 3, running: 3, known: 6 })
  })

  it('says a cancel once: a second cancel, or one of a finished job, cancels nothing and says why', async () => {
    const jobs = new JobRegistry()
    const g = gate('x')
    const id = jobs.start({ page: 'p' }, 'working', g.work)
    assert.deepEqual(jobs.cancel(id), { cancelled: true, state: 'cancelled' })
    assert.deepEqual(jobs.cancel(id), { cancelled: false, state: 'cancelled' })
    assert.deepEqual(jobs.status(id).error, { message: 'cancelled', code: 'CANCELLED' })
    const done = jobs.start({ page: 'p' }, 'quick', async () => 1)
    await jobs.settled(done)
    assert.deepEqual(jobs.cancel(done), { cancelled: false, state: 'done' })
    assert.deepEqual(jobs.cancel('never-started'), { cancelled: false })
  })

  it('reads cancelled at once when cancelled, and frees the slot once the work has returned', async () => {
    const jobs = new JobRegistry({ maxRunningPerPage: 1 })
    let release: () => void = () => {}
    // Work that ignores its signal for a while, as native work does until its next check.
    const slow = jobs.start({ page: 'p' }, 'slow', () => new Promise<void>((resolve) => (release = resolve)))
    const next = jobs.start({ page: 'p' }, 'next', async () => 2)
    jobs.cancel(slow)
    assert.equal(jobs.status(slow).state, 'cancelled', 'cancelled at once')
    assert.equal(jobs.status(next).state, 'queued', "the slot is the cancelled job's until its work returns")
    release()
    assert.equal((await jobs.settled(next)).state, 'done')
    assert.equal(jobs.status(slow).state, 'cancelled', 'work that ended after its cancel stays cancelled')
    assert.throws(
      () => jobs.result(slow),
      (e: ApiError) => e.code === 'BAD_INPUT' && /is cancelled, not done/.test(e.message),
    )
  })

  it("ends a trace's and a page's jobs, running, queued or finished, as cancelled saying why, and never throws about them", async () => {
    const jobs = new JobRegistry({ maxRunningPerPage: 1 })
    const finished = jobs.start({ page: 'p', traceId: 't1' }, 'replaying', async () => 'bundle')
    await jobs.settled(finished)
    const running = jobs.start({ page: 'p', traceId: 't1' }, 'replaying', gate(0).work)
    const queued = jobs.start({ page: 'p', traceId: 't1' }, 'replaying', gate(0).work)
    const failed = jobs.start({ page: 'q', traceId: 't1' }, 'replaying', async () => {
      throw Object.assign(new Error('bad strategy'), { code: 'BAD_INPUT' })
    })
    await jobs.settled(failed)
    const other = jobs.start({ page: 's', traceId: 't2' }, 'replaying', async () => 'other')
    await jobs.settled(other)
    assert.equal(jobs.endFor({ traceId: 't1' }, 'its trace was closed'), 3)
    for (const id of [finished, running, queued]) {
      const s = jobs.status(id)
      assert.equal(s.state, 'cancelled')
      assert.deepEqual(s.error, { message: 'its trace was closed', code: 'CANCELLED' })
    }
    assert.throws(() => jobs.result(finished), /cancelled, not done \(its trace was closed\)/, "the finished job's result is freed")
    assert.equal(jobs.status(failed).state, 'failed', 'a failed job stays failed')
    assert.equal(jobs.result(other), 'other', "another trace's job keeps its result")
    assert.equal(jobs.endFor({ page: 's' }, 'its page was closed'), 1)
    assert.equal(jobs.status(other).state, 'cancelled')
    assert.equal((await jobs.statusAfter(other, 500)).state, 'cancelled', 'a tombstone answers at once')
  })

  it('an open depends on the trace it opened once it says so (dependOn); handTo refuses a job that ended other than done', async () => {
    const jobs = new JobRegistry()
    const open = jobs.start({ page: '' }, 'opening', async (job) => {
      jobs.dependOn(job.jobId, 'opened')
      return { traceId: 'opened' }
    })
    await jobs.settled(open)
    assert.ok(jobs.handTo(open, 'page-1'), 'a finished open can be handed to the page that asks for it')
    jobs.endFor({ traceId: 'opened' }, 'its trace was closed')
    assert.equal(jobs.status(open).state, 'cancelled')
    assert.equal(jobs.handTo(open, 'page-2'), false)
    assert.equal(jobs.resultIfDone(open), undefined)
  })

  it('keeps a bounded number of results and tombstones: older results are freed (reading cancelled), older tombstones forgotten', async () => {
    const jobs = new JobRegistry({ resultsKept: 2, endedKept: 3 })
    const ids: string[] = []
    for (let i = 0; i < 5; i++) {
      ids.push(jobs.start({ page: 'p' }, 'quick', async () => i))
      await jobs.settled(ids[i]!)
    }
    assert.equal(jobs.counts().known, 3)
    assert.throws(
      () => jobs.status(ids[0]!),
      (e: ApiError) => e.code === 'NOT_FOUND',
    )
    assert.equal(jobs.status(ids[2]!).state, 'cancelled')
    assert.match(jobs.status(ids[2]!).error!.message, /keeps the results of the last 2 jobs/)
    assert.deepEqual([jobs.result(ids[3]!), jobs.result(ids[4]!)], [3, 4])
  })

  it('tells listeners of every change; a listener that throws breaks neither the job nor the others', async () => {
    const jobs = new JobRegistry({ maxRunningPerPage: 1 })
    const heard: JobStatus[] = []
    jobs.subscribe(() => {
      throw new Error('a broken listener')
    })
    jobs.subscribe((s) => heard.push(s))
    const g = gate('x')
    const first = jobs.start({ page: 'p' }, 'first', async (job) => {
      job.progress('halfway', 0.5)
      return g.work(job)
    })
    const second = jobs.start({ page: 'p' }, 'second', async () => 'y')
    g.open()
    assert.equal((await jobs.settled(second)).state, 'done')
    const of = (id: string) => heard.filter((s) => s.jobId === id).map((s) => `${s.state} ${s.phase} ${s.fraction}`)
    assert.deepEqual(of(first), ['running first 0', 'running halfway 0.5', 'done halfway 1'])
    assert.deepEqual(of(second), ['queued waiting for 1 job to end: second 0', 'running second 0', 'done second 1'])
  })

  it('answers status with waitMs when the job ends, or after waitMs (at most MAX_STATUS_WAIT_MS)', async () => {
    const jobs = new JobRegistry()
    const g = gate('x')
    const id = jobs.start({ page: 'p' }, 'working', g.work)
    let t0 = performance.now()
    assert.equal((await jobs.statusAfter(id, 50)).state, 'running')
    assert.ok(performance.now() - t0 >= 45, 'held for waitMs')
    t0 = performance.now()
    setTimeout(() => g.open(), 30)
    assert.equal((await jobs.statusAfter(id, 100_000)).state, 'done')
    const waited = performance.now() - t0
    assert.ok(waited < MAX_STATUS_WAIT_MS, `answered when it ended (${waited.toFixed(0)} ms), not at the bound`)
  })
})
