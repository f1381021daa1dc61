// The web host as `vramscope serve` runs it, its session in a worker process: errors keep their
// HTTP status across the process boundary (an unknown trace is a 404, a bad strategy a 400, not
// a 500), an upload opens there and its file is removed, a page's traces are its own and freed
// by page:close, and no error names a server path.
import assert from 'node:assert/strict'
import { request } from 'node:http'
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'

import type { JobStatus } from '../../src-shared/contract.ts'
import { startWebHost, type WebHost } from '../../src-main/web/server.ts'
import { workerSession, type WorkerSession } from '../../src-main/web/worker-session.ts'
import { postApi } from '../helpers/web-host.ts'
import { sampleTrace } from '../helpers/trace-samples.ts'
import { decodeBundle } from '../../src-shared/bundle.ts'
import { writeTrace } from '../../src-main/services/trace/file.ts'
import { BUNDLE_FILE_MIN_BYTES } from '../../src-main/utility/bundle-file.ts'

const ROOT = join(import.meta.dirname, '..', '..')

let host: WebHost
let session: WorkerSession
let staticDir: string
let uploadDir: string

const post = (channel: string, body: string | Buffer, headers: Record<string, string> = {}) =>
  postApi(host, channel, body, { 'x-vramscope-page': 'page-1', ...headers }, 'latin1')

const json = (r: { body: string }) => JSON.parse(r.body) as { ok: boolean; result?: any; error?: { code: string; message: string } }

async function settle(jobId: string): Promise<JobStatus> {
  for (;;) {
    const status = json(await post('job:status', JSON.stringify({ jobId, waitMs: 500 }))).result as JobStatus
    if (status.state !== 'running' && status.state !== 'queued') return status
  }
}

describe('web host with its session in a worker process', () => {
  before(async () => {
    staticDir = await mkdtemp(join(tmpdir(), 'vramscope-worker-host-'))
    uploadDir = await mkdtemp(join(tmpdir(), 'vramscope-worker-uploads-'))
    await writeFile(join(staticDir, 'index.html'), '<!doctype html><title>vramscope</title>')
    session = workerSession({ version: 'test', host: 'web', samplesDir: join(ROOT, 'resources', 'samples'), allowedPaths: new Set() })
    host = await startWebHost({ session, staticDir, uploadDir })
  })
  after(async () => {
    await host.close()
    await session.close()
    await rm(staticDir, { recursive: true, force: true })
    await rm(uploadDir, { recursive: true, force: true })
  })

  it('an unknown trace is a 404 and a bad strategy a 400, as in one process', async () => {
    const unknown = await post('trace:data', JSON.stringify({ traceId: 'no-such-trace' }))
    assert.equal(unknown.status, 404, unknown.body)
    assert.equal(json(unknown).error!.code, 'NOT_FOUND')
    const open = json(await post('trace:openSample', JSON.stringify({ name: 'h100-inference-buddy.vramscope' })))
    assert.equal((await settle(open.result.jobId)).state, 'done')
    const { traceId } = json(await post('job:result', JSON.stringify({ jobId: open.result.jobId }))).result
    const bad = await post('replay:start', JSON.stringify({ traceId, strategies: 'no_such_strategy' }))
    assert.equal(bad.status, 400, bad.body)
    assert.equal(json(bad).error!.code, 'BAD_INPUT')
    assert.equal((await post('trace:data', JSON.stringify({ traceId }))).status, 200)
    assert.equal(json(await post('page:close', '')).result.closed, 1)
    const closed = await post('trace:data', JSON.stringify({ traceId }))
    assert.equal(closed.status, 404)
    assert.match(json(closed).error!.message, /page was closed/)
  })

  it('a large bundle the worker wrote to a file reaches the page whole, and the file is gone once sent', async () => {
    // 100,000 events: megabytes of columns, which the worker writes to a file (bundle-file.ts).
    const trace = sampleTrace(100_000, 3)
    const file = join(uploadDir, 'big.vramscope')
    await writeTrace(file, trace)
    try {
      const opened = json(await post('trace:openBytes', await readFile(file), { 'x-file-name': 'big.vramscope' }))
      assert.equal((await settle(opened.result.jobId)).state, 'done')
      const { traceId } = json(await post('job:result', JSON.stringify({ jobId: opened.result.jobId }))).result
      const reply = await post('trace:data', JSON.stringify({ traceId }))
      assert.equal(reply.status, 200)
      const bytes = Buffer.from(reply.body, 'latin1')
      assert.ok(bytes.byteLength >= BUNDLE_FILE_MIN_BYTES, `${bytes.byteLength} bytes: large enough to go through a file`)
      const sent = decodeBundle(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer)
      assert.deepEqual(sent.arrays['kind'], trace.events.kind)
      assert.deepEqual(sent.arrays['size'], trace.events.size)
      const dir = session.client.bundleDir
      assert.ok(dir !== undefined, 'the worker has a folder for bundle files')
      // Deleted once the last bytes are written (the page may have them a moment before).
      for (let i = 0; i < 100 && (await readdir(dir)).length > 0; i++) await new Promise((r) => setTimeout(r, 20))
      assert.deepEqual(await readdir(dir), [], 'the bundle file was deleted once sent')
    } finally {
      await rm(file, { force: true })
    }
  })

  it('an upload is opened in the worker and its file removed; a bad one names the file, not a path', async () => {
    const bytes = await readFile(join(ROOT, 'test', 'fixtures', 'pytorch', 'mlp_varbatch.pickle'))
    const good = json(await post('trace:openBytes', bytes, { 'x-file-name': 'mlp.pickle' }))
    assert.equal((await settle(good.result.jobId)).state, 'done')
    const bad = json(await post('trace:openBytes', Buffer.from('not a trace'), { 'x-file-name': 'junk.bin' }))
    const status = await settle(bad.result.jobId)
    assert.equal(status.state, 'failed')
    assert.match(status.error!.message, /junk\.bin/)
    assert.ok(!status.error!.message.includes(uploadDir), status.error!.message)
    for (let i = 0; i < 50 && (await readdir(uploadDir)).length > 0; i++) await new Promise((r) => setTimeout(r, 20))
    assert.deepEqual(await readdir(uploadDir), [])
  })

  it('an upload the worker is opening when it is closed leaves no file', async () => {
    const own = workerSession({ version: 'test', host: 'web', samplesDir: join(ROOT, 'resources', 'samples'), allowedPaths: new Set() })
    const ownHost = await startWebHost({ session: own, staticDir, uploadDir })
    try {
      const bytes = await readFile(join(ROOT, 'test', 'fixtures', 'pytorch', 'transformer_varseq.pickle'))
      const r = await new Promise<{ status: number }>((resolve, reject) => {
        const req = request(
          {
            host: '127.0.0.1',
            port: ownHost.port,
            method: 'POST',
            path: '/api/trace:openBytes',
            headers: { authorization: `Bearer ${ownHost.token}`, 'x-file-name': 'big.pickle' },
          },
          (res) => {
            res.resume()
            res.on('end', () => resolve({ status: res.statusCode ?? 0 }))
          },
        )
        req.on('error', reject)
        req.end(bytes)
      })
      assert.equal(r.status, 200)
      assert.equal((await readdir(uploadDir)).length, 1, 'the worker is opening it')
    } finally {
      await ownHost.close()
      await own.close()
    }
    assert.deepEqual(await readdir(uploadDir), [], 'removed by the time close() resolves')
  })
})
