// The web host (`vramscope serve`) over real HTTP on 127.0.0.1: the token guards every API call,
// a foreign Host header is refused, static files cannot escape their directory and carry a strict
// CSP, and the API opens a real sample as a job, sends its columns as a bundle, replays it, and
// names what is wrong with a bad strategy, a bad file or a path it may not open.
import assert from 'node:assert/strict'
import { mkdtemp, writeFile } from 'node:fs/promises'
import { request } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'

import { decodeBundle } from '../../src-shared/bundle.ts'
import { requestedSeries, SUMMARY_BUCKETS } from '../../src-shared/requested.ts'
import { CONTENT_SECURITY_POLICY } from '../../src-main/ipc/page-policy.ts'
import type { JobStatus } from '../../src-shared/contract.ts'
import { AppSession } from '../../src-main/services/app-session.ts'
import { startWebHost, type WebHost } from '../../src-main/web/server.ts'

const ROOT = join(import.meta.dirname, '..', '..')

interface Reply {
  status: number
  headers: Record<string, string | string[] | undefined>
  body: Buffer
}

function call(
  host: WebHost,
  method: string,
  path: string,
  options: { body?: string | Buffer; headers?: Record<string, string>; token?: string | null } = {},
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const token = options.token === undefined ? host.token : options.token
    const req = request(
      { host: '127.0.0.1', port: host.port, method, path, headers: { ...(token !== null && { authorization: `Bearer ${token}` }), ...options.headers } },
      (res) => {
        const chunks: Buffer[] = []
        res.on('data', (c: Buffer) => chunks.push(c))
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }))
      },
    )
    req.on('error', reject)
    req.end(options.body)
  })
}

const api = (host: WebHost, channel: string, arg?: unknown, token?: string | null) =>
  call(host, 'POST', `/api/${channel}`, {
    body: arg === undefined ? '' : JSON.stringify(arg),
    headers: { 'content-type': 'application/json' },
    ...(token !== undefined && { token }),
  })

const json = (r: Reply) => JSON.parse(r.body.toString('utf8')) as { ok: boolean; result?: any; error?: { code: string; message: string } }

async function settle(host: WebHost, jobId: string): Promise<JobStatus> {
  for (;;) {
    const status = json(await api(host, 'job:status', { jobId })).result as JobStatus
    if (status.state !== 'running' && status.state !== 'queued') return status
    await new Promise((r) => setTimeout(r, 20))
  }
}

describe('web host', () => {
  let host: WebHost
  let staticDir: string
  before(async () => {
    staticDir = await mkdtemp(join(tmpdir(), 'vramscope-static-'))
    await writeFile(join(staticDir, 'index.html'), '<!doctype html><title>vramscope</title>')
    await writeFile(join(staticDir, 'app.js'), 'console.log(1)')
    const session = new AppSession({ version: 'test', host: 'web', samplesDir: join(ROOT, 'resources', 'samples'), allowedPaths: new Set() })
    host = await startWebHost({ session, staticDir })
  })
  after(() => host.close())

  it('prints a URL on 127.0.0.1 with a random port and token', () => {
    assert.match(host.url, /^http:\/\/127\.0\.0\.1:\d+\/\?token=[0-9a-f]{48}$/)
    assert.ok(host.port > 0)
  })

  it('refuses API calls without the token or with a wrong one', async () => {
    for (const token of [null, 'nope', host.token.slice(0, -1) + (host.token.endsWith('0') ? '1' : '0')]) {
      const r = await api(host, 'app:info', undefined, token)
      assert.equal(r.status, 401)
      assert.equal(json(r).error?.code, 'UNAUTHORIZED')
    }
  })

  it('refuses a Host header it does not serve (DNS rebinding)', async () => {
    const r = await call(host, 'POST', '/api/app:info', { headers: { host: `evil.example:${host.port}` } })
    assert.equal(r.status, 403)
  })

  it('serves the UI with a strict CSP and nothing outside its directory', async () => {
    const index = await call(host, 'GET', '/', { token: null })
    assert.equal(index.status, 200)
    assert.equal(index.headers['content-security-policy'], CONTENT_SECURITY_POLICY, 'the same policy as the desktop app')
    assert.match(String(index.headers['content-security-policy']), /default-src 'none'/)
    assert.equal(index.headers['x-content-type-options'], 'nosniff')
    assert.equal((await call(host, 'GET', '/app.js', { token: null })).status, 200)
    for (const path of ['/../package.json', '/%2e%2e/package.json', '/..%2fpackage.json', '/nothing.js'])
      assert.equal((await call(host, 'GET', path, { token: null })).status, 404, path)
  })

  it('answers app:info with samples, strategies and the privacy statement', async () => {
    const info = json(await api(host, 'app:info')).result
    assert.ok(info.samples.some((s: { name: string }) => s.name === 'transformer_varseq.pickle'))
    assert.ok(info.strategies.some((s: { name: string }) => s.name === 'caching'))
    assert.match(info.privacy, /Nothing leaves this machine/)
  })

  it('opens a sample as a job, sends its columns, and replays it', async () => {
    const { jobId } = json(await api(host, 'trace:openSample', { name: 'convnet_varimg.pickle' })).result
    assert.equal((await settle(host, jobId)).state, 'done')
    const summary = json(await api(host, 'job:result', { jobId })).result
    assert.equal(summary.kind, 'pytorch-snapshot')
    assert.deepEqual(summary.stored, ['pytorch (recorded)'])
    const data = await api(host, 'trace:data', { traceId: summary.traceId })
    assert.equal(data.headers['content-type'], 'application/octet-stream')
    const bundle = decodeBundle(data.body.buffer.slice(data.body.byteOffset, data.body.byteOffset + data.body.byteLength) as ArrayBuffer)
    assert.equal(bundle.arrays['kind']!.length, summary.events)
    // The summary carries the requested bytes the timeline draws before the columns arrive: the
    // series of the columns it then receives, bucketed as the summary's are.
    const a = bundle.arrays as unknown as { kind: Uint8Array; id: Uint32Array; size: Float64Array }
    const fromColumns = requestedSeries(a.kind, a.id, a.size, SUMMARY_BUCKETS)
    assert.deepEqual(summary.requested, { end: [...fromColumns.end], max: [...fromColumns.max], min: [...fromColumns.min], peak: fromColumns.peak })
    assert.ok(summary.requested.peak > 0 && summary.requested.end.at(-1) === summary.events)
    const replay = json(await api(host, 'replay:start', { traceId: summary.traceId, strategies: 'caching:preset=pytorch,buddy', cap: '40GiB' })).result
    assert.equal((await settle(host, replay.jobId)).state, 'done')
    const result = await api(host, 'replay:result', { jobId: replay.jobId })
    const replayed = decodeBundle(result.body.buffer.slice(result.body.byteOffset, result.body.byteOffset + result.body.byteLength) as ArrayBuffer)
    const names = (replayed.meta as { strategies: { name: string }[] }).strategies.map((s) => s.name)
    assert.deepEqual(names, ['pytorch (recorded)', 'caching (pytorch)', 'buddy'])
    // One strategy at a time, as a page fetches them side by side: each the whole's, renamed as
    // strategy 0, its arrays byte for byte; past the last, a bundle of none.
    for (let i = 0; i <= names.length; i++) {
      const one = await api(host, 'replay:result', { jobId: replay.jobId, strategy: i })
      const b = decodeBundle(one.body.buffer.slice(one.body.byteOffset, one.body.byteOffset + one.body.byteLength) as ArrayBuffer)
      const listed = (b.meta as { strategies: { name: string }[] }).strategies
      if (i === names.length) {
        assert.deepEqual([listed, Object.keys(b.arrays)], [[], []])
        continue
      }
      assert.deepEqual(listed, [(replayed.meta as { strategies: unknown[] }).strategies[i]])
      const own = Object.keys(replayed.arrays).filter((k) => k.startsWith(`s${i}.`))
      assert.deepEqual(
        Object.keys(b.arrays),
        own.map((k) => `s0.${k.slice(`s${i}.`.length)}`),
      )
      for (const k of own) assert.deepEqual(b.arrays[`s0.${k.slice(`s${i}.`.length)}`], replayed.arrays[k], k)
    }
    assert.equal((await api(host, 'replay:result', { jobId: replay.jobId, strategy: -1 })).status, 400)
  })

  it('replays part of the strategy list, labelled as in the whole list, so the UI draws the first map early', async () => {
    const { jobId } = json(await api(host, 'trace:openSample', { name: 'convnet_varimg.pickle' })).result
    await settle(host, jobId)
    const { traceId } = json(await api(host, 'job:result', { jobId })).result
    const names = async (arg: object) => {
      const replay = json(await api(host, 'replay:start', { traceId, strategies: 'slab,buddy,slab:classes=512,4KiB', ...arg })).result
      assert.equal((await settle(host, replay.jobId)).state, 'done')
      const result = await api(host, 'replay:result', { jobId: replay.jobId })
      const bundle = decodeBundle(result.body.buffer.slice(result.body.byteOffset, result.body.byteOffset + result.body.byteLength) as ArrayBuffer)
      return (bundle.meta as { strategies: { name: string }[] }).strategies.map((s) => s.name)
    }
    const whole = await names({ includeStored: false })
    assert.equal(whole.length, 3)
    assert.deepEqual(await names({ targets: { first: 0, count: 0 } }), ['pytorch (recorded)'])
    assert.deepEqual(await names({ targets: { first: 0, count: 1 }, includeStored: false }), whole.slice(0, 1))
    assert.deepEqual(await names({ targets: { first: 1 }, includeStored: false }), whole.slice(1))
    const bad = await api(host, 'replay:start', { traceId, strategies: 'slab', targets: { first: -1 } })
    assert.equal(bad.status, 400)
    assert.match(json(bad).error!.message, /^targets\.first: /)
  })

  it("makes a replay's preview: each map cut at the first strategy's peak or at a given event, the whole bundle as before", async () => {
    const { jobId } = json(await api(host, 'trace:openSample', { name: 'convnet_varimg.pickle' })).result
    await settle(host, jobId)
    const { traceId, events } = json(await api(host, 'job:result', { jobId })).result
    const fetched = async (arg: object) => {
      const r = await api(host, 'replay:result', arg)
      assert.equal(r.status, 200)
      const b = decodeBundle(r.body.buffer.slice(r.body.byteOffset, r.body.byteOffset + r.body.byteLength) as ArrayBuffer)
      return {
        bytes: r.body.byteLength,
        listed: (b.meta as { strategies: { name: string; previewAt?: number; summary: Record<string, number> }[] }).strategies,
      }
    }
    const start = async (arg: object) => {
      const replay = json(await api(host, 'replay:start', { traceId, strategies: 'caching:preset=pytorch,buddy,arena', includeStored: false, ...arg })).result
      assert.equal((await settle(host, replay.jobId)).state, 'done')
      return replay.jobId as string
    }
    const peakJob = await start({ previewAt: 'peak' })
    const whole = await fetched({ jobId: peakJob })
    const preview = await fetched({ jobId: peakJob, preview: true })
    const peak = whole.listed[0]!.summary['peakReservedEvent']!
    assert.ok(peak > 0 && peak < events)
    assert.deepEqual(
      preview.listed.map((s) => [s.name, s.previewAt]),
      // arena (a bump allocator) cannot be cut: it travels whole.
      [
        ['caching (pytorch)', peak],
        ['buddy', peak],
        ['arena', undefined],
      ],
    )
    assert.ok(
      whole.listed.every((s) => s.previewAt === undefined),
      'the whole bundle is not a preview',
    )
    assert.ok(preview.bytes < whole.bytes, `preview ${preview.bytes} B, whole ${whole.bytes} B`)
    // One strategy of the preview alone, as a page fetches them side by side.
    assert.deepEqual(
      (await fetched({ jobId: peakJob, strategy: 1, preview: true })).listed.map((s) => [s.name, s.previewAt]),
      [['buddy', peak]],
    )
    // At a given event; one past the last event makes none, and the whole bundle comes instead.
    const at = await start({ previewAt: 5 })
    assert.deepEqual(
      (await fetched({ jobId: at, preview: true })).listed.map((s) => s.previewAt),
      [5, 5, undefined],
    )
    const past = await start({ previewAt: events })
    assert.ok((await fetched({ jobId: past, preview: true })).listed.every((s) => s.previewAt === undefined))
    // A job asked for no preview answers with the whole bundle.
    const none = await start({})
    assert.ok((await fetched({ jobId: none, preview: true })).listed.every((s) => s.previewAt === undefined))
    for (const previewAt of [-1, 1.5, 'top', null]) {
      const bad = await api(host, 'replay:start', { traceId, strategies: 'slab', previewAt })
      assert.equal(bad.status, 400, String(previewAt))
      assert.match(json(bad).error!.message, /previewAt/)
    }
  })

  it('names a bad strategy, a bad cap and an unknown trace', async () => {
    const { jobId } = json(await api(host, 'trace:openSample', { name: 'convnet_varimg.pickle' })).result
    await settle(host, jobId)
    const { traceId } = json(await api(host, 'job:result', { jobId })).result
    const bad = await api(host, 'replay:start', { traceId, strategies: 'caching:preset=pytorch,nosuch' })
    assert.equal(bad.status, 400)
    assert.match(json(bad).error!.message, /nosuch/)
    const cap = await api(host, 'replay:start', { traceId, strategies: 'slab', cap: 'lots' })
    assert.equal(cap.status, 400)
    assert.match(json(cap).error!.message, /^cap: /)
    const unknown = await api(host, 'trace:data', { traceId: 'no-such-trace' })
    assert.equal(unknown.status, 404)
  })

  it('fails an upload that is not a trace with a message naming the problem, and stays usable', async () => {
    const r = await call(host, 'POST', '/api/trace:openBytes', {
      body: Buffer.from('\x00\x01 definitely not a trace'),
      headers: { 'content-type': 'application/octet-stream', 'x-file-name': 'junk.bin' },
    })
    const { jobId } = json(r).result
    const status = await settle(host, jobId)
    assert.equal(status.state, 'failed')
    assert.match(status.error!.message, /junk\.bin/)
    assert.match(status.error!.message, /not a file vramscope reads/)
    assert.doesNotMatch(status.error!.message, /vramscope-upload-|\/tmp\//, 'the private temporary path stays private')
    assert.equal(json(await api(host, 'app:info')).ok, true)
  })

  it('opens no path it was not started with, and no sample name that is a path', async () => {
    const r = await api(host, 'trace:openPath', { path: '/etc/passwd' })
    assert.equal(r.status, 400)
    assert.match(json(r).error!.message, /only the file it was started with/)
    assert.equal((await api(host, 'trace:openSample', { name: '../package.json' })).status, 400)
  })

  it('rejects malformed requests with a named problem', async () => {
    assert.equal((await call(host, 'GET', '/api/app:info')).status, 405)
    assert.equal((await api(host, 'no:such')).status, 404)
    const notJson = await call(host, 'POST', '/api/job:status', { body: '{', headers: { 'content-type': 'application/json' } })
    assert.equal(notJson.status, 400)
    assert.match(json(notJson).error!.message, /not JSON/)
    assert.equal((await api(host, 'job:status', { jobId: 42 })).status, 400)
  })
})

describe('web host: recording a workload', () => {
  let host: WebHost
  before(async () => {
    const staticDir = await mkdtemp(join(tmpdir(), 'vramscope-static-'))
    await writeFile(join(staticDir, 'index.html'), '<!doctype html><title>vramscope</title>')
    const session = new AppSession({ version: 'test', host: 'web', samplesDir: join(ROOT, 'resources', 'samples'), allowedPaths: new Set() })
    host = await startWebHost({ session, staticDir })
  })
  after(() => host.close())

  it('lists the built-in workloads and says whether this host can record', async () => {
    const info = json(await api(host, 'app:info')).result
    assert.equal(typeof info.recording.available, 'boolean')
    if (!info.recording.available) assert.match(info.recording.reason, /NVIDIA GPU and driver|no CUDA support/)
    if (info.workloads.length > 0) assert.ok(info.workloads.some((w: { name: string }) => w.name === 'training'))
  })

  it('names an unknown workload, an unknown parameter and a bad strategy', async () => {
    const info = json(await api(host, 'app:info')).result
    if (info.workloads.length === 0) return
    const unknown = await api(host, 'record:workload', { workload: 'mining' })
    assert.equal(unknown.status, 400)
    assert.match(json(unknown).error!.message, /mining.*not a built-in workload/)
    const param = await api(host, 'record:workload', { workload: 'training', params: { wheels: '4' } })
    assert.equal(param.status, 400)
    assert.match(json(param).error!.message, /params\.wheels/)
    const strategy = await api(host, 'record:workload', { workload: 'training', strategy: 'nosuch' })
    assert.equal(strategy.status, 400)
    assert.match(json(strategy).error!.message, /nosuch/)
    assert.equal((await api(host, 'record:workload', { workload: 'training', params: { steps: 5 } })).status, 400)
  })

  it('without a GPU, a recording job fails saying so, and the host goes on serving', async (t) => {
    const info = json(await api(host, 'app:info')).result
    if (info.recording.available) return t.skip('this machine has a GPU: the recording would run')
    if (info.workloads.length === 0) return t.skip('this build has no workloads (no CUDA)')
    const { jobId } = json(await api(host, 'record:workload', { workload: 'training' })).result
    const status = await settle(host, jobId)
    assert.equal(status.state, 'failed')
    assert.match(status.error!.message, /recording needs an NVIDIA GPU and driver; import and replay work without one/)
    assert.equal(json(await api(host, 'app:info')).ok, true)
  })
})

describe('recording in the session process (the desktop worker)', () => {
  it('without a GPU, fails saying so, as the child-process recorder does', async (t) => {
    const session = new AppSession({ version: 'test', host: 'electron', samplesDir: join(ROOT, 'resources', 'samples'), recordInProcess: true })
    const info = await session.info()
    if (info.recording.available) return t.skip('this machine has a GPU: the recording would run')
    if (info.workloads.length === 0) return t.skip('this build has no workloads (no CUDA)')
    const { jobId } = session.recordWorkload({ workload: 'inference', strategy: 'buddy', params: { requests: '3' } })
    const status = await session.jobs.settled(jobId)
    assert.equal(status.state, 'failed')
    assert.match(status.error!.message, /recording needs an NVIDIA GPU and driver; import and replay work without one/)
  })
})
