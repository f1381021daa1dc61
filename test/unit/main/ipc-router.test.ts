// Main's IPC handling without Electron: the IpcRouter with the real worker process (forked with
// Node, the real native module) and a real recent-files store. Payloads from a wrong sender and
// malformed payloads on every channel are refused before anything runs; files reach the worker
// only when the user chose them; opened files join the recent list on disk.
import assert from 'node:assert/strict'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'

import { CHANNELS, type AppInfo, type JobStatus, type RecentFile, type TraceSummary } from '../../../src-shared/contract.ts'
import { IpcRouter, type IpcReply, type SenderInfo } from '../../../src-main/main/ipc-router.ts'
import { RecentFiles } from '../../../src-main/main/recent-files.ts'
import { APP_ENTRY } from '../../../src-main/main/security.ts'
import { WorkerClient } from '../../../src-main/utility/client.ts'
import { forkNodeWorker } from '../../../src-main/utility/node-transport.ts'

const SAMPLES = fileURLToPath(new URL('../../../resources/samples', import.meta.url))
const SAMPLE_PATH = join(SAMPLES, 'convnet_varimg.pickle')
const FROM_APP: SenderInfo = { windowId: 1, frameUrl: APP_ENTRY, isMainFrame: true }

function value<T>(reply: IpcReply): T {
  assert.ok(reply.ok, `expected success, got ${JSON.stringify(reply)}`)
  return reply.value as T
}

function refused(reply: IpcReply, code: string, message?: RegExp, what = ''): void {
  assert.ok(!reply.ok, `${what}: expected a refusal, got ${JSON.stringify(reply).slice(0, 200)}`)
  assert.equal(reply.error.code, code, reply.error.message)
  if (message) assert.match(reply.error.message, message)
}

describe('IPC router (main, without Electron), against the real worker and native module', () => {
  let dir = ''
  let worker: WorkerClient
  let recent: RecentFiles
  let router: IpcRouter
  const opened: [number, string | undefined][] = []
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'vramscope-ipc-'))
    worker = new WorkerClient({ spawn: () => forkNodeWorker(), init: { version: 'test', host: 'electron', samplesDir: SAMPLES } })
    recent = new RecentFiles(join(dir, 'recent-files.json'))
    await recent.load()
    router = new IpcRouter({ worker, recent, onOpened: (w, p) => opened.push([w, p]) })
  })
  after(async () => {
    await worker.close()
    await rm(dir, { recursive: true, force: true })
  })

  async function settle(jobId: string, sender = FROM_APP): Promise<JobStatus> {
    for (;;) {
      const status = value<JobStatus>(await router.handle(sender, 'job:status', { jobId }))
      if (status.state !== 'running') return status
      await new Promise((r) => setTimeout(r, 20))
    }
  }

  test('messages from anything but the main frame of the app’s own page are refused, on every channel', async () => {
    const strangers: [string, SenderInfo][] = [
      ['a web page', { windowId: 1, frameUrl: 'https://example.com/', isMainFrame: true }],
      ['a file:// page', { windowId: 1, frameUrl: 'file:///tmp/evil.html', isMainFrame: true }],
      ['another app:// host', { windowId: 1, frameUrl: 'app://evil/index.html', isMainFrame: true }],
      ['a subframe of the app', { windowId: 1, frameUrl: APP_ENTRY, isMainFrame: false }],
      ['no window', { windowId: undefined, frameUrl: APP_ENTRY, isMainFrame: true }],
      ['a frame that is gone', { windowId: 1, frameUrl: '', isMainFrame: true }],
      ['a dev server that is not running', { windowId: 1, frameUrl: 'http://localhost:5173/', isMainFrame: true }],
    ]
    for (const [who, sender] of strangers)
      for (const channel of CHANNELS) refused(await router.handle(sender, channel, undefined), 'UNAUTHORIZED', /^refused: /, `${who} on ${channel}`)
    assert.equal(worker.pid, undefined, 'nothing reached the worker')
  })

  test('malformed payloads are refused with what is wrong, before the worker sees them', async () => {
    const malformed: [string, unknown][] = [
      ['app:info', { extra: 1 }],
      ['trace:recent', 'x'],
      ['trace:openSample', undefined],
      ['trace:openSample', { name: 7 }],
      ['trace:openSample', { name: '' }],
      ['trace:openSample', { name: 'a'.repeat(256) }],
      ['trace:openSample', { name: 'x', extra: true }],
      ['trace:openPath', { path: ['a'] }],
      ['trace:openPath', { path: 'x'.repeat(5000) }],
      ['trace:openBytes', { name: 'x.pickle', bytes: [1, 2, 3] }],
      ['trace:openBytes', { name: 'x.pickle', bytes: 'AAAA' }],
      ['trace:openRecent', { key: null }],
      ['trace:data', { traceId: { $gt: '' } }],
      ['trace:data', null],
      ['replay:start', { traceId: 't' }],
      ['replay:start', { traceId: 't', strategies: 'slab', cap: 24 }],
      ['replay:start', { traceId: 't', strategies: 'slab', includeStored: 'no' }],
      ['replay:start', { traceId: 't', strategies: 'slab', __proto__: { polluted: true }, constructor: 1 }],
      ['replay:result', { jobId: 1 }],
      ['job:status', {}],
      ['job:result', []],
      ['job:cancel', { jobId: 'x'.repeat(129) }],
    ]
    for (const [channel, payload] of malformed) refused(await router.handle(FROM_APP, channel, payload), 'BAD_INPUT', new RegExp(`^${channel}: `))
    refused(await router.handle(FROM_APP, 'shell:openExternal', { url: 'https://x' }), 'NOT_FOUND')
    refused(await router.handle(FROM_APP, { toString: () => 'app:info' }, undefined), 'NOT_FOUND')
    assert.equal(worker.pid, undefined, 'nothing reached the worker')
  })

  test('app:info says it is the desktop app and names the window’s initial file', async () => {
    router.setInitialFile(7, SAMPLE_PATH)
    const info = value<AppInfo>(await router.handle({ ...FROM_APP, windowId: 7 }, 'app:info', undefined))
    assert.equal(info.host, 'electron')
    assert.ok(info.strategies.length > 0, 'answered by the worker with the native library’s strategies')
    assert.ok(info.initialFile)
    const other = value<AppInfo>(await router.handle(FROM_APP, 'app:info', undefined))
    assert.equal(other.initialFile, undefined)
    // The initial file opens through its key, and then counts as recent.
    const started = value<{ jobId: string }>(await router.handle({ ...FROM_APP, windowId: 7 }, 'trace:openRecent', { key: info.initialFile! }))
    assert.equal((await settle(started.jobId)).state, 'done')
    value<TraceSummary>(await router.handle({ ...FROM_APP, windowId: 7 }, 'job:result', started))
    assert.ok(router.hasTrace(7))
    assert.deepEqual(opened.at(-1), [7, SAMPLE_PATH])
    assert.equal(value<RecentFile[]>(await router.handle(FROM_APP, 'trace:recent', undefined))[0]!.name, 'convnet_varimg.pickle')
    const onDisk = JSON.parse(await readFile(join(dir, 'recent-files.json'), 'utf8')) as { path: string }[]
    assert.equal(onDisk[0]!.path, SAMPLE_PATH, 'the recent list is saved')
  })

  test('a window opens by path only what the user chose; recent files reopen by key', async () => {
    refused(await router.handle(FROM_APP, 'trace:openPath', { path: '/etc/passwd' }), 'BAD_INPUT', /only files you chose/)
    refused(await router.handle(FROM_APP, 'trace:openRecent', { key: 'no-such-key' }), 'NOT_FOUND')
    const chosen = join(SAMPLES, 'transformer_varseq.pickle')
    router.choose(chosen)
    const started = value<{ jobId: string }>(await router.handle(FROM_APP, 'trace:openPath', { path: chosen }))
    assert.equal((await settle(started.jobId)).state, 'done')
    const summary = value<TraceSummary>(await router.handle(FROM_APP, 'job:result', started))
    assert.equal(summary.kind, 'pytorch-snapshot')
    const data = value<ArrayBuffer>(await router.handle(FROM_APP, 'trace:data', { traceId: summary.traceId }))
    assert.ok(data instanceof ArrayBuffer && data.byteLength > 0, 'bundles leave main as ArrayBuffers')
    const list = value<RecentFile[]>(await router.handle(FROM_APP, 'trace:recent', undefined))
    assert.deepEqual(
      list.map((r) => r.name),
      ['transformer_varseq.pickle', 'convnet_varimg.pickle'],
    )
    // A recent file from an earlier session (a new store reads the same file) reopens by key.
    const later = new RecentFiles(join(dir, 'recent-files.json'))
    await later.load()
    const router2 = new IpcRouter({ worker, recent: later })
    const reopened = value<{ jobId: string }>(await router2.handle(FROM_APP, 'trace:openRecent', { key: list[1]!.key }))
    assert.equal((await settle(reopened.jobId)).state, 'done')
  })

  test('errors of the session come back as refusals with their code; bytes from a drop open', async () => {
    refused(await router.handle(FROM_APP, 'trace:data', { traceId: 'nope' }), 'NOT_FOUND', /no open trace/)
    refused(await router.handle(FROM_APP, 'replay:start', { traceId: 'nope', strategies: 'slab' }), 'NOT_FOUND')
    const bytes = new Uint8Array(await readFile(SAMPLE_PATH))
    const started = value<{ jobId: string }>(await router.handle(FROM_APP, 'trace:openBytes', { name: 'dropped.pickle', bytes }))
    assert.equal((await settle(started.jobId)).state, 'done')
    const summary = value<TraceSummary>(await router.handle(FROM_APP, 'job:result', started))
    assert.equal(summary.name, 'dropped.pickle')
    refused(await router.handle(FROM_APP, 'replay:start', { traceId: summary.traceId, strategies: 'no_such_strategy' }), 'BAD_INPUT')
  })
})
