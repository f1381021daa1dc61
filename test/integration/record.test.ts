// `vramscope record` without a GPU: its arguments, the no-GPU message and exit code, and the
// interposer end to end against the stand-in driver and runtime that native/tests/intercept/
// builds (fake_program: it prints the records it expects, with its own addresses): the trace file
// holds those calls as requests and as the recorded layout, and a kill -9 of the program or of the
// recorder mid-run leaves a file that opens. Needs the native ctest build (npm test makes it; set
// VRAMSCOPE_NATIVE_BUILD for another directory); without it the interposer cases skip, saying so.
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { existsSync, readFileSync, readdirSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { setTimeout as sleep } from 'node:timers/promises'
import { after, before, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'

import { nvidiaDriverPresent } from '../../src-main/services/record/program.ts'
import { readTrace } from '../../src-main/services/trace/file.ts'
import { LayoutOp } from '../../src-shared/layout.ts'
import { EventKind } from '../../src-main/services/trace/model.ts'
import { BIN, shown, vramscope } from '../helpers/cli.ts'

const root = fileURLToPath(new URL('../..', import.meta.url))
const build = join(root, process.env['VRAMSCOPE_NATIVE_BUILD'] ?? join('native', 'build'))
const library = join(build, 'libvramscope_intercept.so')
const program = join(build, 'intercept_fake_program')
const built = existsSync(library) && existsSync(program)
const skipInterposer = built ? false : `the interposer and fake_program are not built in ${build} (npm test builds them; or set VRAMSCOPE_NATIVE_BUILD)`

let scratch = ''
before(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'vramscope-record-'))
})
after(async () => {
  await rm(scratch, { recursive: true, force: true })
})

// Every `vramscope` this file runs finds the interposer of that build.
if (built) process.env['VRAMSCOPE_INTERCEPT'] = library

describe('arguments and the no-GPU message', () => {
  it('nothing to record, both a program and a workload, program-only and workload-only options: exit 2 naming the option', async () => {
    const out = join(scratch, 'never.vramscope')
    for (const [args, message] of [
      [['record', '-o', out], /record: nothing to record/],
      [['record', '-o', out, '--workload', 'training', '--', 'python', 'x.py'], /--workload: .*either/],
      [['record', '-o', out, '--strategy', 'slab', '--', 'true'], /--strategy: applies to --workload only/],
      [['record', '-o', out, '--stack', '99', '--', 'true'], /--stack: '99' is not a whole number from 0 to 32/],
      [['record', '-o', out, '--workload', 'training', '--param', 'steps'], /--param: 'steps' is not KEY=VALUE/],
      [['record', '-o', out, '--workload', 'training', '--strategy', 'no_such_strategy'], /unknown strategy 'no_such_strategy'/],
    ] as const) {
      const run = await vramscope(args)
      assert.equal(run.code, 2, shown(run))
      assert.match(run.stderr, message, shown(run))
      assert.doesNotMatch(run.stderr, /internal error|\n\s+at /)
    }
    const missing = await vramscope(['record', '--', 'true'])
    assert.equal(missing.code, 2)
    assert.match(missing.stderr, /-o, --output: required: the \.vramscope file to record into/)
    assert.equal(existsSync(out), false, 'nothing written for bad arguments')
  })

  it(
    'without an NVIDIA driver: the message, exit 2, for a program and for a workload',
    { skip: nvidiaDriverPresent() && 'this machine has an NVIDIA driver' },
    async () => {
      const out = join(scratch, 'no-gpu.vramscope')
      for (const args of [
        ['record', '-o', out, '--', 'true'],
        ['record', '-o', out, '--workload', 'training'],
      ]) {
        const run = await vramscope(args)
        assert.equal(run.code, 2, shown(run))
        assert.match(run.stderr, /^vramscope record: recording needs an NVIDIA GPU and driver; import and replay work without one/m, shown(run))
        const json = await vramscope([...args, '--json'])
        assert.equal(json.code, 2)
        assert.equal((JSON.parse(json.stdout) as { error: { kind: string } }).error.kind, 'no-gpu')
      }
      assert.equal(existsSync(out), false)
    },
  )

  it('a program that does not exist: exit 2 naming it', { skip: skipInterposer }, async () => {
    const run = await vramscope(['record', '-o', join(scratch, 'x.vramscope'), '--skip-driver-check', '--', 'no-such-program-vramscope'])
    assert.equal(run.code, 2, shown(run))
    assert.match(run.stderr, /no-such-program-vramscope: command not found on PATH/)
  })
})

interface Expected {
  op: number
  address: bigint
  size: number
  stream: bigint
  status: number
  thread: string
}

function expectations(stdout: string): Expected[] {
  return stdout
    .split('\n')
    .filter((l) => l.startsWith('expect '))
    .map((l) => {
      const [, op, address, size, stream, status, , thread] = l.split(' ')
      return { op: Number(op), address: BigInt(address!), size: Number(size), stream: BigInt(stream!), status: Number(status), thread: thread! }
    })
}

/** Runs the CLI with its stdout piped (the recorded program inherits it). */
function startRecord(args: string[]) {
  const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, VRAMSCOPE_INTERCEPT: library }, stdio: ['ignore', 'pipe', 'pipe'] })
  let stderr = ''
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()))
  return { child, stderr: () => stderr }
}

/** The pid of the recorded program: a child of the recorder's process. */
function childOf(pid: number): number | undefined {
  for (const task of readdirSync(`/proc/${pid}/task`)) {
    const children = readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').trim()
    if (children) return Number(children.split(' ')[0])
  }
  return undefined
}

describe('the interposer against a stand-in driver', { skip: skipInterposer }, () => {
  it('every allocation, free and failure the program made is in the trace, and the layout holds its real addresses', async () => {
    const out = join(scratch, 'script.vramscope')
    const { child, stderr } = startRecord(['record', '-o', out, '--skip-driver-check', '--', program, 'script'])
    let stdout = ''
    child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()))
    const [code] = (await once(child, 'exit')) as [number]
    assert.equal(code, 0, stderr())
    assert.match(stderr(), /the program exited with code 0; .*: 17 events \(8 allocations, 8 frees, 1 out of memory, 1 maps\) from 2 threads/)
    const want = expectations(stdout)
    assert.equal(want.length, 25)
    const { trace, strategies, file } = await readTrace(out)
    assert.equal(file.complete, true)
    assert.equal(trace.meta.source, 'recording')
    const e = trace.events
    // Device and managed allocations in the order made; host memory and virtual memory are not requests.
    const deviceOps = new Set([1, 3, 5, 16, 18])
    const allocs = want.filter((w) => deviceOps.has(w.op) && w.status === 0)
    const gotAllocs = [...e.kind.keys()].filter((i) => e.kind[i] === EventKind.alloc)
    assert.deepEqual(
      gotAllocs.map((i) => e.size[i]),
      allocs.map((w) => w.size),
    )
    assert.equal([...e.kind].filter((k) => k === EventKind.free).length, allocs.length, 'every block freed')
    const oom = [...e.kind.keys()].find((i) => e.kind[i] === EventKind.oom)!
    assert.equal(e.size[oom], 2 * 2 ** 40)
    assert.deepEqual(new Set(trace.tables.streams), new Set(['0', '0x10', '0x20', '0x30']))
    const streamOf = (i: number) => trace.tables.streams[e.stream[i]!]
    const asyncAlloc = gotAllocs.find((i) => e.size[i] === 2048)!
    assert.equal(streamOf(asyncAlloc), '0x10')
    const asyncFree = [...e.kind.keys()].find((i) => e.kind[i] === EventKind.free && e.id[i] === e.id[asyncAlloc])!
    assert.equal(streamOf(asyncFree), '0x20', 'the free is on the stream it was issued on')
    const threads = new Set(trace.tables.tags.map((t) => t.replace(/^.*thread /, '')))
    assert.equal(threads.size, 2)
    for (let i = 1; i < e.time.length; i++) assert.ok(e.time[i]! >= e.time[i - 1]!, 'time never decreases')
    // The recorded layout: each allocation at its real address, maps where they were.
    const recorded = strategies.find((s) => s.name === 'cuda (recorded)')!
    assert.ok(recorded.layout, 'the recorded layout is in the file')
    const l = recorded.layout!
    const layoutAllocs = [...l.op.keys()].filter((i) => l.op[i] === LayoutOp.alloc).map((i) => l.address[i])
    assert.deepEqual(
      layoutAllocs,
      allocs.map((w) => w.address),
    )
    const mapAt = [...l.op.keys()].find((i) => l.op[i] === LayoutOp.map)!
    assert.equal(l.address[mapAt], want.find((w) => w.op === 34)!.address)
    assert.equal(l.size[mapAt], 2 << 20)
    assert.equal([...l.op].filter((op) => op === LayoutOp.failure).length, 1)
    assert.equal(recorded.summary?.['nestedDriverCalls'], 11, "the runtime's own driver calls were not recorded twice")
    assert.equal(recorded.summary?.['unknownFrees'], 0)
    assert.ok(recorded.summary!['allocLatencyP50Ns']! > 0)
  })

  it('the program killed with SIGKILL mid-run: the file is complete up to the kill and opens', async () => {
    const out = join(scratch, 'program-killed.vramscope')
    const { child, stderr } = startRecord(['record', '-o', out, '--skip-driver-check', '--', program, 'loop', '200'])
    const lines = createInterface({ input: child.stdout! })
    const [first] = (await once(lines, 'line')) as [string]
    assert.equal(first, 'started')
    await sleep(700)
    const recorded = childOf(child.pid!)
    assert.ok(recorded, 'the program runs as a child of the recorder')
    process.kill(recorded, 'SIGKILL')
    const [code] = (await once(child, 'exit')) as [number]
    assert.equal(code, 0, stderr())
    assert.match(stderr(), /the program was ended by SIGKILL/)
    const { trace, file } = await readTrace(out)
    assert.equal(file.complete, true, 'the recorder itself finished the file')
    assert.ok(trace.meta.warnings.some((w) => /ended by SIGKILL/.test(w)))
    const allocs = [...trace.events.kind].filter((k) => k === EventKind.alloc).length
    assert.ok(allocs > 100, `${allocs} allocations recorded in 700 ms`)
  })

  it('the recorder killed with SIGKILL mid-run: the file opens, incomplete, with what was flushed', async () => {
    const out = join(scratch, 'recorder-killed.vramscope')
    const { child } = startRecord(['record', '-o', out, '--skip-driver-check', '--', program, 'loop', '200'])
    const lines = createInterface({ input: child.stdout! })
    await once(lines, 'line')
    await sleep(900)
    const recorded = childOf(child.pid!)
    child.kill('SIGKILL')
    await once(child, 'exit')
    if (recorded) process.kill(recorded, 'SIGKILL') // the orphaned program
    const { trace, file } = await readTrace(out)
    assert.equal(file.complete, false)
    assert.ok(trace.events.kind.length > 0, 'events flushed before the kill are there')
  })
})
