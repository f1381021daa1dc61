// Load: the web host (`vramscope serve`) under many concurrent clients on loopback keeps answering
// every request correctly within a bounded time: 50 clients, each with its own keep-alive
// connection, send a few hundred requests each, a mix of info, job status, the trace's column
// bundle, replays started and collected, wrong tokens (401) and malformed bodies (400). Every reply
// is checked, not only its status. VRAMSCOPE_LOAD_CLIENTS and VRAMSCOPE_LOAD_REQUESTS widen it.
import assert from 'node:assert/strict'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { Agent, request } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, it } from 'node:test'

import { decodeBundle } from '../../src-shared/bundle.ts'
import type { JobStatus } from '../../src-shared/contract.ts'
import { AppSession } from '../../src-main/services/app-session.ts'
import { startWebHost, type WebHost } from '../../src-main/web/server.ts'

const ROOT = join(import.meta.dirname, '..', '..')
const CLIENTS = Number(process.env['VRAMSCOPE_LOAD_CLIENTS'] ?? 50)
const REQUESTS = Number(process.env['VRAMSCOPE_LOAD_REQUESTS'] ?? 200)
const BUDGET_MS = 90_000

interface Reply {
  status: number
  body: Buffer
}

let host: WebHost
let staticDir: string
let traceId: string
let events: number

function post(agent: Agent, channel: string, body: string, token = host.token): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port: host.port, method: 'POST', path: `/api/${channel}`, agent, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' } },
      (res) => {
        const chunks: Buffer[] = []
        res.on('data', (c: Buffer) => chunks.push(c))
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }))
        res.on('error', reject)
      },
    )
    req.on('error', reject)
    req.end(body)
  })
}

const json = (r: Reply) => JSON.parse(r.body.toString('utf8')) as { ok: boolean; result?: any; error?: { code: string; message: string } }

async function settle(agent: Agent, jobId: string): Promise<JobStatus> {
  for (;;) {
    const status = json(await post(agent, 'job:status', JSON.stringify({ jobId }))).result as JobStatus
    if (status.state !== 'running') return status
    await new Promise((r) => setTimeout(r, 10))
  }
}

before(async () => {
  const session = new AppSession({ version: 'test', host: 'web', samplesDir: join(ROOT, 'resources', 'samples'), allowedPaths: new Set() })
  staticDir = await mkdtemp(join(tmpdir(), 'vramscope-load-'))
  await writeFile(join(staticDir, 'index.html'), '<!doctype html><title>vramscope</title>')
  host = await startWebHost({ session, staticDir })
  const agent = new Agent({ keepAlive: true })
  const { jobId } = json(await post(agent, 'trace:openSample', JSON.stringify({ name: 'convnet_varimg.pickle' }))).result
  assert.equal((await settle(agent, jobId)).state, 'done')
  const summary = json(await post(agent, 'job:result', JSON.stringify({ jobId }))).result
  traceId = summary.traceId
  events = summary.events
  agent.destroy()
})
after(async () => {
  await host?.close()
  await rm(staticDir, { recursive: true, force: true })
})

/** One client's requests, in order; each reply checked. Returns how many of each kind it sent. */
async function client(index: number): Promise<Record<string, number>> {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 })
  const sent: Record<string, number> = {}
  try {
    for (let k = 0; k < REQUESTS; k++) {
      const kind = (index * 7 + k) % 20
      if (kind < 8) {
        const r = await post(agent, 'app:info', '')
        assert.equal(r.status, 200)
        assert.ok(json(r).result.strategies.some((s: { name: string }) => s.name === 'caching'))
        sent['info'] = (sent['info'] ?? 0) + 1
      } else if (kind < 12) {
        const r = await post(agent, 'trace:data', JSON.stringify({ traceId }))
        assert.equal(r.status, 200)
        const bundle = decodeBundle(r.body.buffer.slice(r.body.byteOffset, r.body.byteOffset + r.body.byteLength) as ArrayBuffer)
        assert.equal(bundle.arrays['kind']!.length, events, 'the whole column, every time')
        sent['data'] = (sent['data'] ?? 0) + 1
      } else if (kind < 14) {
        const r = await post(agent, 'app:info', '', 'not-the-token')
        assert.equal(r.status, 401)
        assert.equal(json(r).error?.code, 'UNAUTHORIZED')
        sent['unauthorized'] = (sent['unauthorized'] ?? 0) + 1
      } else if (kind < 16) {
        const r = await post(agent, 'job:status', '{"jobId":')
        assert.equal(r.status, 400)
        assert.match(json(r).error!.message, /not JSON/)
        sent['malformed'] = (sent['malformed'] ?? 0) + 1
      } else if (kind === 16 && k % 40 === 16) {
        // A replay now and then: the host keeps serving the others while it runs.
        const start = json(await post(agent, 'replay:start', JSON.stringify({ traceId, strategies: 'slab', includeStored: false })))
        assert.ok(start.ok, JSON.stringify(start.error))
        assert.equal((await settle(agent, start.result.jobId)).state, 'done')
        const r = await post(agent, 'replay:result', JSON.stringify({ jobId: start.result.jobId }))
        const bundle = decodeBundle(r.body.buffer.slice(r.body.byteOffset, r.body.byteOffset + r.body.byteLength) as ArrayBuffer)
        assert.deepEqual((bundle.meta as { strategies: { name: string }[] }).strategies.map((s) => s.name), ['slab'])
        sent['replay'] = (sent['replay'] ?? 0) + 1
      } else {
        const r = await post(agent, 'trace:data', JSON.stringify({ traceId: `no-such-${index}-${k}` }))
        assert.equal(r.status, 404)
        sent['unknown'] = (sent['unknown'] ?? 0) + 1
      }
    }
  } finally {
    agent.destroy()
  }
  return sent
}

it(`web host: ${CLIENTS} concurrent clients x ${REQUESTS} requests each on loopback all get correct answers within ${BUDGET_MS / 1000} s`, { timeout: BUDGET_MS + 30_000 }, async (t) => {
  const started = performance.now()
  let timer: NodeJS.Timeout | undefined
  const overrun = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`not done within ${BUDGET_MS / 1000} s`)), BUDGET_MS)
  })
  try {
    const results = await Promise.race([Promise.all(Array.from({ length: CLIENTS }, (_, i) => client(i))), overrun])
    const ms = performance.now() - started
    const totals: Record<string, number> = {}
    for (const r of results) for (const [kind, n] of Object.entries(r)) totals[kind] = (totals[kind] ?? 0) + n
    const all = Object.values(totals).reduce((a, b) => a + b, 0)
    t.diagnostic(`${all} requests in ${(ms / 1000).toFixed(1)} s (${Math.round(all / (ms / 1000))}/s): ${JSON.stringify(totals)}`)
    assert.equal(all, CLIENTS * REQUESTS)
    for (const kind of ['info', 'data', 'unauthorized', 'malformed', 'replay', 'unknown']) assert.ok((totals[kind] ?? 0) > 0, `some ${kind} requests were made`)
    // Still answering afterwards.
    const agent = new Agent()
    assert.equal((await post(agent, 'app:info', '')).status, 200)
  } finally {
    clearTimeout(timer)
  }
})
