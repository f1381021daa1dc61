// The device a replay runs on is never guessed silently (issue 29): with no cap, `vramscope replay`
// and the app's replay job run every strategy on the device the file implies (the lab's rule,
// src-main/services/replay/device.ts), and say which device it is and where it came from. A
// snapshot of 2^45-2^52 B blocks whose out-of-memory says the device held at least 3264 TiB replays
// to its recorded peak with only that out-of-memory failing, not on an 80 GiB device that fails
// every request.
import assert from 'node:assert/strict'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'

import { writeFieldCorpus, type ShapeFigures } from '../../scripts/fixtures/field-corpus.ts'
import { decodeBundle } from '../../src-shared/bundle.ts'
import type { Device } from '../../src-shared/device.ts'
import { ASSUMED_DEVICE_BYTES } from '../../src-shared/device.ts'
import { startWebHost, type WebHost } from '../../src-main/web/server.ts'
import { workerSession, type WorkerSession } from '../../src-main/web/worker-session.ts'
import { fixture, shown, vramscope, vramscopeJson } from '../helpers/cli.ts'
import { pageApi } from '../helpers/web-host.ts'

const ROOT = join(import.meta.dirname, '..', '..')
const WITHIN = 0.01

let dir: string
let huge: ShapeFigures
let file: string

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'vramscope-replay-device-'))
  huge = writeFieldCorpus(dir, ['huge-sizes'], ['pickle'])[0]!
  file = huge.files.pickle!
})
after(async () => {
  if (dir) await rm(dir, { recursive: true, force: true })
})

const within = (actual: number, expected: number, what: string) =>
  assert.ok(
    Math.abs(actual - expected) <= WITHIN * expected,
    `${what}: ${actual} B, ${(((actual - expected) / expected) * 100).toFixed(2)} % off ${expected} B`,
  )

interface ReplayJson {
  device: Device
  strategies: { name: string; recorded: boolean; summary: Record<string, number> }[]
}

describe('vramscope replay with no cap runs on the device the file implies', () => {
  it('replays 2^45-2^52 B blocks to the recorded peak, failing only the recorded out-of-memory', async () => {
    const result = await vramscopeJson<ReplayJson>(['replay', file, '-s', 'caching:preset=pytorch'])
    const replayed = result.strategies.find((s) => !s.recorded)!
    assert.equal(replayed.summary['failures'], huge.ooms, `failures: ${JSON.stringify(replayed.summary)}`)
    within(replayed.summary['peakReserved']!, huge.peakReserved, 'peak reserved')
    // The device is the out-of-memory's free memory plus reserved at it: at least 3264 TiB.
    assert.equal(result.device.source, 'oom')
    assert.equal(result.device.bytes, huge.peakReserved + huge.oomDeviceFree!)
  })

  it('names the device and where it came from in its output', async () => {
    const run = await vramscope(['replay', file, '-s', 'caching:preset=pytorch'])
    assert.equal(run.code, 0, shown(run))
    assert.match(
      run.stdout,
      /^device: at least 3\.19 PiB, the free memory plus reserved at the recorded out-of-memory \(the file names no GPU; --gpu sets it\)$/m,
    )
  })

  it('says a file with no GPU in it runs on an assumed H100 80GB, 79.2 GiB, and --gpu sets another', async () => {
    const input = fixture('rmm/clock-time.csv')
    const assumed = await vramscope(['replay', input, '-s', 'caching:preset=pytorch'])
    assert.equal(assumed.code, 0, shown(assumed))
    assert.match(assumed.stdout, /^device: assumed an H100 80GB, 79\.2 GiB \(the file names no GPU; --gpu sets it\)$/m)
    const json = await vramscopeJson<ReplayJson>(['replay', input, '-s', 'caching:preset=pytorch'])
    assert.deepEqual(json.device, { bytes: ASSUMED_DEVICE_BYTES, source: 'assumed' })
    const given = await vramscopeJson<ReplayJson>(['replay', input, '-s', 'caching:preset=pytorch', '--gpu', '141GB'])
    assert.deepEqual(given.device, { bytes: 141e9, source: 'option' })
  })

  it('refuses a --gpu that is no size, naming it', async () => {
    const run = await vramscope(['replay', file, '-s', 'caching:preset=pytorch', '--gpu', 'lots'])
    assert.notEqual(run.code, 0)
    assert.match(run.stderr, /--gpu: 'lots' is not a size/)
  })

  it('a cap still replaces the device', async () => {
    const result = await vramscopeJson<ReplayJson>(['replay', file, '-s', 'caching:preset=pytorch', '--cap', '1GiB'])
    const replayed = result.strategies.find((s) => !s.recorded)!
    assert.ok(replayed.summary['peakReserved']! <= 2 ** 30, `peak reserved ${replayed.summary['peakReserved']} under a 1 GiB cap`)
    assert.ok(replayed.summary['failures']! > huge.ooms)
  })
})

describe('the served app replays with no cap on the device the file implies', () => {
  let host: WebHost
  let session: WorkerSession
  let staticDir: string
  const { post, json, settle } = pageApi(() => host)

  before(async () => {
    staticDir = await mkdtemp(join(tmpdir(), 'vramscope-replay-device-host-'))
    await writeFile(join(staticDir, 'index.html'), '<!doctype html><title>vramscope</title>')
    session = workerSession({ version: 'test', host: 'web', samplesDir: join(ROOT, 'resources', 'samples'), allowedPaths: new Set([file]) })
    host = await startWebHost({ session, staticDir })
  })
  after(async () => {
    await host?.close()
    await session?.close()
    if (staticDir) await rm(staticDir, { recursive: true, force: true })
  })

  it('replays the recorded peak with only the recorded out-of-memory failing, and the bundle names the device', async () => {
    const open = json(await post('trace:openPath', { path: file }))
    assert.ok(open.ok, JSON.stringify(open))
    assert.equal((await settle(open.result.jobId)).state, 'done')
    const traceId = json(await post('job:result', { jobId: open.result.jobId })).result.traceId
    const replay = json(await post('replay:start', { traceId, strategies: 'caching:preset=pytorch' }))
    assert.ok(replay.ok, JSON.stringify(replay))
    assert.equal((await settle(replay.result.jobId)).state, 'done')
    const bundle = await post('replay:result', { jobId: replay.result.jobId })
    const bytes = Buffer.from(bundle.body, 'latin1')
    const meta = decodeBundle(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength)).meta as {
      device?: Device
      strategies: { recorded: boolean; summary: Record<string, number> }[]
    }
    const replayed = meta.strategies.find((s) => !s.recorded)!
    assert.equal(replayed.summary['failures'], huge.ooms, `failures: ${JSON.stringify(replayed.summary)}`)
    within(replayed.summary['peakReserved']!, huge.peakReserved, 'peak reserved')
    assert.deepEqual(meta.device, { bytes: huge.peakReserved + huge.oomDeviceFree!, source: 'oom' })
    // One strategy's bundle, as the page fetches them side by side, says it too.
    const one = await post('replay:result', { jobId: replay.result.jobId, strategy: 0 })
    const oneBytes = Buffer.from(one.body, 'latin1')
    const oneMeta = decodeBundle(oneBytes.buffer.slice(oneBytes.byteOffset, oneBytes.byteOffset + oneBytes.byteLength)).meta as { device?: Device }
    assert.deepEqual(oneMeta.device, meta.device)
  })
})
