// The what-if lab over the web host as `vramscope serve` runs it (its session in a worker
// process): `whatif:start` refuses a configuration PyTorch would refuse, naming it, and a limit it
// cannot read; the grid runs as a job with progress while the host answers other requests; the
// report has 20 and more rows, ranked, with the recorded one; a row's replay opens through
// `replay:start` under its own label; and a run cancelled at once ends cancelled.
import assert from 'node:assert/strict'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'

import { decodeBundle } from '../../src-shared/bundle.ts'
import type { JobStatus } from '../../src-shared/contract.ts'
import type { WhatifReport } from '../../src-shared/whatif-report.ts'
import { startWebHost, type WebHost } from '../../src-main/web/server.ts'
import { workerSession, type WorkerSession } from '../../src-main/web/worker-session.ts'
import { postApi } from '../helpers/web-host.ts'

const ROOT = join(import.meta.dirname, '..', '..')

let host: WebHost
let session: WorkerSession
let staticDir: string

const post = (channel: string, arg: unknown) => postApi(host, channel, JSON.stringify(arg), { 'x-vramscope-page': 'page-1' }, 'latin1')
const json = (r: { body: string }) => JSON.parse(r.body) as { ok: boolean; result?: any; error?: { code: string; message: string } }

async function settle(jobId: string, seen: JobStatus[] = []): Promise<JobStatus> {
  for (;;) {
    const status = json(await post('job:status', { jobId, waitMs: 100 })).result as JobStatus
    seen.push(status)
    if (status.state !== 'running' && status.state !== 'queued') return status
  }
}

describe('the what-if lab over the web host', () => {
  let traceId: string
  before(async () => {
    staticDir = await mkdtemp(join(tmpdir(), 'vramscope-whatif-host-'))
    await writeFile(join(staticDir, 'index.html'), '<!doctype html><title>vramscope</title>')
    session = workerSession({ version: 'test', host: 'web', samplesDir: join(ROOT, 'resources', 'samples'), allowedPaths: new Set() })
    host = await startWebHost({ session, staticDir })
    const open = json(await post('trace:openSample', { name: 'convnet_varimg.pickle' }))
    assert.equal((await settle(open.result.jobId)).state, 'done')
    traceId = json(await post('job:result', { jobId: open.result.jobId })).result.traceId
  })
  after(async () => {
    await host.close()
    await session.close()
    await rm(staticDir, { recursive: true, force: true })
  })

  it('names a configuration PyTorch would refuse, and a limit it cannot read', async () => {
    const bad = await post('whatif:start', { traceId, confs: ['expandable_segments:True', 'max_split_size_mb:5'] })
    assert.equal(bad.status, 400, bad.body)
    assert.match(json(bad).error!.message, /configuration 2 'max_split_size_mb:5': max_split_size_mb/)
    const typo = await post('whatif:start', { traceId, confs: ['max_split_size:128'] })
    assert.equal(typo.status, 400, typo.body)
    assert.match(json(typo).error!.message, /'max_split_size:128'/)
    const cap = await post('whatif:start', { traceId, cap: 'lots' })
    assert.equal(cap.status, 400, cap.body)
    assert.match(json(cap).error!.message, /^cap: 'lots' is not a size/)
    const notStrings = await post('whatif:start', { traceId, confs: [1] })
    assert.equal(notStrings.status, 400, notStrings.body)
    assert.match(json(notStrings).error!.message, /confs\.0 must be a string/)
  })

  it('runs the grid as a job while the host answers, ranked, with the recorded row', async () => {
    const started = json(await post('whatif:start', { traceId, cap: '80GB' }))
    assert.ok(started.ok, JSON.stringify(started))
    const t0 = performance.now()
    assert.ok(json(await post('page:alive', undefined)).ok)
    assert.ok(performance.now() - t0 < 2000, 'the host answers while the lab runs')
    const seen: JobStatus[] = []
    const status = await settle(started.result.jobId, seen)
    assert.equal(status.state, 'done', JSON.stringify(status))
    const report = json(await post('whatif:result', { jobId: started.result.jobId })).result as WhatifReport
    assert.ok(report.rows.length >= 20, `${report.rows.length} rows`)
    assert.deepEqual(report.limit, { bytes: 80e9, source: 'option' })
    const first = report.rows.find((r) => r.rank === 1)!
    assert.equal(first.failures, 0)
    assert.ok(report.rows.some((r) => r.kind === 'recorded'))
    assert.ok(report.fidelity && report.fidelity.recordedSegments > 0)
    assert.ok(report.rows.every((r) => r.fragmentationAtPeak === null || Number.isFinite(r.fragmentationAtPeak)))
    // Under a limit a PyTorch row's replay carries it as max_reserved, a strategy row's as a cap.
    assert.match(first.replay.strategies, /max_reserved=80000000000/)
    const strategyRow = report.rows.find((r) => r.kind === 'strategy' && r.strategy !== 'caching')!
    assert.equal(strategyRow.replay.cap, '80000000000')

    const replay = json(await post('replay:start', { traceId, strategies: first.replay.strategies, labels: [first.replay.label] }))
    assert.equal((await settle(replay.result.jobId)).state, 'done')
    const bundle = await postApi(host, 'replay:result', JSON.stringify({ jobId: replay.result.jobId }), { 'x-vramscope-page': 'page-1' }, 'latin1')
    const bytes = Buffer.from(bundle.body, 'latin1')
    const names = (
      decodeBundle(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength)).meta as { strategies: { name: string }[] }
    ).strategies.map((s) => s.name)
    assert.deepEqual(names, ['pytorch (recorded)', first.replay.label])
  })

  it('leaves out, with the reason, the strategy rows no pool holds a 2^52 + 512 B block in', async () => {
    const big = 2 ** 52 + 512
    const entry = (action: string, addr: number, size: number, time: number) => ({ action, addr, size, stream: 0, time_us: time, frames: [] })
    const snapshot = JSON.stringify({
      segments: [],
      device_traces: [
        [
          entry('alloc', 2 ** 30, 2 ** 20, 1),
          entry('alloc', 2 ** 40, big, 2),
          entry('free_requested', 2 ** 40, big, 3),
          entry('free_requested', 2 ** 30, 2 ** 20, 4),
        ],
      ],
    })
    const open = json(
      await postApi(host, 'trace:openBytes', Buffer.from(snapshot), {
        'x-vramscope-page': 'page-1',
        'x-file-name': 'big-block.json',
        'content-type': 'application/octet-stream',
      }),
    )
    assert.ok(open.ok, JSON.stringify(open))
    assert.equal((await settle(open.result.jobId)).state, 'done')
    const bigTrace = json(await post('job:result', { jobId: open.result.jobId })).result.traceId
    const started = json(await post('whatif:start', { traceId: bigTrace }))
    assert.ok(started.ok, JSON.stringify(started))
    assert.equal((await settle(started.result.jobId)).state, 'done')
    const report = json(await post('whatif:result', { jobId: started.result.jobId })).result as WhatifReport
    assert.deepEqual(
      report.leftOut?.map((r) => r.strategy),
      ['vmm_growable', 'buddy'],
    )
    assert.match(report.leftOut![1]!.reason, /largest request \(4503599627371008 B\)/)
    assert.ok(report.rows.length >= 20, 'the other rows ran')
    await post('trace:close', { traceId: bigTrace })
  })

  it('cancels a run', async () => {
    const started = json(await post('whatif:start', { traceId }))
    assert.ok(json(await post('job:cancel', { jobId: started.result.jobId })).result.cancelled)
    const status = await settle(started.result.jobId)
    assert.equal(status.state, 'cancelled')
  })
})
