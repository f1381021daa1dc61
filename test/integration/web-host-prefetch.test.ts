// The web host's head start on the file it was started with: loading the page (with its token)
// opens that file (and its opening replays), and the page's open takes that job; a page without the token
// starts nothing; `job:status` with waitMs answers when the job settles.
import assert from 'node:assert/strict'
import { mkdtemp, writeFile } from 'node:fs/promises'
import { request } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'

import type { AppInfo, JobStatus, TraceSummary } from '../../src-shared/contract.ts'
import { AppSession } from '../../src-main/services/app-session.ts'
import { startWebHost, type WebHost } from '../../src-main/web/server.ts'

const ROOT = join(import.meta.dirname, '..', '..')
const SAMPLE = join(ROOT, 'resources', 'samples', 'h100-inference-buddy.vramscope')

function call(host: WebHost, method: string, path: string, body?: string, token: string | null = host.token): Promise<{ status: number; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { 'content-type': 'application/json' }
    if (token !== null) headers['authorization'] = `Bearer ${token}`
    const req = request({ host: '127.0.0.1', port: host.port, method, path, headers }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (c: Buffer) => chunks.push(c))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }))
    })
    req.on('error', reject)
    req.end(body)
  })
}

async function api<T>(host: WebHost, channel: string, arg?: unknown): Promise<T> {
  const r = await call(host, 'POST', `/api/${channel}`, arg === undefined ? '' : JSON.stringify(arg))
  const j = JSON.parse(r.body.toString('utf8')) as { ok: boolean; result: T; error?: { message: string } }
  if (!j.ok) throw new Error(j.error?.message)
  return j.result
}

async function settle(host: WebHost, jobId: string): Promise<JobStatus> {
  for (;;) {
    const status = await api<JobStatus>(host, 'job:status', { jobId, waitMs: 200 })
    if (status.state !== 'running' && status.state !== 'queued') return status
  }
}

async function startHost(session: AppSession): Promise<WebHost> {
  const staticDir = await mkdtemp(join(tmpdir(), 'vramscope-static-'))
  await writeFile(join(staticDir, 'index.html'), '<!doctype html><title>vramscope</title>')
  return startWebHost({ session, staticDir })
}

describe('web host: the initial file ahead of the page', () => {
  let session: AppSession
  let host: WebHost
  before(async () => {
    session = new AppSession({
      version: 'test',
      host: 'web',
      samplesDir: join(ROOT, 'resources', 'samples'),
      initialFile: SAMPLE,
      allowedPaths: new Set([SAMPLE]),
    })
    host = await startHost(session)
  })
  after(() => host.close())

  /** Jobs the session holds: a request that takes a prefetched job adds none. */
  const jobCount = () => session.jobs.counts().known

  it('starts nothing for a page without the token', async () => {
    const before = jobCount()
    assert.equal((await call(host, 'GET', '/', undefined, null)).status, 200)
    assert.equal((await call(host, 'GET', '/?token=wrong', undefined, null)).status, 200)
    assert.equal(jobCount(), before)
    const info = await api<AppInfo>(host, 'app:info')
    const { jobId } = await api<{ jobId: string }>(host, 'trace:openRecent', { key: info.initialFile })
    assert.equal(jobCount(), before + 1, 'the page opens the file itself')
    await settle(host, jobId)
  })

  it('gives the page the prefetched open when it asks for that file, once', async () => {
    assert.equal((await call(host, 'GET', `/?token=${host.token}`, undefined, null)).status, 200)
    const info = await api<AppInfo>(host, 'app:info')
    const prefetched = session.prefetchedJob
    const { jobId } = await api<{ jobId: string }>(host, 'trace:openRecent', { key: info.initialFile })
    assert.equal(jobId, prefetched, 'the page took the prefetched open')
    assert.equal((await settle(host, jobId)).state, 'done')
    const summary = await api<TraceSummary>(host, 'job:result', { jobId })
    assert.equal(summary.name, 'h100-inference-buddy.vramscope')
    // The open started its opening replays (opening-jobs.test): their maps are fetched with
    // `wait`, no replay:start and no status call between.
    assert.equal(summary.opening?.strategies, info.defaultStrategies)
    const held = jobCount()
    const preview = await call(
      host,
      'POST',
      `/api/${encodeURIComponent('replay:result')}`,
      JSON.stringify({ jobId: summary.opening!.first, preview: true, wait: true }),
    )
    assert.equal(preview.status, 200)
    assert.ok(preview.body.length > 0, "the first map's preview")
    assert.equal(jobCount(), held, 'nothing more started')
    // Taken once: opening the file again is a job of its own.
    const again = await api<{ jobId: string }>(host, 'trace:openRecent', { key: info.initialFile })
    assert.notEqual(again.jobId, jobId)
    assert.ok(jobCount() > held)
    await settle(host, again.jobId)
  })

  it('prefetches again for the next page once a page has taken the last prefetch, not before', async () => {
    await call(host, 'GET', `/index.html?token=${host.token}`, undefined, null)
    const afterFirst = jobCount()
    await call(host, 'GET', `/?token=${host.token}`, undefined, null)
    assert.equal(jobCount(), afterFirst, 'one prefetch waits for its page')
    const info = await api<AppInfo>(host, 'app:info')
    const { jobId } = await api<{ jobId: string }>(host, 'trace:openRecent', { key: info.initialFile })
    await settle(host, jobId)
    // (Its first map's replay has started ahead by now.)
    const taken = jobCount()
    await call(host, 'GET', `/?token=${host.token}`, undefined, null)
    assert.equal(jobCount(), taken + 1, "the next page's open")
    const next = await api<{ jobId: string }>(host, 'trace:openRecent', { key: info.initialFile })
    await settle(host, next.jobId)
  })

  it('job:status with waitMs answers when the job settles, and refuses a bad waitMs', async () => {
    const info = await api<AppInfo>(host, 'app:info')
    const { jobId } = await api<{ jobId: string }>(host, 'trace:openRecent', { key: info.initialFile })
    const t0 = performance.now()
    const status = await api<JobStatus>(host, 'job:status', { jobId, waitMs: 1000 })
    assert.notEqual(status.state, 'running', 'a small file opens well within a second')
    assert.ok(performance.now() - t0 < 1000, 'the answer came when the job settled, not after the whole wait')
    const bad = await call(host, 'POST', '/api/job:status', JSON.stringify({ jobId, waitMs: 'soon' }))
    assert.equal(bad.status, 400)
  })
})
