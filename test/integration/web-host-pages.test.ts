// Open traces are bounded and freed in the web host (`vramscope serve`): each page (the id its
// client sends in x-vramscope-page) keeps its last few traces, the session a few in all; a trace
// closed to stay within a limit answers 404 naming that limit; `trace:close` frees one trace,
// `page:close` (sent as the page goes away) all of a page's, and a page that stops calling for
// the idle time is closed as well.
import assert from 'node:assert/strict'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'

import type { JobStatus } from '../../src-shared/contract.ts'
import { AppSession } from '../../src-main/services/app-session.ts'
import { startWebHost, type WebHost } from '../../src-main/web/server.ts'
import { postApi } from '../helpers/web-host.ts'

const ROOT = join(import.meta.dirname, '..', '..')
const PER_PAGE = 2
const IN_ALL = 4
const IDLE_MS = 400

let host: WebHost
let session: AppSession
let staticDir: string

const post = (channel: string, arg: unknown, page?: string, to = host) =>
  postApi(
    to,
    channel,
    arg === undefined ? '' : JSON.stringify(arg),
    { 'content-type': 'application/json', ...(page !== undefined && { 'x-vramscope-page': page }) },
    'latin1',
  )

const json = (r: { body: string }) => JSON.parse(r.body) as { ok: boolean; result?: any; error?: { code: string; message: string } }

/** Opens a sample in `page`; returns its trace id. */
async function open(page: string): Promise<string> {
  const { jobId } = json(await post('trace:openSample', { name: 'h100-inference-buddy.vramscope' }, page)).result
  for (;;) {
    const status = json(await post('job:status', { jobId, waitMs: 200 }, page)).result as JobStatus
    if (status.state === 'done') break
    assert.equal(status.state, 'running', JSON.stringify(status.error))
  }
  return json(await post('job:result', { jobId }, page)).result.traceId
}

const dataStatus = async (traceId: string, page: string) => (await post('trace:data', { traceId }, page)).status

describe('web host: open traces per page and in all', () => {
  before(async () => {
    staticDir = await mkdtemp(join(tmpdir(), 'vramscope-pages-'))
    await writeFile(join(staticDir, 'index.html'), '<!doctype html><title>vramscope</title>')
    session = new AppSession({
      version: 'test',
      host: 'web',
      samplesDir: join(ROOT, 'resources', 'samples'),
      allowedPaths: new Set(),
      maxTracesPerPage: PER_PAGE,
      maxTracesOpen: IN_ALL,
    })
    host = await startWebHost({ session, staticDir, pageIdleMs: 600_000 })
  })
  after(async () => {
    await host.close()
    await rm(staticDir, { recursive: true, force: true })
  })

  it(`a page keeps its last ${PER_PAGE} traces: an older one answers 404 naming the limit`, async () => {
    const ids = []
    for (let i = 0; i < 5; i++) ids.push(await open('page-a'))
    for (const id of ids.slice(-PER_PAGE)) assert.equal(await dataStatus(id, 'page-a'), 200)
    const old = await post('trace:data', { traceId: ids[0] }, 'page-a')
    assert.equal(old.status, 404)
    assert.match(json(old).error!.message, new RegExp(`${PER_PAGE} open traces a page`))
    assert.ok(session.openTraces <= IN_ALL, `${session.openTraces} open`)
    await post('page:close', undefined, 'page-a')
  })

  it(`the session keeps ${IN_ALL} traces in all, the least recently used closed first`, async () => {
    const ids = []
    for (let i = 0; i < 6; i++) ids.push(await open(`page-${i}`))
    assert.equal(session.openTraces, IN_ALL)
    const old = await post('trace:data', { traceId: ids[0] }, 'page-0')
    assert.equal(old.status, 404)
    assert.match(json(old).error!.message, new RegExp(`${IN_ALL} open traces in all`))
    for (let i = 0; i < 6; i++) await post('page:close', undefined, `page-${i}`)
    assert.equal(session.openTraces, 0)
  })

  it('trace:close frees one trace, page:close all of a page, and a page gone quiet is closed after the idle time', async () => {
    const a = await open('page-b')
    const b = await open('page-b')
    assert.equal(json(await post('trace:close', { traceId: a }, 'page-b')).result.closed, true)
    assert.equal(await dataStatus(a, 'page-b'), 404)
    assert.equal(await dataStatus(b, 'page-b'), 200)
    assert.equal(json(await post('page:close', undefined, 'page-b')).ok, true)
    assert.equal(await dataStatus(b, 'page-b'), 404)
    assert.equal(session.openTraces, 0)

    const quiet = await open('page-quiet')
    const alive = await open('page-alive')
    // A host with a short idle time, on the same session (the other's sweep waits 10 minutes).
    const quick = await startWebHost({ session, staticDir, pageIdleMs: IDLE_MS })
    try {
      for (let waited = 0; waited < IDLE_MS * 3; waited += IDLE_MS / 4) {
        await post('page:alive', undefined, 'page-alive', quick)
        await new Promise((r) => setTimeout(r, IDLE_MS / 4))
      }
    } finally {
      await quick.close()
    }
    assert.equal(await dataStatus(alive, 'page-alive'), 200, 'a page that keeps calling keeps its trace')
    const gone = await post('trace:data', { traceId: quiet }, 'page-quiet')
    assert.equal(gone.status, 404)
    assert.match(json(gone).error!.message, /page/)
  })
})
