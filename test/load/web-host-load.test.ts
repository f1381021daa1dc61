// Load: the web host (`vramscope serve`) under many concurrent clients on loopback keeps answering
// every request correctly within a bounded time: 50 clients, each with its own keep-alive
// connection, send a few hundred requests each, a mix of info, job status, the trace's column
// bundle, replays started and collected, wrong tokens (401) and malformed bodies (400). Every reply
// is checked, not only its status. VRAMSCOPE_LOAD_CLIENTS and VRAMSCOPE_LOAD_REQUESTS widen it.
// The second test runs the real `vramscope serve` through a loop of opens, uploads and abandoned
// pages and checks it ends with flat memory and no upload file left (VRAMSCOPE_LOAD_SECONDS).
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises'
import { Agent, request } from 'node:http'
import { connect } from 'node:net'
import { createInterface } from 'node:readline'
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
      {
        host: '127.0.0.1',
        port: host.port,
        method: 'POST',
        path: `/api/${channel}`,
        agent,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      },
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
    if (status.state !== 'running' && status.state !== 'queued') return status
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
        assert.deepEqual(
          (bundle.meta as { strategies: { name: string }[] }).strategies.map((s) => s.name),
          ['slab'],
        )
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

it(
  `web host: ${CLIENTS} concurrent clients x ${REQUESTS} requests each on loopback all get correct answers within ${BUDGET_MS / 1000} s`,
  { timeout: BUDGET_MS + 30_000 },
  async (t) => {
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
      for (const kind of ['info', 'data', 'unauthorized', 'malformed', 'replay', 'unknown'])
        assert.ok((totals[kind] ?? 0) > 0, `some ${kind} requests were made`)
      // Still answering afterwards.
      const agent = new Agent()
      assert.equal((await post(agent, 'app:info', '')).status, 200)
    } finally {
      clearTimeout(timer)
    }
  },
)

// Opens, uploads and pages that go away without a word, in a loop against a real `vramscope serve`
// (the bin script, loopback): its memory stays flat and its upload folder ends empty. Each round
// is a page load (a new page id) that opens a sample, reads its columns, replays it, uploads a
// snapshot and opens it, starts an upload it aborts, and is then abandoned (a reload: no
// page:close) or, one time in four, closed. VRAMSCOPE_LOAD_SECONDS sets how long (default 15 s).
const LOOP_SECONDS = Number(process.env['VRAMSCOPE_LOAD_SECONDS'] ?? 15)
/** How far the server's resident memory may grow from after the first rounds to the end. */
const RSS_GROWTH_LIMIT = 100 * 1024 ** 2

/** Resident memory of `pid` and its child processes (serve's worker), bytes. */
function rssOf(pid: number): number {
  let children: number[] = []
  try {
    children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number)
  } catch {
    // Gone meanwhile.
  }
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8')
    return Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) * 1024 + children.reduce((n, child) => n + rssOf(child), 0)
  } catch {
    return 0
  }
}

it(
  `vramscope serve: ${LOOP_SECONDS} s of opens, uploads, aborted uploads and abandoned pages leave memory flat and no upload file behind`,
  { timeout: (LOOP_SECONDS + 120) * 1000 },
  async (t) => {
    const uploadDir = await mkdtemp(join(tmpdir(), 'vramscope-load-uploads-'))
    const child = spawn(process.execPath, [join(ROOT, 'bin', 'vramscope.mjs'), 'serve', '--json', '--upload-dir', uploadDir], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stderr = ''
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()))
    const agent = new Agent({ keepAlive: true, maxSockets: 8 })
    try {
      const served = await new Promise<{ port: number; token: string }>((resolve, reject) => {
        createInterface({ input: child.stdout! }).once('line', (line) => resolve(JSON.parse(line)))
        child.once('exit', (code) => reject(new Error(`vramscope serve exited ${code}:\n${stderr}`)))
      })
      const snapshot = readFileSync(join(ROOT, 'test', 'fixtures', 'pytorch', 'transformer_varseq.pickle'))
      const call = (channel: string, body: string | Buffer, page: string, headers: Record<string, string> = {}) =>
        new Promise<Reply>((resolve, reject) => {
          const req = request(
            {
              host: '127.0.0.1',
              port: served.port,
              method: 'POST',
              path: `/api/${channel}`,
              agent,
              headers: { authorization: `Bearer ${served.token}`, 'x-vramscope-page': page, ...headers },
            },
            (res) => {
              const chunks: Buffer[] = []
              res.on('data', (c: Buffer) => chunks.push(c))
              res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }))
            },
          )
          req.on('error', reject)
          req.end(body)
        })
      const done = async (jobId: string, page: string) => {
        for (;;) {
          const status = json(await call('job:status', JSON.stringify({ jobId, waitMs: 500 }), page)).result as JobStatus
          if (status.state !== 'running' && status.state !== 'queued') return status
        }
      }
      const abortedUpload = () =>
        new Promise<void>((resolve) => {
          const socket = connect(served.port, '127.0.0.1', () => {
            socket.write(
              `POST /api/trace:openBytes HTTP/1.1\r\nhost: 127.0.0.1:${served.port}\r\nauthorization: Bearer ${served.token}\r\nx-file-name: gone.pickle\r\ncontent-length: ${snapshot.length}\r\n\r\n`,
            )
            socket.write(snapshot.subarray(0, snapshot.length >> 1), () => setTimeout(() => socket.destroy(), 20))
          })
          socket.on('error', () => {})
          socket.on('close', () => resolve())
        })
      let rounds = 0
      const round = async (page: string) => {
        const open = json(await call('trace:openSample', JSON.stringify({ name: 'convnet_varimg.pickle' }), page)).result
        assert.equal((await done(open.jobId, page)).state, 'done')
        const { traceId } = json(await call('job:result', JSON.stringify({ jobId: open.jobId }), page)).result
        assert.equal((await call('trace:data', JSON.stringify({ traceId }), page)).status, 200)
        const replay = json(await call('replay:start', JSON.stringify({ traceId, strategies: 'slab' }), page)).result
        assert.equal((await done(replay.jobId, page)).state, 'done')
        assert.equal((await call('replay:result', JSON.stringify({ jobId: replay.jobId }), page)).status, 200)
        const upload = json(await call('trace:openBytes', snapshot, page, { 'x-file-name': 'upload.pickle', 'content-type': 'application/octet-stream' }))
        assert.ok(upload.ok, JSON.stringify(upload.error))
        assert.equal((await done(upload.result.jobId, page)).state, 'done')
        await abortedUpload()
        if (++rounds % 4 === 0) assert.equal((await call('page:close', '', page)).status, 200)
      }
      const pages = 3
      const loop = async (until: number, lane: number) => {
        for (let i = 0; performance.now() < until; i++) await round(`load-${lane}-${i}-${Math.random().toString(36).slice(2, 8)}`)
      }
      const start = performance.now()
      // The first rounds fill what the host keeps by design (caches, the session's open traces).
      await Promise.all(Array.from({ length: pages }, (_, lane) => loop(start + Math.min(5, LOOP_SECONDS / 3) * 1000, lane)))
      const warmRss = rssOf(child.pid!)
      const warmRounds = rounds
      let peakRss = warmRss
      const sampler = setInterval(() => (peakRss = Math.max(peakRss, rssOf(child.pid!))), 200)
      await Promise.all(Array.from({ length: pages }, (_, lane) => loop(start + LOOP_SECONDS * 1000, lane)))
      clearInterval(sampler)
      const endRss = rssOf(child.pid!)
      // Cleanup runs as requests end: give the last aborted upload a moment.
      let left: string[] = []
      for (let i = 0; i < 50; i++) {
        left = await readdir(uploadDir)
        if (left.length === 0) break
        await new Promise((r) => setTimeout(r, 100))
      }
      const mb = (n: number) => `${(n / 1024 ** 2).toFixed(0)} MB`
      t.diagnostic(
        `${rounds} rounds (${warmRounds} to warm up) in ${((performance.now() - start) / 1000).toFixed(1)} s, each an open, a replay, an upload, an aborted upload and an abandoned page; server RSS (with its worker) ${mb(warmRss)} after warm-up, ${mb(peakRss)} at peak, ${mb(endRss)} at the end; ${left.length} entries left in the upload folder`,
      )
      assert.deepEqual(left, [], 'no upload file left behind')
      assert.ok(endRss - warmRss < RSS_GROWTH_LIMIT, `RSS grew ${mb(endRss - warmRss)} (from ${mb(warmRss)} to ${mb(endRss)})`)
    } finally {
      agent.destroy()
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once('exit', r))
        child.kill('SIGTERM')
        await exited
      }
      await rm(uploadDir, { recursive: true, force: true })
    }
  },
)

// One job lifecycle under load against a real `vramscope serve` (loopback only): 4 pages each run
// open / what-if / close cycles, most closing the trace while its what-if still runs, one in five
// after it ended. The worker never restarts (the same process answers throughout, no crash is
// logged), every closed trace's what-if reads cancelled, and memory stays flat.
// VRAMSCOPE_LOAD_CYCLES sets how many cycles in all (default 40; npm run test:load: 1,000).
const CYCLES = Number(process.env['VRAMSCOPE_LOAD_CYCLES'] ?? 40)
const CYCLE_PAGES = 4
/** The whole run's bound: every cycle, however slow the machine, well inside it. */
const CYCLES_BUDGET_MS = 60_000 + CYCLES * 1_000

it(
  `vramscope serve: ${CYCLES} open / what-if / close cycles from ${CYCLE_PAGES} pages keep one worker, cancel every closed trace's what-if and leave memory flat`,
  { timeout: CYCLES_BUDGET_MS + 60_000 },
  async (t) => {
    const child = spawn(process.execPath, [join(ROOT, 'bin', 'vramscope.mjs'), 'serve', '--json'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] })
    let stderr = ''
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()))
    const agent = new Agent({ keepAlive: true, maxSockets: CYCLE_PAGES * 2 })
    try {
      const served = await new Promise<{ url: string; port: number; token: string }>((resolve, reject) => {
        createInterface({ input: child.stdout! }).once('line', (line) => resolve(JSON.parse(line)))
        child.once('exit', (code) => reject(new Error(`vramscope serve exited ${code}:\n${stderr}`)))
      })
      assert.equal(new URL(served.url).hostname, '127.0.0.1', 'serve listens on loopback only')
      const call = async (channel: string, arg: unknown, page: string) => {
        const reply = await new Promise<Reply>((resolve, reject) => {
          const req = request(
            {
              host: '127.0.0.1',
              port: served.port,
              method: 'POST',
              path: `/api/${channel}`,
              agent,
              headers: { authorization: `Bearer ${served.token}`, 'x-vramscope-page': page, 'content-type': 'application/json' },
            },
            (res) => {
              const chunks: Buffer[] = []
              res.on('data', (c: Buffer) => chunks.push(c))
              res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }))
            },
          )
          req.on('error', reject)
          req.end(arg === undefined ? '' : JSON.stringify(arg))
        })
        const body = json(reply)
        assert.ok(body.ok, `${channel}: ${reply.status} ${JSON.stringify(body.error)}`)
        return body.result
      }
      const settled = async (jobId: string, page: string): Promise<JobStatus> => {
        for (;;) {
          const status = (await call('job:status', { jobId, waitMs: 500 }, page)) as JobStatus
          if (status.state !== 'running' && status.state !== 'queued') return status
        }
      }
      // serve's worker processes: its children running the worker's entry (esbuild's service is another child).
      const workers = () => {
        try {
          const children = readFileSync(`/proc/${child.pid}/task/${child.pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number)
          return children.filter((pid) => /worker\.(mjs|ts)/.test(readFileSync(`/proc/${pid}/cmdline`, 'utf8')))
        } catch {
          return []
        }
      }
      let cycles = 0
      const states: Record<string, number> = {}
      const cycle = async (page: string, n: number) => {
        const open = await call('trace:openSample', { name: 'convnet_varimg.pickle' }, page)
        assert.equal((await settled(open.jobId, page)).state, 'done')
        const { traceId } = await call('job:result', { jobId: open.jobId }, page)
        const { jobId } = await call('whatif:start', { traceId, confs: ['recorded', 'expandable_segments:True', 'max_split_size_mb:128'] }, page)
        // One cycle in five lets the lab finish; the others close the trace while it runs.
        if (n % 5 === 4) assert.equal((await settled(jobId, page)).state, 'done')
        assert.deepEqual(await call('trace:close', { traceId }, page), { closed: true })
        const after = (await call('job:status', { jobId }, page)) as JobStatus
        states[after.state] = (states[after.state] ?? 0) + 1
        assert.equal(after.state, 'cancelled', `after its trace was closed: ${JSON.stringify(after)}`)
        assert.equal((await call('job:cancel', { jobId }, page)).cancelled, false, 'a second cancel cancels nothing')
        cycles++
      }
      const lane = async (lane: number, from: number, to: number) => {
        for (let n = from + lane; n < to; n += CYCLE_PAGES) await cycle(`cycles-${lane}`, n)
      }
      const started = performance.now()
      const warm = Math.min(CYCLES, Math.max(CYCLE_PAGES * 2, Math.round(CYCLES / 10)))
      await Promise.all(Array.from({ length: CYCLE_PAGES }, (_, i) => lane(i, 0, warm)))
      const worker = workers()
      assert.equal(worker.length, 1, 'one worker process')
      const warmRss = rssOf(child.pid!)
      let peakRss = warmRss
      const sampler = setInterval(() => (peakRss = Math.max(peakRss, rssOf(child.pid!))), 200)
      let overrun: NodeJS.Timeout | undefined
      try {
        await Promise.race([
          Promise.all(Array.from({ length: CYCLE_PAGES }, (_, i) => lane(i, warm, CYCLES))),
          new Promise(
            (_, reject) => (overrun = setTimeout(() => reject(new Error(`${cycles} of ${CYCLES} cycles in ${CYCLES_BUDGET_MS / 1000} s`)), CYCLES_BUDGET_MS)),
          ),
        ])
      } finally {
        clearInterval(sampler)
        clearTimeout(overrun)
      }
      const endRss = rssOf(child.pid!)
      const mb = (n: number) => `${(n / 1024 ** 2).toFixed(0)} MB`
      t.diagnostic(
        `${cycles} cycles in ${((performance.now() - started) / 1000).toFixed(1)} s from ${CYCLE_PAGES} pages (what-if after close: ${JSON.stringify(states)}); server RSS (with its worker) ${mb(warmRss)} after ${warm} cycles, ${mb(peakRss)} at peak, ${mb(endRss)} at the end`,
      )
      assert.equal(cycles, CYCLES)
      assert.deepEqual(workers(), worker, 'the same worker process throughout: it never restarted')
      assert.doesNotMatch(stderr, /worker process .*(exited|killed)/, 'no worker crash was logged')
      assert.ok(endRss - warmRss < RSS_GROWTH_LIMIT, `RSS grew ${mb(endRss - warmRss)} (from ${mb(warmRss)} to ${mb(endRss)})`)
    } finally {
      agent.destroy()
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once('exit', r))
        child.kill('SIGTERM')
        await exited
      }
    }
  },
)
