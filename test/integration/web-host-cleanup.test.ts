// What the web host (`vramscope serve`) leaves behind and lets out: an upload's temporary file is
// removed on every path (finished and opened, aborted by the client, over the limit, too slow, the
// host closed mid-upload); past the limit the client reads a 413, not a reset; and no error that
// reaches the browser names a path of the server (samples, uploads, the file it was started with).
import assert from 'node:assert/strict'
import { copyFile, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'

import type { JobStatus } from '../../src-shared/contract.ts'
import { AppSession } from '../../src-main/services/app-session.ts'
import { startWebHost, type WebHost } from '../../src-main/web/server.ts'
import { postApi } from '../helpers/web-host.ts'

const ROOT = join(import.meta.dirname, '..', '..')
const UPLOAD_LIMIT = 512 * 1024
const IDLE_MS = 300

interface Reply {
  status: number
  body: string
}

const post = (host: WebHost, channel: string, body: string | Buffer, headers: Record<string, string> = {}): Promise<Reply> =>
  postApi(host, channel, body, headers)

const json = (r: Reply) => JSON.parse(r.body) as { ok: boolean; result?: any; error?: { code: string; message: string } }

async function settle(host: WebHost, jobId: string): Promise<JobStatus> {
  for (;;) {
    const status = json(await post(host, 'job:status', JSON.stringify({ jobId }))).result as JobStatus
    if (status.state !== 'running' && status.state !== 'queued') return status
    await new Promise((r) => setTimeout(r, 10))
  }
}

/** The raw request head of an upload, to write by hand (a body that stops, or never ends). */
function uploadHead(host: WebHost, headers: Record<string, string | number>): string {
  const lines = [`POST /api/trace:openBytes HTTP/1.1`, `host: 127.0.0.1:${host.port}`, `authorization: Bearer ${host.token}`, 'x-file-name: big.pickle']
  for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`)
  return `${lines.join('\r\n')}\r\n\r\n`
}

/** Waits until `dir` is empty (cleanup runs as the request ends), or fails naming what is left. */
async function emptied(dir: string, ms = 3000): Promise<void> {
  const until = Date.now() + ms
  for (;;) {
    const left = await readdir(dir)
    if (left.length === 0) return
    if (Date.now() > until) assert.fail(`left in the upload directory: ${left.join(', ')}`)
    await new Promise((r) => setTimeout(r, 20))
  }
}

describe('web host: upload temporary files and server paths', () => {
  let host: WebHost
  let staticDir: string
  let uploadDir: string
  let startedWith: string
  let session: AppSession
  before(async () => {
    staticDir = await mkdtemp(join(tmpdir(), 'vramscope-cleanup-static-'))
    uploadDir = await mkdtemp(join(tmpdir(), 'vramscope-cleanup-uploads-'))
    await writeFile(join(staticDir, 'index.html'), '<!doctype html><title>vramscope</title>')
    startedWith = join(staticDir, 'started-with.pickle')
    await copyFile(join(ROOT, 'test', 'fixtures', 'pytorch', 'mlp_varbatch.pickle'), startedWith)
    session = new AppSession({
      version: 'test',
      host: 'web',
      samplesDir: join(ROOT, 'resources', 'samples'),
      initialFile: startedWith,
      allowedPaths: new Set([startedWith]),
    })
    host = await startWebHost({ session, staticDir, maxUploadBytes: UPLOAD_LIMIT, uploadDir, uploadIdleMs: IDLE_MS })
  })
  after(async () => {
    await host.close()
    await rm(staticDir, { recursive: true, force: true })
    await rm(uploadDir, { recursive: true, force: true })
  })

  it('a finished upload is opened, then its temporary file is gone', async () => {
    const bytes = await import('node:fs/promises').then((fs) => fs.readFile(join(ROOT, 'test', 'fixtures', 'pytorch', 'mlp_varbatch.pickle')))
    assert.ok(bytes.length < UPLOAD_LIMIT)
    const r = await post(host, 'trace:openBytes', bytes, { 'x-file-name': 'mlp.pickle', 'content-type': 'application/octet-stream' })
    assert.equal(r.status, 200, r.body)
    assert.equal((await settle(host, json(r).result.jobId)).state, 'done')
    await emptied(uploadDir)
  })

  it('an upload the client aborts halfway leaves no file', async () => {
    const socket = connect(host.port, '127.0.0.1')
    await new Promise((r) => socket.once('connect', r))
    socket.write(uploadHead(host, { 'content-length': UPLOAD_LIMIT - 1 }))
    socket.write(Buffer.alloc(UPLOAD_LIMIT / 2, 7))
    await new Promise((r) => setTimeout(r, 100))
    assert.ok((await readdir(uploadDir)).length > 0, 'the upload was being written')
    socket.destroy()
    await emptied(uploadDir)
  })

  it('an upload past the limit without a declared length gets a 413 the client can read, and leaves no file', async () => {
    const socket = connect(host.port, '127.0.0.1')
    let reply = ''
    socket.setEncoding('utf8')
    socket.on('data', (c: string) => (reply += c))
    const closed = new Promise<string | undefined>((resolve) => {
      socket.on('error', (e: NodeJS.ErrnoException) => resolve(e.code))
      socket.on('close', () => resolve(undefined))
    })
    await new Promise((r) => socket.once('connect', r))
    socket.write(uploadHead(host, { 'transfer-encoding': 'chunked' }))
    const chunk = Buffer.alloc(16 * 1024, 1)
    // Keep sending past the limit, as a browser does until it sees the reply.
    for (let i = 0; i < 48 && !reply.includes('\r\n\r\n'); i++) {
      socket.write(`${chunk.length.toString(16)}\r\n`)
      socket.write(chunk)
      socket.write('\r\n')
      await new Promise((r) => setTimeout(r, 20))
    }
    socket.end('0\r\n\r\n')
    const error = await closed
    assert.match(reply, /^HTTP\/1\.1 413/, `got ${JSON.stringify(reply.slice(0, 80))} (socket error ${error})`)
    assert.match(reply, /larger than the 524288-byte limit/)
    await emptied(uploadDir)
  })

  it('an upload whose body stops arriving times out with a 408, and leaves no file', async () => {
    const socket = connect(host.port, '127.0.0.1')
    let reply = ''
    socket.setEncoding('utf8')
    socket.on('data', (c: string) => (reply += c))
    socket.on('error', () => {})
    const closed = new Promise((r) => socket.on('close', r))
    await new Promise((r) => socket.once('connect', r))
    socket.write(uploadHead(host, { 'content-length': UPLOAD_LIMIT - 1 }))
    socket.write(Buffer.alloc(1000, 7))
    const started = Date.now()
    await closed
    assert.ok(Date.now() - started < IDLE_MS + 3000, `closed after ${Date.now() - started} ms`)
    assert.match(reply, /^HTTP\/1\.1 408/, JSON.stringify(reply.slice(0, 80)))
    await emptied(uploadDir)
  })

  it('an upload under way when the host closes leaves no file', async () => {
    const other = await startWebHost({ session, staticDir, maxUploadBytes: UPLOAD_LIMIT, uploadDir, uploadIdleMs: 60_000 })
    const socket = connect(other.port, '127.0.0.1')
    socket.on('error', () => {})
    await new Promise((r) => socket.once('connect', r))
    socket.write(uploadHead(other, { 'content-length': UPLOAD_LIMIT - 1 }))
    socket.write(Buffer.alloc(1000, 7))
    await new Promise((r) => setTimeout(r, 100))
    assert.ok((await readdir(uploadDir)).length > 0, 'the upload was being written')
    await other.close()
    assert.deepEqual(await readdir(uploadDir), [], 'removed by the time close() resolves')
    socket.destroy()
  })

  it('no error that reaches the browser names a server path: a sample, an upload, the file the host was started with', async () => {
    const samplesDir = join(ROOT, 'resources', 'samples')
    const paths = [samplesDir, uploadDir, staticDir, tmpdir(), ROOT]
    const noPath = (text: string, what: string) => {
      for (const p of paths) assert.ok(!text.includes(p), `${what} names ${p}: ${text}`)
    }
    // A sample's name that is not a trace (the samples' index).
    const sample = json(await post(host, 'trace:openSample', JSON.stringify({ name: 'samples.json' })))
    const sampleStatus = await settle(host, sample.result.jobId)
    assert.equal(sampleStatus.state, 'failed')
    noPath(JSON.stringify(sampleStatus), 'a sample that is not a trace')
    assert.match(sampleStatus.error!.message, /samples\.json/, 'named as the user asked for it')
    // A sample that does not exist.
    const missing = json(await post(host, 'trace:openSample', JSON.stringify({ name: 'no-such.pickle' })))
    const missingStatus = await settle(host, missing.result.jobId)
    assert.equal(missingStatus.state, 'failed')
    noPath(JSON.stringify(missingStatus), 'a missing sample')
    // An upload that is not a trace.
    const upload = json(await post(host, 'trace:openBytes', Buffer.from('not a trace at all'), { 'x-file-name': 'junk.bin' }))
    const uploadStatus = await settle(host, upload.result.jobId)
    assert.equal(uploadStatus.state, 'failed')
    noPath(JSON.stringify(uploadStatus), 'a bad upload')
    assert.match(uploadStatus.error!.message, /junk\.bin/)
    // The file the host was started with, gone since: through openRecent and openPath.
    const info = json(await post(host, 'app:info', '')).result
    await rm(startedWith)
    const recent = json(await post(host, 'trace:openRecent', JSON.stringify({ key: info.initialFile })))
    const recentStatus = await settle(host, recent.result.jobId)
    assert.equal(recentStatus.state, 'failed')
    noPath(JSON.stringify(recentStatus), 'a recent file that is gone')
    assert.match(recentStatus.error!.message, /started-with\.pickle/)
    const byPath = json(await post(host, 'trace:openPath', JSON.stringify({ path: startedWith })))
    const byPathStatus = await settle(host, byPath.result.jobId)
    assert.equal(byPathStatus.state, 'failed')
    noPath(JSON.stringify(byPathStatus), 'a path that is gone')
    // Refusals name only what the client sent.
    const refused = await post(host, 'trace:openPath', JSON.stringify({ path: '/etc/passwd' }))
    assert.equal(refused.status, 400)
    noPath(refused.body, 'a refused path')
  })
})
