// The field corpus (scripts/fixtures/field-corpus.ts) through every command a user runs and through
// the served app: each shape of users' files (a training step on an 80 GB GPU recorded late, an
// overflowed ring, a 2023-format snapshot, free_completed-only frees, expandable segments at random
// addresses, private pools, sizes up to 2^53 - 1 B) ends in bounded time and memory with the
// figures its generator knows exactly. Shapes run two at a time (this machine has two cores).
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'

import { SHAPES, writeFieldCorpus, type ShapeFigures } from '../../scripts/fixtures/field-corpus.ts'
import { decodeBundle } from '../../src-shared/bundle.ts'
import type { JobStatus, TraceSummary } from '../../src-shared/contract.ts'
import type { WhatifReport } from '../../src-shared/whatif-report.ts'
import { startWebHost, type WebHost } from '../../src-main/web/server.ts'
import { workerSession, type WorkerSession } from '../../src-main/web/worker-session.ts'
import { runBounded } from '../helpers/bounded-child.ts'
import { BIN } from '../helpers/cli.ts'
import { pageApi } from '../helpers/web-host.ts'

const ROOT = join(import.meta.dirname, '..', '..')
/** The issue's bound for any input: a command ends in seconds, under 1.5 GB. Generous in time for a loaded machine. */
const COMMAND_MS = 30_000
const MAX_RSS = 1.5 * 2 ** 30
/** Replays of the recorded settings land within 1 % of the recorded peak (the model's stated precision). */
const WITHIN = 0.01
/** Sizes past any GPU: their replays run with no cap on the device the file's out-of-memory implies (replay/device.ts). */
const HUGE = new Set(['huge-sizes', 'huge-expandable'])

let dir: string
const figures = new Map<string, ShapeFigures>()

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'vramscope-field-corpus-'))
  for (const f of writeFieldCorpus(dir)) figures.set(f.shape, f)
})
after(async () => {
  if (dir) await rm(dir, { recursive: true, force: true })
})

/** `vramscope ARGS --json` under the time and memory bounds; its parsed stdout. */
async function cli<T = any>(args: string[]): Promise<T> {
  const run = await runBounded([BIN, ...args, '--json'], COMMAND_MS, MAX_RSS)
  const what = `vramscope ${args.map((a) => a.replace(dir, '$DIR')).join(' ')}`
  assert.equal(
    run.killed,
    null,
    `${what} was killed past ${run.killed === 'time' ? `${COMMAND_MS / 1000} s` : '1.5 GB'} (${(run.peakRss / 2 ** 20).toFixed(0)} MiB)`,
  )
  assert.equal(run.code, 0, `${what}: exit ${run.code}\n${run.stdout.slice(0, 2000)}\n${run.stderr.slice(0, 2000)}`)
  return JSON.parse(run.stdout) as T
}

const within = (actual: number, expected: number, what: string) =>
  assert.ok(
    Math.abs(actual - expected) <= WITHIN * expected,
    `${what}: ${actual} B, ${(((actual - expected) / expected) * 100).toFixed(2)} % off ${expected} B`,
  )

/** What info (or an imported file's info) must say of a shape, exactly. */
function assertInfo(info: any, f: ShapeFigures, what: string): void {
  assert.equal(info.allocs, f.allocs, `${what}: allocs`)
  assert.equal(info.frees, f.frees, `${what}: frees`)
  assert.equal(info.recordedFailures, f.ooms, `${what}: recorded failures`)
  assert.equal(info.peakRequested, f.peakRequested, `${what}: peak requested`)
  assert.equal(info.liveAtEnd, f.liveBlocksAtEnd, `${what}: blocks live at the end`)
  assert.equal(info.liveBytesAtEnd, f.liveBytesAtEnd, `${what}: bytes live at the end`)
  const recorded = (info.strategies as any[]).find((s) => s.name === 'pytorch (recorded)')
  assert.ok(recorded, `${what}: no recorded layout`)
  assert.equal(recorded.summary.peakReserved, f.peakReserved, `${what}: recorded peak reserved`)
  assert.equal(recorded.summary.finalReserved, f.reservedAtEnd, `${what}: recorded reserved at the end`)
}

/** Caps of petabytes for expandable shapes: PyTorch's 1 1/8 of such a device fits the address space a few times only. */
const FAR_CAPS = new Map([
  ['expandable-random', '2000000000000000'],
  ['late-expandable', '3000000000000000'],
])

function hasPython(): boolean {
  try {
    execFileSync('python3', ['--version'], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
}

// Python's own unpickler reads each pickle the generator writes as the same snapshot as its JSON
// (tuples as lists): the corpus is made of pickles as torch writes them, not of what our reader accepts.
it('the corpus pickles are what Python unpickles to the JSON snapshots', { skip: !hasPython() && 'python3 is needed' }, () => {
  const pairs = [...figures.values()].filter((f) => f.files.pickle && f.files.json).map((f) => [f.files.pickle!, f.files.json!])
  assert.ok(pairs.length >= 8, `${pairs.length} shapes in both forms`)
  const script = [
    'import json, pickle, sys',
    'def plain(x):',
    '    if isinstance(x, (list, tuple)): return [plain(i) for i in x]',
    '    if isinstance(x, dict): return {k: plain(v) for k, v in x.items()}',
    '    return x',
    'pairs = json.loads(sys.argv[1])',
    'bad = [p for p, j in pairs if plain(pickle.load(open(p, "rb"))) != json.load(open(j))]',
    'print(json.dumps(bad))',
  ].join('\n')
  const differing = JSON.parse(execFileSync('python3', ['-c', script, JSON.stringify(pairs)], { encoding: 'utf8', timeout: COMMAND_MS })) as string[]
  assert.deepEqual(differing, [], 'pickles Python reads differently from their JSON')
})

describe('the field corpus through the CLI', { concurrency: 2 }, () => {
  for (const shape of Object.keys(SHAPES)) {
    describe(shape, () => {
      const f = () => figures.get(shape)!
      const file = () => f().files.pickle!

      it('the generator writes the shape as described', () => {
        const g = f()
        assert.ok(g.segmentsAtEnd > 0, 'segments at the end')
        assert.ok(g.peakRequested <= g.peakReserved, 'live bytes fit in what was reserved')
        assert.equal(g.ooms > 0, HUGE.has(shape), 'an out-of-memory where the sizes pass any GPU')
        if (shape === 'train-step-80g') {
          // The shape as users' files have it: ~1,000 segments, ~61 GB, ~13k entries, 658 before the window.
          assert.equal(g.segmentsBeforeWindow, 658)
          assert.ok(g.segmentsAtEnd >= 950 && g.segmentsAtEnd <= 1050, `${g.segmentsAtEnd} segments`)
          assert.ok(g.peakReserved > 60e9 && g.peakReserved < 62e9, `${g.peakReserved} B reserved`)
          assert.ok(g.traceEntries > 12_000 && g.traceEntries < 14_000, `${g.traceEntries} entries`)
        }
      })

      it('info gives the exact figures, from the pickle and from the JSON', async () => {
        for (const path of Object.values(f().files)) {
          const info = await cli(['info', path])
          assertInfo(info, f(), `info ${shape}`)
          if (f().segmentsBeforeWindow > 0)
            assert.equal(info.pytorch.overflow.synthesizedSegments, f().segmentsBeforeWindow, 'segments that existed before the window')
        }
      })

      it('top at the recorded peak (and at the out-of-memory) counts the live bytes', async () => {
        const top = await cli(['top', file()])
        assert.equal(top.at.reserved, f().peakReserved, 'top: the recorded peak reserved')
        const grouped = (top.groups as any[]).reduce((n, g) => n + g.bytes, 0)
        assert.equal(grouped, top.at.bytes, 'top: the groups add up to the bytes live')
        if (f().liveAtPeakReserved !== null) assert.equal(top.at.bytes, f().liveAtPeakReserved, 'top: bytes live at the recorded peak')
        if (f().ooms > 0) {
          const oom = await cli(['top', file(), '--at', 'oom'])
          assert.equal(oom.at.bytes, f().liveAtFirstOom, 'top --at oom: bytes live at the out-of-memory')
        }
      })

      it('replay under the recorded settings lands on the recorded peak (within 1 %)', async () => {
        if (!f().timed) {
          // A 2023 snapshot carries no allocator settings: PyTorch's defaults instead.
          const replay = await cli(['replay', file(), '-s', 'caching:preset=pytorch'])
          const replayed = (replay.strategies as any[]).find((s) => !s.recorded)
          within(replayed.summary.peakReserved, f().peakReserved, `replay ${shape}: peak reserved`)
          return
        }
        const replay = await cli(['replay', file(), '--conf', 'recorded'])
        const replayed = (replay.strategies as any[]).find((s) => !s.recorded)
        assert.ok(replayed, 'replay: a replayed strategy')
        assert.equal(replayed.summary.peakRequested, f().peakRequested, `replay ${shape}: peak requested`)
        // Only the recorded out-of-memory fails again: its request is more than the device holds.
        assert.equal(replayed.summary.failures, f().ooms, `replay ${shape}: failures`)
        within(replayed.summary.peakReserved, f().peakReserved, `replay ${shape}: peak reserved`)
        const farCap = FAR_CAPS.get(shape)
        if (farCap !== undefined) {
          // A cap far above the peak changes nothing, however many ranges reserve address space under
          // it, from an empty start or seeded with the recorded state.
          const capped = await cli(['replay', file(), '--conf', 'recorded', '--cap', farCap])
          const under = (capped.strategies as any[]).find((s) => !s.recorded)
          assert.equal(under.summary.failures, 0, `replay under a ${farCap} B cap: failures`)
          assert.equal(under.summary.peakReserved, replayed.summary.peakReserved, `replay under a ${farCap} B cap: peak reserved`)
        }
      })

      it('whatif ends with ranked rows and replays the recorded settings within 1 %', async () => {
        const report = await cli<WhatifReport & { configs: any[] }>(['whatif', file()])
        assert.ok(report.configs.length >= 10, `${report.configs.length} rows`)
        assert.ok(
          report.configs.every((c) => Number.isSafeInteger(c.peakReserved) && c.peakReserved >= 0),
          'every row has a peak reserved',
        )
        if (f().ooms > 0) {
          assert.equal(report.limit.source, 'implied', 'the out-of-memory implies the limit')
          assert.equal(report.implied?.size, f().oomBytes, 'the failed request')
          assert.equal(report.implied?.deviceFree, f().oomDeviceFree, "the out-of-memory's device_free")
        } else {
          assert.ok(
            report.configs.some((c) => c.rank === 1 && c.failures === 0),
            'a row fits',
          )
          // No shape here peaks above 62 GB: on the 79.2 GiB device every PyTorch setting fits.
          const failing = report.configs.filter((c) => c.kind !== 'strategy' && c.failures > 0).map((c) => `${c.conf}: ${c.failures}`)
          assert.deepEqual(failing, [], 'PyTorch rows with failures')
        }
        if (f().timed) {
          assert.ok(report.fidelity, 'whatif: fidelity against the recorded layout')
          assert.equal(report.fidelity.recordedPeakReserved, f().peakReserved, 'whatif: the recorded peak')
          within(report.fidelity.replayedPeakReserved, f().peakReserved, `whatif ${shape}: the recorded settings replayed`)
        }
      })

      it('import -o writes a trace that info reads back with the same figures', async () => {
        const out = join(dir, `${shape}.vramscope`)
        await cli(['import', file(), '-o', out])
        assertInfo(await cli(['info', out]), f(), `info of ${shape}.vramscope`)
      })
    })
  }
})

describe('the field corpus through the served app', () => {
  let host: WebHost
  let session: WorkerSession
  let staticDir: string
  const { post, json, settle: settleWithin } = pageApi(() => host)

  /** Waits for a job, at most COMMAND_MS. */
  const settle = (jobId: string): Promise<JobStatus> => settleWithin(jobId, COMMAND_MS)

  before(async () => {
    staticDir = await mkdtemp(join(tmpdir(), 'vramscope-field-host-'))
    await writeFile(join(staticDir, 'index.html'), '<!doctype html><title>vramscope</title>')
    const allowed = new Set([...figures.values()].map((f) => f.files.pickle!))
    session = workerSession({ version: 'test', host: 'web', samplesDir: join(ROOT, 'resources', 'samples'), allowedPaths: allowed })
    host = await startWebHost({ session, staticDir })
  })
  after(async () => {
    await host?.close()
    await session?.close()
    if (staticDir) await rm(staticDir, { recursive: true, force: true })
  })

  for (const shape of Object.keys(SHAPES)) {
    it(`${shape}: opens with its figures, replays the recorded settings within 1 %, runs the what-if lab, closes`, async () => {
      const f = figures.get(shape)!
      const open = json(await post('trace:openPath', { path: f.files.pickle }))
      assert.ok(open.ok, JSON.stringify(open))
      const opened = await settle(open.result.jobId)
      assert.equal(opened.state, 'done', JSON.stringify(opened))
      const summary = json(await post('job:result', { jobId: open.result.jobId })).result as TraceSummary
      assert.equal(summary.allocs, f.allocs, 'allocs')
      assert.equal(summary.frees, f.frees, 'frees')
      assert.equal(summary.requested.peak, f.peakRequested, 'peak requested')
      assert.equal(summary.oom !== undefined, f.ooms > 0, 'the out-of-memory, where there is one')
      const traceId = summary.traceId
      try {
        const replay = json(await post('replay:start', { traceId, strategies: 'caching:preset=pytorch' }))
        assert.ok(replay.ok, JSON.stringify(replay))
        assert.equal((await settle(replay.result.jobId)).state, 'done', 'replay')
        const bundle = await post('replay:result', { jobId: replay.result.jobId })
        const bytes = Buffer.from(bundle.body, 'latin1')
        const meta = decodeBundle(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength)).meta as {
          strategies: { name: string; recorded: boolean; summary: { peakReserved: number; failures: number } }[]
        }
        const recorded = meta.strategies.find((s) => s.recorded)!
        const replayed = meta.strategies.find((s) => !s.recorded)!
        assert.equal(recorded.summary.peakReserved, f.peakReserved, 'the recorded layout')
        within(replayed.summary.peakReserved, f.peakReserved, `${shape}: the replay`)
        assert.equal(replayed.summary.failures, f.ooms, `${shape}: the replay's failures`)

        const whatif = json(await post('whatif:start', { traceId }))
        assert.ok(whatif.ok, JSON.stringify(whatif))
        const ran = await settle(whatif.result.jobId)
        assert.equal(ran.state, 'done', JSON.stringify(ran))
        const report = json(await post('whatif:result', { jobId: whatif.result.jobId })).result as WhatifReport
        assert.ok(report.rows.length >= 10, `${report.rows.length} rows`)
        if (f.timed) within(report.fidelity!.replayedPeakReserved, f.peakReserved, `${shape}: the lab's recorded row`)
      } finally {
        assert.ok(json(await post('trace:close', { traceId })).ok, 'closes')
      }
    })
  }
})
