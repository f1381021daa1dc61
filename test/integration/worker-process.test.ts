// The worker process that hosts the native module, driven over the same protocol the desktop app
// uses, forked with Node's child_process (the app forks it with Electron's utilityProcess): real
// files, the real addon. The crash test kills it mid-replay of a generated trace big enough to
// take a while, and checks what the app side then says and that the next request gets a fresh one.
import assert from 'node:assert/strict'
import { existsSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { basename, dirname, join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'

import { decodeBundle } from '../../src-shared/bundle.ts'
import type { JobStatus } from '../../src-shared/contract.ts'
import { firstReplay, restReplay } from '../../src-shared/opening.ts'
import { listedStrategies } from '../../src-shared/wire.ts'
import { DEFAULT_STRATEGIES } from '../../src-main/services/app-session.ts'
import { writeTrace } from '../../src-main/services/trace/file.ts'
import { WorkerClient, WorkerExitedError } from '../../src-main/utility/client.ts'
import { forkNodeWorker } from '../../src-main/utility/node-transport.ts'
import { ensureWorkerBuilt, WORKER_BUNDLE, workerIsStale } from '../../src-main/web/worker-build.ts'
import { BUNDLE_FILE_MIN_BYTES, isBundleFile, takeBundleFile, type BundleFile } from '../../src-main/utility/bundle-file.ts'
import { sampleTrace } from '../helpers/trace-samples.ts'

const SAMPLES = fileURLToPath(new URL('../../resources/samples', import.meta.url))

function newClient(onCrash?: (e: WorkerExitedError) => void, entry?: string): WorkerClient {
  return new WorkerClient({
    spawn: () => forkNodeWorker(entry !== undefined ? { entry } : {}),
    init: { version: 'test', host: 'electron', samplesDir: SAMPLES },
    ...(onCrash && { onCrash }),
  })
}

/** A bundle result's bytes, whether it came as bytes or (large, from a forked worker) as a file. */
async function bytesOf(result: ArrayBuffer | BundleFile): Promise<ArrayBuffer> {
  return isBundleFile(result) ? takeBundleFile(result) : result
}

async function settle(
  client: WorkerClient,
  jobId: string,
  until: (s: JobStatus) => boolean = (s) => s.state !== 'running' && s.state !== 'queued',
): Promise<JobStatus> {
  const deadline = Date.now() + 120_000
  for (;;) {
    const status = await client.call('job:status', { jobId })
    if (until(status)) return status
    if (Date.now() > deadline) throw new Error(`job ${jobId} still ${status.state} (${status.phase}) after 120 s`)
    await new Promise((r) => setTimeout(r, 20))
  }
}

describe('worker process (child_process.fork, the protocol of the utility process)', () => {
  test('opens a sample, sends its columns and a replay as bundles, with progress pushed as it goes', async () => {
    const client = newClient()
    try {
      const info = await client.call('app:info', undefined)
      assert.ok(
        info.strategies.some((s) => s.name === 'caching'),
        'the worker loaded the native addon',
      )
      assert.ok(info.samples.some((s) => s.name === 'transformer_varseq.pickle'))
      const open = await client.call('trace:openSample', { name: 'transformer_varseq.pickle' })
      assert.equal((await settle(client, open.jobId)).state, 'done')
      const summary = await client.call('job:result', { jobId: open.jobId })
      assert.equal(summary.kind, 'pytorch-snapshot')
      const data = decodeBundle(await bytesOf(await client.call('trace:data', { traceId: summary.traceId })))
      assert.equal(data.arrays['kind']!.length, summary.events)

      const phases = new Set<string>()
      const replay = await client.call('replay:start', { traceId: summary.traceId, strategies: 'slab,buddy', includeStored: false })
      const done = await settle(client, replay.jobId, (s) => {
        phases.add(s.phase)
        return s.state !== 'running'
      })
      assert.equal(done.state, 'done')
      assert.ok(
        [...phases].some((p) => p.startsWith('replaying')),
        `progress phases seen: ${[...phases].join(', ')}`,
      )
      const result = decodeBundle(await bytesOf(await client.call('replay:result', { jobId: replay.jobId })))
      const names = (result.meta as { strategies: { name: string }[] }).strategies.map((s) => s.name)
      assert.deepEqual(names, ['slab', 'buddy'])
      assert.ok(result.arrays['s0.l0.op']!.length > 0, 'the slab replay has layout events')
    } finally {
      await client.close()
    }
  })

  test("serve's bundled worker (dist/worker) is built once, loads the native addon and the samples beside their sources, and replays as the sources do", async () => {
    const built: string[] = []
    const entry = await ensureWorkerBuilt((line) => built.push(line))
    assert.equal(entry, WORKER_BUNDLE, `the bundle was built: ${built.join(' | ')}`)
    assert.equal(workerIsStale(), false, 'built: not stale until a source changes')
    const client = newClient(undefined, entry)
    try {
      const info = await client.call('app:info', undefined)
      assert.ok(
        info.strategies.some((s) => s.name === 'caching'),
        'the bundled worker found the native addon from its source location',
      )
      const open = await client.call('trace:openSample', { name: 'transformer_varseq.pickle' })
      assert.equal((await settle(client, open.jobId)).state, 'done')
      const summary = await client.call('job:result', { jobId: open.jobId })
      const replay = await client.call('replay:start', { traceId: summary.traceId, strategies: 'slab', includeStored: false })
      assert.equal((await settle(client, replay.jobId)).state, 'done')
      const result = decodeBundle(await bytesOf(await client.call('replay:result', { jobId: replay.jobId })))
      assert.deepEqual(
        (result.meta as { strategies: { name: string }[] }).strategies.map((s) => s.name),
        ['slab'],
      )
    } finally {
      await client.close()
    }
  })

  test('a large bundle comes as a file in a folder of the worker, the same bytes, gone once taken; the folder goes with the worker; with no folder it comes as bytes', async () => {
    // 100,000 events: a few megabytes of columns.
    const scratch = await mkdtemp(join(tmpdir(), 'vramscope-bundle-file-'))
    const file = join(scratch, 'trace.vramscope')
    await writeTrace(file, sampleTrace(100_000, 5))
    const open = async (client: WorkerClient) => {
      const started = await client.call('trace:openPath', { path: file })
      assert.equal((await settle(client, started.jobId)).state, 'done')
      return client.call('job:result', { jobId: started.jobId })
    }
    const client = newClient()
    let dir: string
    let bytes: ArrayBuffer
    try {
      const summary = await open(client)
      const sent = await client.call('trace:data', { traceId: summary.traceId })
      assert.ok(isBundleFile(sent), 'a trace of this size crosses as a file')
      dir = dirname(sent.bundleFile)
      assert.match(basename(dir), /^vramscope-bundles-/)
      assert.ok(sent.bytes >= BUNDLE_FILE_MIN_BYTES)
      bytes = await takeBundleFile(sent)
      assert.equal(bytes.byteLength, sent.bytes)
      assert.equal(existsSync(sent.bundleFile), false, 'taking the bundle deletes its file')
      assert.equal(decodeBundle(bytes).arrays['kind']!.length, summary.events)
      // The folder is gone (a full disk, a cleaned /tmp): the same bundle comes through the channel.
      await rm(dir, { recursive: true })
      const again = await client.call('trace:data', { traceId: summary.traceId })
      assert.ok(again instanceof ArrayBuffer, 'without its folder the worker sends the bytes')
      assert.deepEqual(new Uint8Array(again), new Uint8Array(bytes))
    } finally {
      await client.close()
    }
    // A fresh worker has a folder of its own, removed when it ends.
    const second = newClient()
    let secondDir: string
    try {
      const summary = await open(second)
      const sent = await second.call('trace:data', { traceId: summary.traceId })
      assert.ok(isBundleFile(sent))
      secondDir = dirname(sent.bundleFile)
      assert.notEqual(secondDir, dir)
      // The same columns (the header names this worker's own trace id).
      const columns = decodeBundle(await takeBundleFile(sent)).arrays
      for (const name of ['kind', 'id', 'size']) assert.deepEqual(columns[name], decodeBundle(bytes).arrays[name], name)
    } finally {
      await second.close()
    }
    assert.equal(existsSync(secondDir), false, 'the folder of the worker is removed when it ends')
    await rm(scratch, { recursive: true, force: true })
  })

  test("the desktop app's prefetch of a window's file: the worker opens it and replays its first maps ahead; the page's open and replays take those jobs", async () => {
    const client = newClient()
    try {
      const path = join(SAMPLES, 'transformer_varseq.pickle')
      const prefetched = (await client.session({ op: 'prefetchPath', path })) as { jobId: string }
      assert.equal(await client.session({ op: 'prefetchPath', path }), null, 'one prefetch at a time, until a page takes it')
      // The page's open of that file (trace:openRecent, trace:openPath in main) takes the job.
      const open = await client.call('trace:openPath', { path })
      assert.equal(open.jobId, prefetched.jobId)
      assert.equal((await settle(client, open.jobId)).state, 'done')
      const summary = await client.call('job:result', { jobId: open.jobId })
      assert.equal((await client.call('trace:openPath', { path })).jobId === open.jobId, false, 'taken once: a second open is its own')
      // Its maps' replays were started ahead (AppSession's own tests hold that the page's requests take them).
      const first = await client.call('replay:start', firstReplay(summary, DEFAULT_STRATEGIES))
      assert.equal((await settle(client, first.jobId)).state, 'done')
      const cut = listedStrategies(decodeBundle(await bytesOf(await client.call('replay:result', { jobId: first.jobId, preview: true }))).meta)[0]!
      assert.ok(Number.isInteger(cut.previewAt), `the recorded map cut at its peak (${cut.previewAt})`)
      const rest = await client.call('replay:start', restReplay(summary, DEFAULT_STRATEGIES, cut.previewAt!))
      assert.equal((await settle(client, rest.jobId)).state, 'done')
      const bad = await client.session({ op: 'prefetchPath', path: '' }).then(
        () => null,
        (e: Error & { code?: string }) => e,
      )
      assert.equal(bad?.code, 'BAD_INPUT')
    } finally {
      await client.close()
    }
  })

  test('an error of the session comes back with its code, and the worker goes on', async () => {
    const client = newClient()
    try {
      await assert.rejects(
        client.call('trace:data', { traceId: 'no-such-trace' }),
        (e: Error & { code?: string }) => e.code === 'NOT_FOUND' && /no open trace/.test(e.message),
      )
      await assert.rejects(client.call('trace:openSample', { name: '../package.json' }), (e: Error & { code?: string }) => e.code === 'BAD_INPUT')
      assert.ok((await client.call('app:info', undefined)).version === 'test')
    } finally {
      await client.close()
    }
  })

  describe('crash: the worker is killed mid-replay', () => {
    let dir = ''
    let bigTrace = ''
    before(async () => {
      dir = await mkdtemp(join(tmpdir(), 'vramscope-worker-'))
      bigTrace = join(dir, 'big.vramscope')
      // Big enough that replaying it through five strategies with layouts takes seconds here.
      await writeTrace(bigTrace, sampleTrace(1_500_000, 11))
    })
    after(() => rm(dir, { recursive: true, force: true }))

    test('pending calls and running jobs fail saying how it died, opened traces say they are gone, the next call starts a fresh worker', async () => {
      const crashes: WorkerExitedError[] = []
      const client = newClient((e) => crashes.push(e))
      try {
        const open = await client.call('trace:openPath', { path: bigTrace })
        assert.equal((await settle(client, open.jobId)).state, 'done')
        const summary = await client.call('job:result', { jobId: open.jobId })
        const firstPid = client.pid!
        const replay = await client.call('replay:start', {
          traceId: summary.traceId,
          strategies: 'caching:preset=pytorch,caching:preset=pow2,slab,buddy,vmm_growable',
        })
        const midway = await settle(client, replay.jobId, (s) => s.state !== 'running' || (s.fraction > 0.05 && s.phase.startsWith('replaying')))
        assert.equal(midway.state, 'running', 'the replay was still running when the worker was killed (make the trace bigger if not)')

        // A call in flight when it dies: the worker needs milliseconds to encode these columns.
        const inFlight = client.call('trace:data', { traceId: summary.traceId })
        process.kill(firstPid, 'SIGKILL')

        const error = await inFlight.then(
          () => assert.fail('the call in flight should have been rejected'),
          (e: unknown) => e,
        )
        assert.ok(error instanceof WorkerExitedError, `rejected with ${String(error)}`)
        assert.equal(error.exit.signal, 'SIGKILL')
        assert.match(error.message, new RegExp(`pid ${firstPid}\\) was killed by signal SIGKILL while replaying .* \\(\\d+ %\\)`))
        assert.match(error.message, /next request starts a fresh worker/)

        const failed = await client.call('job:status', { jobId: replay.jobId })
        assert.equal(failed.state, 'failed')
        assert.equal(failed.error?.code, 'WORKER_EXITED')
        assert.equal(failed.error?.message, error.message, 'the job reads as failed with the same words the UI shows')

        await assert.rejects(
          client.call('trace:data', { traceId: summary.traceId }),
          (e: Error) => e instanceof WorkerExitedError && /opened in a worker process that has since ended/.test(e.message),
        )
        await assert.rejects(client.call('replay:result', { jobId: replay.jobId }), WorkerExitedError)
        assert.equal(crashes.length, 1, 'the crash was reported once')

        // The next request: a fresh worker that works.
        const info = await client.call('app:info', undefined)
        assert.ok(info.strategies.length > 0)
        assert.notEqual(client.pid, firstPid)
        assert.equal(client.workerGeneration, 2)
        const again = await client.call('trace:openSample', { name: 'convnet_varimg.pickle' })
        const reopened = await settle(client, again.jobId)
        assert.equal(reopened.state, 'done', JSON.stringify(reopened.error))
        const s2 = await client.call('job:result', { jobId: again.jobId })
        const r2 = await client.call('replay:start', { traceId: s2.traceId, strategies: 'buddy', includeStored: false })
        const replayed = await settle(client, r2.jobId)
        assert.equal(replayed.state, 'done', JSON.stringify(replayed.error))
        assert.ok(decodeBundle(await bytesOf(await client.call('replay:result', { jobId: r2.jobId }))).arrays['s0.l0.op']!.length > 0)
      } finally {
        await client.close()
      }
      assert.equal(crashes.length, 1, 'closing the worker on purpose is not a crash')
    })
  })
})
