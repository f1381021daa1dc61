// Hostile and broken requests to the web host (`vramscope serve`): payloads of wrong types on every
// channel, bodies and uploads over their limits, malformed percent-encoding in the path and the
// upload's file name. Each gets a 4xx reply whose message names the problem (never a 500 or a
// dropped connection where a reply can be sent), and the host keeps answering. The arguments are
// checked by the contract's schemas through the one dispatcher, as on the Electron side:
// ipc-router.test.ts.
import assert from 'node:assert/strict'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { request } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'

import { AppSession } from '../../src-main/services/app-session.ts'
import { startWebHost, type WebHost } from '../../src-main/web/server.ts'

const ROOT = join(import.meta.dirname, '..', '..')
const UPLOAD_LIMIT = 4096

interface Reply {
  status: number
  body: string
}

function send(host: WebHost, path: string, body: string | Buffer | undefined, headers: Record<string, string> = {}, chunks?: Buffer[]): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: host.port, method: 'POST', path, headers: { authorization: `Bearer ${host.token}`, ...headers } }, (res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (c: string) => (text += c))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }))
    })
    req.on('error', reject)
    if (chunks) {
      for (const c of chunks) req.write(c)
      req.end()
    } else req.end(body)
  })
}

const message = (r: Reply) => (JSON.parse(r.body) as { error?: { message: string } }).error?.message ?? ''

interface Status {
  state: string
  error?: { message: string }
}

/** A job's status once it is no longer running. */
async function settle(host: WebHost, jobId: string): Promise<Status> {
  for (;;) {
    const r = await send(host, '/api/job:status', JSON.stringify({ jobId }), { 'content-type': 'application/json' })
    const status = (JSON.parse(r.body) as { result: Status }).result
    if (status.state !== 'running' && status.state !== 'queued') return status
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

describe('web host: hostile requests', () => {
  let host: WebHost
  let staticDir: string
  before(async () => {
    staticDir = await mkdtemp(join(tmpdir(), 'vramscope-hostile-'))
    await writeFile(join(staticDir, 'index.html'), '<!doctype html><title>vramscope</title>')
    const session = new AppSession({ version: 'test', host: 'web', samplesDir: join(ROOT, 'resources', 'samples'), allowedPaths: new Set() })
    host = await startWebHost({ session, staticDir, maxUploadBytes: UPLOAD_LIMIT })
  })
  after(async () => {
    await host.close()
    await rm(staticDir, { recursive: true, force: true })
  })

  it('wrong types on every channel: 400 naming the field', async () => {
    const cases: [string, unknown, RegExp][] = [
      ['trace:openSample', [], /JSON object/],
      ['trace:openSample', { name: 7 }, /name must be a string/],
      ['trace:openSample', 'convnet_varimg.pickle', /JSON object/],
      ['trace:openPath', { path: null }, /path must be a string/],
      ['trace:openRecent', { key: { $ne: 1 } }, /key must be a string/],
      ['trace:data', { traceId: ['a'] }, /traceId must be a string/],
      ['replay:start', { traceId: 't' }, /strategies must be a string/],
      ['replay:start', { traceId: 1, strategies: 'slab' }, /traceId must be a string/],
      ['replay:result', null, /JSON object/],
      ['job:status', { jobId: true }, /jobId must be a string/],
      ['job:result', 3, /JSON object/],
      ['job:cancel', {}, /jobId must be a string/],
    ]
    for (const [channel, arg, problem] of cases) {
      const r = await send(host, `/api/${channel}`, JSON.stringify(arg), { 'content-type': 'application/json' })
      assert.equal(r.status, 400, `${channel} ${JSON.stringify(arg)}: ${r.body}`)
      assert.match(message(r), problem, `${channel} ${JSON.stringify(arg)}`)
    }
  })

  it('a JSON body over 1 MiB: 413 naming the limit', async () => {
    const r = await send(host, '/api/job:status', JSON.stringify({ jobId: 'x'.repeat(2 << 20) }), { 'content-type': 'application/json' })
    assert.equal(r.status, 413)
    assert.match(message(r), /larger than 1048576 bytes/)
  })

  it('an upload declared over the limit: 413 before anything is read', async () => {
    const r = await send(host, '/api/trace:openBytes', Buffer.alloc(UPLOAD_LIMIT + 1), {
      'content-type': 'application/octet-stream',
      'x-file-name': 'big.pickle',
    })
    assert.equal(r.status, 413)
    assert.match(message(r), new RegExp(`larger than the ${UPLOAD_LIMIT}-byte limit`))
  })

  it('an upload streamed past the limit without a length: refused, and the host stays usable', async () => {
    const chunks = Array.from({ length: 8 }, () => Buffer.alloc(1024, 1))
    const r = await send(
      host,
      '/api/trace:openBytes',
      undefined,
      { 'content-type': 'application/octet-stream', 'x-file-name': 'stream.pickle', 'transfer-encoding': 'chunked' },
      chunks,
    ).catch((e: NodeJS.ErrnoException) => ({ status: -1, body: e.code ?? e.message }))
    // Refused mid-stream: the rest of the body is read and dropped, so the client reads the 413, not a reset.
    assert.equal(r.status, 413, `got ${r.status} ${r.body}`)
    assert.match(message(r), /limit/)
    assert.equal((await send(host, '/api/app:info', '')).status, 200)
  })

  it('malformed percent-encoding in the channel and in the upload name: 400, not 500', async () => {
    const path = await send(host, '/api/job%E0%A4%A', '')
    assert.equal(path.status, 400, path.body)
    assert.match(message(path), /percent-encoding|URI/i)
    const name = await send(host, '/api/trace:openBytes', Buffer.from('junk'), { 'content-type': 'application/octet-stream', 'x-file-name': '%E0%A4%A.pickle' })
    assert.equal(name.status, 400, name.body)
    assert.match(message(name), /x-file-name/)
    assert.equal((await send(host, '/api/app:info', '')).status, 200)
  })

  it('hostile snapshot shapes uploaded (scripts/fixtures/make_hostile_pickles.py): opened or refused in seconds, naming the file and the value, and the host keeps answering', async () => {
    const cases: [string, RegExp | null][] = [
      ['sizes-huge-map-then-oom.pickle', null],
      ['sizes-unmap-past-map-then-oom.pickle', null],
      ['sizes-block-rounds-to-2-53.pickle', /sizes-block-rounds-to-2-53\.pickle: .*'size' of a block must be at most .*got 9007199254740991/],
      ['sizes-stream-2-53.pickle', /sizes-stream-2-53\.pickle: .*'stream' must be .*got 9007199254740992n/],
      ['sizes-stream-negative.pickle', /sizes-stream-negative\.pickle: .*'stream' must be .*got -1/],
      ['sizes-segment-stream-2-64.pickle', /sizes-segment-stream-2-64\.pickle: .*'stream' must be .*got 18446744073709551616n/],
    ]
    for (const [name, problem] of cases) {
      const bytes = await readFile(join(ROOT, 'test', 'fixtures', 'hostile', name))
      const started = performance.now()
      const r = await send(host, '/api/trace:openBytes', bytes, { 'content-type': 'application/octet-stream', 'x-file-name': name })
      assert.equal(r.status, 200, `${name}: ${r.body}`)
      const status = await settle(host, (JSON.parse(r.body) as { result: { jobId: string } }).result.jobId)
      const ms = performance.now() - started
      assert.ok(ms < 10_000, `${name}: settled after ${ms.toFixed(0)} ms`)
      if (problem === null) assert.equal(status.state, 'done', `${name}: ${JSON.stringify(status)}`)
      else {
        assert.equal(status.state, 'failed', name)
        assert.match(status.error!.message, problem)
      }
      assert.equal((await send(host, '/api/app:info', '')).status, 200)
    }
  })
})
