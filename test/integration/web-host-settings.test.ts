// Recorded settings and the lab's arguments over the web host as `vramscope serve` runs it (its
// session in a worker process): a snapshot whose allocator_settings PyTorch would refuse opens and
// runs the lab (never 500 INTERNAL), its report ranked without the bad item; configurations that
// would fail later (a number past 2^53, a fraction that leaves 0 B) are refused at whatif:start,
// naming the configuration; a what-if row opened through replay:start (the compare view) keeps its
// limit and fails where the row failed, the recorded out-of-memory served as its request.
import assert from 'node:assert/strict'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'

import { decodeBundle } from '../../src-shared/bundle.ts'
import type { WhatifReport } from '../../src-shared/whatif-report.ts'
import { startWebHost, type WebHost } from '../../src-main/web/server.ts'
import { workerSession, type WorkerSession } from '../../src-main/web/worker-session.ts'
import { pageApi, postApi } from '../helpers/web-host.ts'

const ROOT = join(import.meta.dirname, '..', '..')
const REAL_JSON = join(ROOT, 'test/fixtures/pytorch/real/forms/oom_fraction__default.json')

let host: WebHost
let session: WorkerSession
let dir: string
let file: string

const { post, json, settle } = pageApi(() => host)

describe('recorded settings and the lab over the web host', () => {
  let traceId: string
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'vramscope-settings-host-'))
    await writeFile(join(dir, 'index.html'), '<!doctype html><title>vramscope</title>')
    const snapshot = JSON.parse(await readFile(REAL_JSON, 'utf8')) as { allocator_settings: Record<string, unknown> }
    const { PYTORCH_CUDA_ALLOC_CONF: _, ...settings } = snapshot.allocator_settings
    snapshot.allocator_settings = { ...settings, max_split_size: 2 ** 20, garbage_collection_threshold: 0.6 }
    file = join(dir, 'split-1MiB.json')
    await writeFile(file, JSON.stringify(snapshot))
    session = workerSession({ version: 'test', host: 'web', samplesDir: join(ROOT, 'resources', 'samples'), allowedPaths: new Set([file]) })
    host = await startWebHost({ session, staticDir: dir })
    const open = json(await post('trace:openPath', { path: file }))
    assert.ok(open.ok, JSON.stringify(open))
    assert.equal((await settle(open.result.jobId)).state, 'done')
    traceId = json(await post('job:result', { jobId: open.result.jobId })).result.traceId
  })
  after(async () => {
    await host.close()
    await session.close()
    await rm(dir, { recursive: true, force: true })
  })

  it('runs the lab on a snapshot with a recorded max_split_size PyTorch refuses, without it', async () => {
    const started = await post('whatif:start', { traceId, confs: ['recorded', ''] })
    assert.equal(started.status, 200, started.body)
    const status = await settle(json(started).result.jobId)
    assert.equal(status.state, 'done', JSON.stringify(status))
    const report = json(await post('whatif:result', { jobId: json(started).result.jobId })).result as WhatifReport
    assert.equal(report.recordedConf, 'garbage_collection_threshold:0.6')
    assert.ok(report.rows.some((r) => r.kind === 'recorded' && r.rank > 0))
  })

  it("replays a what-if row under its limit with the row's failures: the recorded out-of-memory served as its request", async () => {
    const started = await post('whatif:start', { traceId, confs: ['', 'expandable_segments:True'] })
    assert.equal((await settle(json(started).result.jobId)).state, 'done')
    const report = json(await post('whatif:result', { jobId: json(started).result.jobId })).result as WhatifReport
    assert.equal(report.limit.source, 'implied')
    for (const row of report.rows) {
      assert.ok(row.failures > 0, `${row.label} fails under the implied limit`)
      const replay = json(await post('replay:start', { traceId, strategies: row.replay.strategies, labels: [row.replay.label], recordedSettings: false }))
      assert.equal((await settle(replay.result.jobId)).state, 'done')
      const bundle = await postApi(host, 'replay:result', JSON.stringify({ jobId: replay.result.jobId }), { 'x-vramscope-page': 'page-1' }, 'latin1')
      const bytes = Buffer.from(bundle.body, 'latin1')
      const meta = decodeBundle(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength)).meta as {
        strategies: { name: string; summary: Record<string, number> }[]
      }
      const replayed = meta.strategies.find((s) => s.name === row.replay.label)!
      assert.equal(replayed.summary['failures'], row.failures, `${row.label}: ${JSON.stringify(replayed.summary)}`)
      assert.equal(replayed.summary['firstFailureEvent'], row.firstFailureEvent)
    }
  })

  it('refuses at whatif:start a number past 2^53 and a fraction that leaves 0 B, naming the configuration', async () => {
    const big = await post('whatif:start', { traceId, confs: ['max_split_size_mb:1000000000000000000000000000000'] })
    assert.equal(big.status, 400, big.body)
    assert.match(json(big).error!.message, /^configuration 1 'max_split_size_mb:1000/)
    assert.doesNotMatch(json(big).error!.message, /1e\+30|Infinity/)
    const tiny = await post('whatif:start', { traceId, confs: ['per_process_memory_fraction:1e-12'] })
    assert.equal(tiny.status, 400, tiny.body)
    assert.match(json(tiny).error!.message, /^configuration 1 'per_process_memory_fraction:1e-12': .*0 bytes/)
  })
})
