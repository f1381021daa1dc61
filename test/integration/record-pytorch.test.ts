// `vramscope record --pytorch` end to end without a GPU: the real CLI runs real Python programs
// with the real hook (resources/pytorch/sitecustomize.py) against a stand-in torch
// (test/fixtures/stand-in-torch: CUDA's lazy initialisation, the history, snapshots in PyTorch's
// format, the out-of-memory observer). Each case reads back what was written with vramscope's own
// importer: the snapshot at exit, at an out-of-memory, after a kill -9 (the periodic one) and a
// SIGTERM, one per rank under a torchrun-like launcher that never initialises CUDA itself, the
// settings and memory_stats beside each, an existing sitecustomize still run, and, where the
// interposer's test runtime is built (native/build), the driver's calls of each rank.
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { once } from 'node:events'
import { existsSync, readFileSync, readdirSync } from 'node:fs'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { delimiter, join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { after, before, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'

import { openInput } from '../../src-main/services/import/open-input.ts'
import type { RecordedProcess } from '../../src-main/services/record/pytorch.ts'
import { readTrace } from '../../src-main/services/trace/file.ts'
import { EventKind } from '../../src-main/services/trace/model.ts'
import { BIN, fixture, shown, vramscope } from '../helpers/cli.ts'

const root = fileURLToPath(new URL('../..', import.meta.url))
const python = ['python3', 'python'].find((p) => spawnSync(p, ['-c', 'import sys; sys.exit(0)']).status === 0)
const skipNoPython = python ? false : 'no python3 on this machine'
const build = join(root, process.env['VRAMSCOPE_NATIVE_BUILD'] ?? join('native', 'build'))
const library = join(build, 'libvramscope_intercept.so')
const cudart = join(build, 'libvramscope_fake_cudart.so')
const skipInterposer = [library, cudart, join(build, 'libvramscope_fake_cuda.so')].every((f) => existsSync(f))
  ? false
  : `the interposer and its test runtime are not built in ${build} (npm test builds them)`

let scratch = ''
before(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'vramscope-record-pytorch-'))
  // The stand-in torch, found as the user's own torch would be: on their PYTHONPATH.
  process.env['PYTHONPATH'] = fixture('stand-in-torch')
  // No interposer unless a case asks for one (recordPytorch then warns it records snapshots only).
  process.env['VRAMSCOPE_INTERCEPT'] = join(scratch, 'no-interposer-here.so')
})
after(async () => {
  await rm(scratch, { recursive: true, force: true })
})

async function program(name: string, text: string): Promise<string> {
  const path = join(scratch, name)
  await writeFile(path, text)
  return path
}

/** job.json as record --pytorch writes it. */
interface Job {
  exit: { code: number | null; signal: string | null }
  processes: RecordedProcess[]
  warnings: string[]
}

const readJob = (dir: string): Job => JSON.parse(readFileSync(join(dir, 'job.json'), 'utf8')) as Job
const readStats = (dir: string, file: string) => JSON.parse(readFileSync(join(dir, file), 'utf8')) as Record<string, any>

const ALLOCATE = `import torch
blocks = [torch.cuda.alloc(n) for n in (1 << 20, 3 << 20, 512)]
torch.cuda.free(blocks[1])
`

describe('record --pytorch', { skip: skipNoPython }, () => {
  it('a program that ends: its snapshot and memory_stats at exit, PyTorch defaults or --max-entries, the settings it ran under; it reads back', async () => {
    const script = await program('basic.py', `${ALLOCATE}print("done")\n`)
    const out = join(scratch, 'basic')
    process.env['PYTORCH_ALLOC_CONF'] = 'expandable_segments:True'
    const run = await vramscope(['record', '--pytorch', '--skip-driver-check', '-o', out, '--', python!, script])
    delete process.env['PYTORCH_ALLOC_CONF']
    assert.equal(run.code, 0, shown(run))
    assert.match(run.stderr, /the program exited with code 0/, shown(run))
    assert.match(run.stderr, /snapshot: snapshot\.pickle \(written at exit\)/, shown(run))
    assert.match(run.stderr, /the interposer is not built/, shown(run))
    const job = readJob(out)
    assert.deepEqual(
      job.processes.map((p) => [p.name, p.snapshot, p.reason, p.conf]),
      [['snapshot', 'snapshot.pickle', 'exit', 'expandable_segments:True']],
    )
    const stats = readStats(out, 'snapshot.stats.json')
    assert.equal(stats['max_entries'], null, "PyTorch's default ring: no max_entries given")
    assert.equal(stats['memory_stats']['reserved_bytes.all.peak'], (1 << 20) + (3 << 20) + 512)
    assert.equal(stats['device_name'], 'Stand-in GPU')
    const opened = await openInput(join(out, 'snapshot.pickle'))
    assert.equal(opened.kind, 'pytorch-snapshot')
    const kinds = Array.from(opened.trace.events.kind)
    assert.equal(kinds.filter((k) => k === EventKind.alloc).length, 3, 'three allocations')
    assert.equal(kinds.filter((k) => k === EventKind.free).length, 1, 'one free')

    // The GPU the stats name is the device the lab answers for, and says so.
    const lab = await vramscope(['whatif', join(out, 'snapshot.pickle'), '--conf', 'recorded', '--json'])
    assert.equal(lab.code, 0, shown(lab))
    assert.deepEqual((JSON.parse(lab.stdout) as { device: unknown }).device, {
      bytes: 80 * 2 ** 30,
      source: 'file',
      name: 'Stand-in GPU',
      from: 'snapshot.stats.json',
    })
    const words = await vramscope(['whatif', join(out, 'snapshot.pickle'), '--conf', 'recorded'])
    assert.match(words.stdout + words.stderr, /device: Stand-in GPU, 80(\.0)? GiB \(as snapshot\.stats\.json names it; --gpu sets another\)/, shown(words))

    const ring = join(scratch, 'ring')
    const bounded = await vramscope(['record', '--pytorch', '--skip-driver-check', '--max-entries', '4', '-o', ring, '--json', '--', python!, script])
    assert.equal(bounded.code, 0, shown(bounded))
    assert.equal((JSON.parse(bounded.stdout) as { processes: unknown[] }).processes.length, 1)
    assert.equal(readStats(ring, 'snapshot.stats.json')['max_entries'], 4)
    const overflowed = await openInput(join(ring, 'snapshot.pickle'))
    assert.ok(overflowed.trace.events.kind.length <= 4 + 3, 'a four-entry ring keeps four entries (and the blocks live at the end)')
  })

  it('an out-of-memory: the snapshot at that moment, with the limit, and the one at exit; the program still fails as it would', async () => {
    const script = await program(
      'oom.py',
      `import torch
torch.cuda.set_per_process_memory_fraction(0.5)
keep = torch.cuda.alloc(3 << 20)
torch.cuda.alloc(2 << 20)
`,
    )
    const out = join(scratch, 'oom')
    process.env['STAND_IN_TOTAL_BYTES'] = String(8 << 20)
    const run = await vramscope(['record', '--pytorch', '--skip-driver-check', '-o', out, '--', python!, script])
    delete process.env['STAND_IN_TOTAL_BYTES']
    assert.equal(run.code, 0, shown(run))
    assert.match(run.stderr, /exited with code 1/, shown(run))
    assert.match(run.stderr, /OutOfMemoryError/, 'the program says what it always said')
    const [p] = readJob(out).processes
    assert.equal(p!.oomSnapshot, 'snapshot.oom.pickle')
    assert.equal(p!.snapshot, 'snapshot.pickle')
    assert.equal(p!.outOfMemory, true)
    const atOom = readStats(out, 'snapshot.oom.stats.json')
    assert.equal(atOom['reason'], 'oom')
    assert.equal(atOom['limit_bytes'], 4 << 20, 'the limit set_per_process_memory_fraction set')
    assert.equal(atOom['oom']['first']['requested_bytes'], 2 << 20)
    assert.equal(atOom['memory_stats']['num_ooms'], 1)
    for (const file of ['snapshot.oom.pickle', 'snapshot.pickle']) {
      const opened = await openInput(join(out, file))
      assert.ok(Array.from(opened.trace.events.kind).includes(EventKind.alloc), `${file} opens with its allocation`)
    }
  })

  it('kill -9 of the program: the last periodic snapshot is whole and opens; SIGTERM writes one on the way out', async () => {
    const pidFile = join(scratch, 'pid')
    const script = await program(
      'long.py',
      `import os, time, torch
${ALLOCATE}open(${JSON.stringify(pidFile)} + ".tmp", "w").write(str(os.getpid()))
os.replace(${JSON.stringify(pidFile)} + ".tmp", ${JSON.stringify(pidFile)})
time.sleep(60)
`,
    )
    for (const [signal, every] of [
      ['SIGKILL', '1'],
      ['SIGTERM', '0'],
    ] as const) {
      const out = join(scratch, `killed-${signal}`)
      await rm(pidFile, { force: true })
      const recorder = spawn(
        process.execPath,
        [BIN, 'record', '--pytorch', '--skip-driver-check', '--snapshot-every', every, '-o', out, '--', python!, script],
        {
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      )
      let stderr = ''
      recorder.stderr!.on('data', (d: Buffer) => (stderr += d.toString()))
      const deadline = Date.now() + 30_000
      while (!(existsSync(pidFile) && (signal === 'SIGTERM' || existsSync(join(out, 'snapshot.pickle')))) && Date.now() < deadline) await sleep(50)
      assert.ok(existsSync(pidFile), `the program started (${stderr})`)
      process.kill(Number(readFileSync(pidFile, 'utf8')), signal)
      const [code] = await once(recorder, 'exit')
      assert.equal(code, 0, stderr)
      assert.match(stderr, new RegExp(`was ended by ${signal}`), stderr)
      const [p] = readJob(out).processes
      assert.equal(p!.snapshot, 'snapshot.pickle', stderr)
      assert.equal(p!.reason, signal === 'SIGKILL' ? 'periodic' : 'signal 15')
      assert.deepEqual(
        readdirSync(out).filter((f) => f.includes('.tmp')),
        [],
        'no temporary file left',
      )
      const opened = await openInput(join(out, 'snapshot.pickle'))
      assert.equal(Array.from(opened.trace.events.kind).filter((k) => k === EventKind.alloc).length, 3)
    }
  })

  it('a torchrun-like job: one snapshot per rank, none for the launcher that never initialises CUDA; a hidden sitecustomize still runs', async () => {
    const worker = await program(
      'worker.py',
      `import os, subprocess, sys, torch
blocks = [torch.cuda.alloc((int(os.environ["RANK"]) + 1) << 20) for _ in range(2)]
if os.environ["RANK"] == "1" and len(sys.argv) == 1:  # a child of rank 1 that uses CUDA too, with rank 1's RANK
    subprocess.check_call([sys.executable, __file__, "child"])
`,
    )
    const launcher = await program(
      'launch.py',
      `import os, subprocess, sys, torch  # imports torch, never touches CUDA, as torchrun's agent
procs = [subprocess.Popen([sys.executable, ${JSON.stringify(worker)}], env=dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE="2")) for r in range(2)]
sys.exit(max(p.wait() for p in procs))
`,
    )
    const theirs = join(scratch, 'their-site')
    await rm(theirs, { recursive: true, force: true })
    await import('node:fs/promises').then((fs) => fs.mkdir(theirs))
    const marker = join(scratch, 'their-site-ran')
    await writeFile(join(theirs, 'sitecustomize.py'), `open(${JSON.stringify(marker)}, "a").write("ran\\n")\n`)
    const out = join(scratch, 'job')
    const saved = process.env['PYTHONPATH']
    process.env['PYTHONPATH'] = [saved, theirs].join(delimiter)
    const run = await vramscope(['record', '--pytorch', '--skip-driver-check', '-o', out, '--', python!, launcher])
    process.env['PYTHONPATH'] = saved
    assert.equal(run.code, 0, shown(run))
    const job = readJob(out)
    const child = job.processes.find((p) => p.name.startsWith('rank1-pid'))
    assert.ok(child, `rank 1's child recorded under a name of its own: ${JSON.stringify(job.processes.map((p) => p.name))}`)
    assert.deepEqual(
      job.processes.map((p) => [p.name, p.rank, p.snapshot]),
      [
        ['rank0', 0, 'rank0.pickle'],
        ['rank1', 1, 'rank1.pickle'],
        [child.name, 1, `${child.name}.pickle`],
      ],
    )
    assert.deepEqual(
      readdirSync(out).filter((f) => f.endsWith('.claim')),
      [],
      'the claims are removed at the end',
    )
    assert.equal(readStats(out, 'rank1.stats.json')['world_size'], 2)
    assert.equal(readStats(out, 'rank1.stats.json')['memory_stats']['reserved_bytes.all.peak'], 4 << 20)
    for (const rank of [0, 1]) {
      const opened = await openInput(join(out, `rank${rank}.pickle`))
      assert.equal(Array.from(opened.trace.events.kind).filter((k) => k === EventKind.alloc).length, 2)
    }
    assert.equal(readFileSync(marker, 'utf8'), 'ran\nran\nran\nran\n', "their sitecustomize ran in the launcher, both ranks and rank 1's child")
  })

  it('a program that never initialises CUDA, and bad arguments: a warning, or exit 2 naming the option, nothing lost', async () => {
    const out = join(scratch, 'none')
    const run = await vramscope(['record', '--pytorch', '--skip-driver-check', '-o', out, '--', python!, '-c', 'print(1)'])
    assert.equal(run.code, 0, shown(run))
    assert.match(run.stderr, /warning: no snapshot was written/, shown(run))
    const again = await vramscope(['record', '--pytorch', '--skip-driver-check', '-o', join(scratch, 'basic'), '--', python!, '-c', 'print(1)'])
    assert.equal(again.code, 2, shown(again))
    assert.match(again.stderr, /basic: holds an earlier recording \(.*job\.json/, shown(again))
    for (const [args, message] of [
      [['--max-entries', '0'], /--max-entries: must be at least 1/],
      [['--max-entries', 'many'], /--max-entries: 'many' is not a whole number/],
      [['--snapshot-every', '-1'], /--snapshot-every: '-1' is not a whole number/],
      [['--workload', 'training'], /--pytorch: records a PyTorch program given after --/],
    ] as const) {
      const bad = await vramscope(['record', '--pytorch', '--skip-driver-check', '-o', join(scratch, 'never'), ...args, '--', python!, '-c', 'print(1)'])
      assert.equal(bad.code, 2, shown(bad))
      assert.match(bad.stderr, message, shown(bad))
    }
    const without = await vramscope(['record', '--max-entries', '5', '-o', join(scratch, 'x.vramscope'), '--', 'true'])
    assert.equal(without.code, 2)
    assert.match(without.stderr, /--max-entries: applies to --pytorch only/)
    assert.equal(existsSync(join(scratch, 'never')), false, 'nothing made for bad arguments')
  })

  it("with the interposer: each rank's driver calls in its own trace, beside its snapshot", { skip: skipInterposer }, async () => {
    const worker = await program('driver-worker.py', `import torch\nblocks = [torch.cuda.alloc(1 << 20) for _ in range(3)]\ntorch.cuda.free(blocks[0])\n`)
    const launcher = await program(
      'driver-launch.py',
      `import os, subprocess, sys
procs = [subprocess.Popen([sys.executable, ${JSON.stringify(worker)}], env=dict(os.environ, RANK=str(r), WORLD_SIZE="2")) for r in range(2)]
sys.exit(max(p.wait() for p in procs))
`,
    )
    const out = join(scratch, 'driver')
    process.env['VRAMSCOPE_INTERCEPT'] = library
    process.env['STAND_IN_CUDART'] = cudart
    const run = await vramscope(['record', '--pytorch', '--skip-driver-check', '-o', out, '--', python!, launcher])
    process.env['VRAMSCOPE_INTERCEPT'] = join(scratch, 'no-interposer-here.so')
    delete process.env['STAND_IN_CUDART']
    assert.equal(run.code, 0, shown(run))
    const job = readJob(out)
    assert.deepEqual(
      job.processes.map((p) => [p.name, p.snapshot, p.driver, p.driverEvents]),
      [
        ['rank0', 'rank0.pickle', 'rank0.driver.vramscope', 4],
        ['rank1', 'rank1.pickle', 'rank1.driver.vramscope', 4],
      ],
    )
    assert.deepEqual(
      readdirSync(out).filter((f) => f.endsWith('.calls.log')),
      [],
      'the raw logs are converted and removed',
    )
    const trace = await readTrace(join(out, 'rank1.driver.vramscope'))
    assert.equal(Array.from(trace.trace.events.kind).filter((k) => k === EventKind.alloc).length, 3)
  })
})
