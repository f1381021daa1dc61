// The Record panel's PyTorch program (`record:pytorch`) over the web host as `vramscope serve`
// runs it (its session in a worker process), with real Python processes, the real hook and the
// stand-in torch of test/fixtures/stand-in-torch: refused unless the host allows its pages to run
// programs (serve --allow-record-commands; the desktop app always), saying how; allowed, the job
// records the program into the recordings folder and opens its snapshot; a cancel ends the program
// with SIGTERM, which leaves a last snapshot; a bad command line or folder is named.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { existsSync, readFileSync, readdirSync } from 'node:fs'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { after, before, describe, it } from 'node:test'

import { startWebHost, type WebHost } from '../../src-main/web/server.ts'
import { workerSession, type WorkerSession } from '../../src-main/web/worker-session.ts'
import { pageApi } from '../helpers/web-host.ts'

const ROOT = join(import.meta.dirname, '..', '..')
const python = ['python3', 'python'].find((p) => spawnSync(p, ['-c', 'import sys; sys.exit(0)']).status === 0)

let dir: string
let recordings: string
const hosts: { host: WebHost; session: WorkerSession }[] = []
let allowed: WebHost
let refused: WebHost
const onAllowed = pageApi(() => allowed)
const onRefused = pageApi(() => refused)

describe('record:pytorch over the web host', { skip: python ? false : 'no python3 on this machine' }, () => {
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'vramscope-record-pytorch-host-'))
    recordings = join(dir, 'recordings')
    await writeFile(join(dir, 'index.html'), '<!doctype html><title>vramscope</title>')
    // The worker process inherits these: the stand-in torch on the user's PYTHONPATH, no interposer.
    process.env['PYTHONPATH'] = join(ROOT, 'test', 'fixtures', 'stand-in-torch')
    process.env['VRAMSCOPE_INTERCEPT'] = join(dir, 'no-interposer-here.so')
    for (const extra of [{ recordCommands: true, skipDriverCheck: true, recordingsDir: recordings }, {}]) {
      const session = workerSession({ version: 'test', host: 'web', samplesDir: join(ROOT, 'resources', 'samples'), allowedPaths: new Set(), ...extra })
      hosts.push({ session, host: await startWebHost({ session, staticDir: dir }) })
    }
    allowed = hosts[0]!.host
    refused = hosts[1]!.host
  })
  after(async () => {
    for (const { host, session } of hosts) {
      await host.close()
      await session.close()
    }
    await rm(dir, { recursive: true, force: true })
  })

  it('refused where the host runs no programs for its pages, saying how to allow it', async () => {
    const info = onRefused.json(await onRefused.post('app:info', undefined)).result
    assert.equal(info.recordCommand.available, false)
    assert.match(info.recordCommand.reason, /--allow-record-commands/)
    const started = await onRefused.post('record:pytorch', { command: `${python} -c 'print(1)'` })
    assert.equal(started.status, 400, started.body)
    assert.match(onRefused.json(started).error!.message, /does not run programs for its pages.*--allow-record-commands/)
  })

  it('records the program into the recordings folder and opens its snapshot', async () => {
    assert.equal(onAllowed.json(await onAllowed.post('app:info', undefined)).result.recordCommand.available, true)
    await writeFile(
      join(dir, 'train.py'),
      'import torch\nblocks = [torch.cuda.alloc(n) for n in (1 << 20, 3 << 20)]\ntorch.cuda.free(blocks[0])\nprint("trained")\n',
    )
    const started = await onAllowed.post('record:pytorch', { command: `${python} train.py`, cwd: dir, maxEntries: 100 })
    assert.equal(started.status, 200, started.body)
    const status = await onAllowed.settle(onAllowed.json(started).result.jobId)
    assert.equal(status.state, 'done', JSON.stringify(status))
    const opened = onAllowed.json(await onAllowed.post('job:result', { jobId: onAllowed.json(started).result.jobId })).result
    assert.equal(opened.kind, 'pytorch-snapshot')
    assert.match(opened.name, /^pytorch-train-.*\/snapshot\.pickle$/)
    const [folder] = readdirSync(recordings).filter((f) => f.startsWith('pytorch-train-'))
    const job = JSON.parse(readFileSync(join(recordings, folder!, 'job.json'), 'utf8'))
    assert.equal(job.exit.code, 0)
    assert.equal(readFileSync(join(recordings, folder!, 'output.log'), 'utf8').trim(), 'trained', "the program's output is kept beside its recording")
    assert.equal(JSON.parse(readFileSync(join(recordings, folder!, 'snapshot.stats.json'), 'utf8')).max_entries, 100)
  })

  it('a cancel ends the program with SIGTERM, and its last snapshot is written', async () => {
    await writeFile(join(dir, 'long.py'), 'import time, torch\nkeep = torch.cuda.alloc(1 << 20)\nprint("started", flush=True)\ntime.sleep(120)\n')
    const started = await onAllowed.post('record:pytorch', { command: `${python} long.py`, cwd: dir, snapshotEvery: 0 })
    const jobId = onAllowed.json(started).result.jobId
    const folder = async () => {
      for (let i = 0; i < 300; i++) {
        const f = readdirSync(recordings).find((n) => n.startsWith('pytorch-long-'))
        if (f && existsSync(join(recordings, f, 'output.log')) && readFileSync(join(recordings, f, 'output.log'), 'utf8').includes('started'))
          return join(recordings, f)
        await sleep(50)
      }
      throw new Error('the program did not start')
    }
    const where = await folder()
    const t0 = performance.now()
    assert.equal(onAllowed.json(await onAllowed.post('job:cancel', { jobId })).result.cancelled, true)
    assert.equal((await onAllowed.settle(jobId)).state, 'cancelled')
    for (let i = 0; i < 100 && !existsSync(join(where, 'job.json')); i++) await sleep(50)
    assert.ok(performance.now() - t0 < 5000, 'the program ended within seconds of the cancel')
    const stats = JSON.parse(readFileSync(join(where, 'snapshot.stats.json'), 'utf8'))
    assert.equal(stats.reason, 'signal 15')
    assert.equal(JSON.parse(readFileSync(join(where, 'job.json'), 'utf8')).exit.signal, 'SIGTERM')
  })

  it('names a bad command line or folder', async () => {
    const unclosed = await onAllowed.post('record:pytorch', { command: `${python} 'train.py` })
    assert.equal(unclosed.status, 400)
    assert.match(onAllowed.json(unclosed).error!.message, /command: an unclosed ' at character/)
    const nowhere = await onAllowed.post('record:pytorch', { command: `${python} train.py`, cwd: join(dir, 'no-such-folder') })
    const status = await onAllowed.settle(onAllowed.json(nowhere).result.jobId)
    assert.equal(status.state, 'failed')
    assert.match(status.error!.message, /cwd: .*no-such-folder is not a folder on this host/)
  })
})
