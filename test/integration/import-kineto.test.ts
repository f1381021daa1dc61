// torch.profiler (Kineto) Chrome traces recorded with profile_memory=True, as vramscope opens
// them (src-main/services/import/kineto.ts): the field trace from a GPT-2 training run on an H200
// (gzip, as the profiler's export often is) opens by its content, its CUDA [memory] events become
// allocs and frees (counted here from the file itself, parsed whole, as the oracle), host events
// are counted and left out, the peak of Total Reserved is kept exactly; what was allocated before
// the profiler started stands in at the start, so the bytes live follow Total Allocated and the
// PyTorch-policy replay lands on the recorded reserved peak; info and whatif run on it.
// Damaged files are refused with the file named and exit 2, in seconds; a large trace opens in
// memory far below its size.
import assert from 'node:assert/strict'
import { createWriteStream } from 'node:fs'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { gunzipSync, gzipSync } from 'node:zlib'
import { after, before, describe, it } from 'node:test'

import { InputError } from '../../src-main/services/input-error.ts'
import { detectInputKind, kindOf, openInput } from '../../src-main/services/import/open-input.ts'
import { BEFORE_PROFILER_TAG, parseKinetoTrace } from '../../src-main/services/import/kineto.ts'
import { EventKind } from '../../src-main/services/trace/model.ts'
import { runBounded } from '../helpers/bounded-child.ts'
import { BIN, fixture, shown, vramscope, vramscopeJson } from '../helpers/cli.ts'

const FIELD = fixture('pytorch/field-profile.json.gz')

interface MemoryArgs {
  Addr: number
  Bytes: number
  'Total Reserved': number
  'Total Allocated': number
  'Device Id': number
  'Device Type': number
}
interface ChromeEvent {
  ph?: string
  name?: string
  ts?: number
  args?: MemoryArgs
}

let scratch: string
let fieldText: string
let memory: MemoryArgs[]
/** The CUDA [memory] events in time order (file order breaking ties), as the importer takes them. */
let cudaInTime: MemoryArgs[]
before(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'vramscope-kineto-'))
  fieldText = gunzipSync(await readFile(FIELD)).toString('utf8')
  const parsed = JSON.parse(fieldText) as { traceEvents: ChromeEvent[] }
  const events = parsed.traceEvents.filter((e) => e.name === '[memory]')
  memory = events.map((e) => e.args!)
  cudaInTime = events
    .map((e, i) => ({ e, i }))
    .filter(({ e }) => e.args!['Device Type'] === 1)
    .sort((a, b) => a.e.ts! - b.e.ts! || a.i - b.i)
    .map(({ e }) => e.args!)
})
after(async () => {
  await rm(scratch, { recursive: true, force: true })
})

const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')

describe('the field profiler trace (GPT-2 training, H200)', () => {
  it('opens as a kineto-trace: its CUDA [memory] events are the allocs and frees, host events counted', async () => {
    assert.equal(await detectInputKind(FIELD), 'kineto-trace')
    const input = await openInput(FIELD)
    assert.equal(input.kind, 'kineto-trace')
    const cuda = memory.filter((m) => m['Device Type'] === 1)
    const host = memory.filter((m) => m['Device Type'] === 0)
    assert.ok(cuda.length > 2000 && host.length > 0, `the fixture has ${cuda.length} CUDA and ${host.length} host memory events`)
    const { kind, size } = input.trace.events
    let allocs = 0
    let frees = 0
    let allocBytes = 0
    for (let i = 0; i < kind.length; i++) {
      if (kind[i] === EventKind.alloc) {
        allocs++
        allocBytes += size[i]!
      } else if (kind[i] === EventKind.free) frees++
    }
    const p = input.trace.meta.properties
    assert.equal(p['kineto.unknown_frees'], '0', 'sorted by time, every free finds its allocation')
    // What was allocated before the first event (its Total Allocated less its Bytes), none of it
    // freed while the profiler ran: one block allocated at the start, never freed.
    const first = cudaInTime[0]!
    const allocatedBefore = first['Total Allocated'] - first.Bytes
    assert.ok(allocatedBefore > 0, `${allocatedBefore} bytes allocated before the profiler started`)
    assert.equal(p['kineto.allocated_before'], String(allocatedBefore))
    assert.equal(p['kineto.stand_in_allocs'], '1')
    assert.equal(p['kineto.stand_in_bytes'], String(allocatedBefore))
    assert.equal(allocs, cuda.filter((m) => m.Bytes > 0).length + 1)
    assert.equal(frees, cuda.filter((m) => m.Bytes < 0).length)
    assert.equal(
      allocBytes,
      cuda.filter((m) => m.Bytes > 0).reduce((a, m) => a + m.Bytes, allocatedBefore),
    )
    const e = input.trace.events
    assert.deepEqual(
      [e.kind[0], e.size[0], e.time[0], e.device[0], input.trace.tables.tags[e.tag[0]!]],
      [EventKind.alloc, allocatedBefore, 0, 0, BEFORE_PROFILER_TAG],
      'the stand-in is the first event',
    )
    for (let i = 1; i < kind.length; i++) assert.ok(kind[i] !== EventKind.free || e.id[i] !== e.id[0], `event ${i} frees the stand-in`)
    assert.ok(
      input.trace.meta.warnings.some(
        (w) =>
          w.startsWith(`${allocatedBefore} bytes were allocated before the profiler's first memory event`) && w.includes('every replay starts holding them'),
      ),
      input.trace.meta.warnings.join('\n'),
    )
    assert.ok(!input.trace.meta.warnings.some((w) => /skipped|start without/.test(w)), input.trace.meta.warnings.join('\n'))
    assert.equal(p['kineto.peak_reserved'], String(Math.max(...cuda.map((m) => m['Total Reserved']))))
    assert.equal(p['kineto.host_events'], String(host.length))
    assert.equal(p['kineto.memory_events'], String(cuda.length))
    assert.ok(input.trace.meta.warnings.some((w) => w.startsWith(`${host.length} host (CPU) memory events were left out`)))
    // The events are in time order (the file has two threads' apart), on cuda:0.
    const { time, device } = input.trace.events
    for (let i = 1; i < time.length; i++) assert.ok(time[i]! >= time[i - 1]!, `event ${i} before the one above`)
    assert.ok(device.every((d) => d === 0))
    assert.equal(p['device.name'], 'NVIDIA H200')
    assert.equal(p['device.total_bytes'], '150109880320')
  })

  it("info and replay report the profiler's recorded reserved peak, and each strategy's distance from it", async () => {
    const cuda = memory.filter((m) => m['Device Type'] === 1)
    const peak = Math.max(...cuda.map((m) => m['Total Reserved']))
    const info = await vramscopeJson<{ recordedReserved: { peak: number; points: number } }>(['info', FIELD])
    assert.equal(info.recordedReserved.peak, peak)
    assert.ok(info.recordedReserved.points > 1 && info.recordedReserved.points <= cuda.length, `${info.recordedReserved.points} changes`)
    const text = await vramscope(['info', FIELD])
    assert.match(text.stdout, /recorded reserved\s+peak 1\.28 GiB, \d+ changes \(the profiler's Total Reserved\)/)
    const replay = await vramscopeJson<{
      strategies: { name: string; summary: Record<string, number> }[]
      recordedReserved: { peak: number; strategies: { name: string; peakReserved: number; relativeDifference: number }[] }
    }>(['replay', FIELD, '-s', 'caching:preset=pytorch,slab'])
    assert.equal(replay.recordedReserved.peak, peak)
    assert.deepEqual(
      replay.recordedReserved.strategies.map((s) => s.name),
      replay.strategies.map((s) => s.name),
    )
    for (const s of replay.recordedReserved.strategies) {
      const own = replay.strategies.find((r) => r.name === s.name)!.summary['peakReserved']!
      assert.equal(s.peakReserved, own)
      assert.equal(s.relativeDifference, (own - peak) / peak)
    }
    const table = await vramscope(['replay', FIELD, '-s', 'caching:preset=pytorch'])
    assert.match(
      table.stdout,
      /the profiler's recorded peak reserved: 1\.28 GiB\n  caching \(pytorch\): peak reserved [\d.]+ [KMG]iB \([+-][\d.]+ % of the recorded\)/,
    )
    // Saved (`replay -o`, trace format 1.2), the curve comes back with the trace, point for point.
    const dir = await mkdtemp(join(tmpdir(), 'vramscope-kineto-saved-'))
    try {
      const saved = join(dir, 'profile.vramscope')
      await vramscope(['replay', FIELD, '-s', 'slab', '-o', saved])
      const [fromTrace, fromFile] = await Promise.all([openInput(FIELD), openInput(saved)])
      assert.deepEqual(Array.from(fromFile.trace.recordedReserved!.index), Array.from(fromTrace.trace.recordedReserved!.index))
      assert.deepEqual(Array.from(fromFile.trace.recordedReserved!.bytes), Array.from(fromTrace.trace.recordedReserved!.bytes))
      const again = await vramscopeJson<{ recordedReserved: { peak: number; strategies: { name: string; peakReserved: number }[] } }>([
        'replay',
        saved,
        '-s',
        'pytorch',
      ])
      assert.equal(again.recordedReserved.peak, peak)
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })

  it("after the stand-in, the bytes live at each event are the profiler's Total Allocated, and the recorded reserved curve its Total Reserved", async () => {
    const input = await openInput(FIELD)
    const seeded = Number(input.trace.meta.properties['kineto.stand_in_allocs'])
    const { kind, id, size } = input.trace.events
    assert.equal(kind.length, seeded + cudaInTime.length, 'one request event for each CUDA memory event, after the stand-ins')
    const series = input.trace.recordedReserved!
    assert.equal(series.index[0], seeded, 'the curve starts at the first recorded event')
    let live = 0
    let p = -1
    const sizes = new Map<number, number>()
    for (let i = 0; i < kind.length; i++) {
      if (kind[i] === EventKind.alloc) (sizes.set(id[i]!, size[i]!), (live += size[i]!))
      else if (kind[i] === EventKind.free) live -= sizes.get(id[i]!)!
      while (p + 1 < series.index.length && series.index[p + 1]! <= i) p++
      if (i < seeded) continue
      const recorded = cudaInTime[i - seeded]!
      assert.equal(live, recorded['Total Allocated'], `event ${i}: the bytes live`)
      assert.equal(series.bytes[p], recorded['Total Reserved'], `event ${i}: the recorded reserved`)
    }
  })

  it("the PyTorch-policy replay lands within 2 % of the profiler's recorded reserved peak; every strategy starts holding the stand-in", async (t) => {
    const peak = Math.max(...cudaInTime.map((m) => m['Total Reserved']))
    const peakAllocated = Math.max(...cudaInTime.map((m) => m['Total Allocated']))
    const replay = await vramscopeJson<{
      strategies: { name: string; summary: Record<string, number> }[]
      recordedReserved: { peak: number; strategies: { name: string; peakReserved: number; relativeDifference: number }[] }
    }>(['replay', FIELD, '-s', 'pytorch,slab,buddy,cuda_malloc'])
    assert.equal(replay.recordedReserved.peak, peak)
    const pytorch = replay.recordedReserved.strategies.find((s) => s.name === 'pytorch')!
    t.diagnostic(`the pytorch replay: peak reserved ${pytorch.peakReserved} against the recorded ${peak} (${(pytorch.relativeDifference * 100).toFixed(2)} %)`)
    assert.ok(Math.abs(pytorch.relativeDifference) <= 0.02, `${pytorch.peakReserved} replayed, ${peak} recorded`)
    // Every strategy holds what the program held: its requested bytes peak and end where Total Allocated does.
    for (const s of replay.strategies) {
      assert.equal(s.summary['failures'], 0, `${s.name} served every request`)
      assert.equal(s.summary['peakRequested'], peakAllocated, `${s.name}: peak requested`)
      assert.equal(s.summary['finalRequested'], cudaInTime.at(-1)!['Total Allocated'], `${s.name}: requested at the end`)
    }
  })

  it('each alloc is tagged with the innermost cpu_op of its thread that encloses it', async () => {
    const input = await openInput(FIELD)
    const events = (JSON.parse(fieldText) as { traceEvents: (ChromeEvent & { cat?: string; dur?: number; pid?: number; tid?: number })[] }).traceEvents
    const ops = events.filter((e) => e.cat === 'cpu_op' && e.ph === 'X')
    // The oracle, by brute force: of the ops on the same thread holding ts, the latest to start (the shortest on a tie).
    const allocs = events
      .map((e, i) => ({ e, i }))
      .filter(({ e }) => e.name === '[memory]' && e.args!['Device Type'] === 1 && e.args!.Bytes > 0)
      .sort((a, b) => a.e.ts! - b.e.ts! || a.i - b.i)
    const expected = allocs.map(({ e }) => {
      let best: (typeof ops)[number] | undefined
      for (const o of ops)
        if (o.pid === e.pid && o.tid === e.tid && o.ts! <= e.ts! && e.ts! <= o.ts! + o.dur!)
          if (!best || o.ts! > best.ts! || (o.ts === best.ts && o.dur! < best.dur!)) best = o
      return best?.name ?? null
    })
    const { kind, tag } = input.trace.events
    const got: (string | null)[] = []
    // After the stand-in, which is tagged as what it is (checked above).
    const seeded = Number(input.trace.meta.properties['kineto.stand_in_allocs'])
    for (let i = seeded; i < kind.length; i++) if (kind[i] === EventKind.alloc) got.push(tag[i]! < 0 ? null : input.trace.tables.tags[tag[i]!]!)
    assert.deepEqual(got, expected)
    assert.ok(
      expected.every((name) => name !== null),
      'in this trace every allocation happens inside an op',
    )
    assert.equal(input.trace.meta.properties['kineto.tagged_allocs'], String(allocs.length))
    const top = await vramscope(['top', FIELD, '--by', 'tag'])
    assert.equal(top.code, 0, shown(top))
    assert.match(top.stdout, /aten::addmm/)
    // The stand-in for what was allocated before the profiler started is named by its own tag.
    const first = cudaInTime[0]!
    const standIn = (await vramscopeJson<{ groups: { key: string; bytes: number; blocks: number }[] }>(['top', FIELD, '--by', 'tag'])).groups.find(
      (g) => g.key === BEFORE_PROFILER_TAG,
    )
    assert.deepEqual(standIn && { bytes: standIn.bytes, blocks: standIn.blocks }, { bytes: first['Total Allocated'] - first.Bytes, blocks: 1 })
  })

  it('vramscope info names the format; whatif --conf expandable_segments:True --json runs', async () => {
    const info = await vramscope(['info', FIELD])
    assert.equal(info.code, 0, shown(info))
    assert.match(info.stdout, /format\s+torch\.profiler trace \(Chrome JSON, gzip\)/)
    assert.match(info.stdout, /1,244 allocs, 1,240 frees/) // the file's 1,243 and the stand-in
    const whatif = await vramscopeJson<{ configs: { conf: string; peakReserved: number; failures: number }[] }>([
      'whatif',
      FIELD,
      '--conf',
      'expandable_segments:True',
    ])
    const conf = whatif.configs.find((c) => c.conf === 'expandable_segments:True')
    assert.ok(conf, JSON.stringify(whatif.configs))
    assert.ok(conf.peakReserved > 1e9 && conf.failures === 0, JSON.stringify(conf))
  })

  it('the same trace uncompressed opens alike; detection of other JSON and gzip is unchanged', async () => {
    const plain = join(scratch, 'field-profile.json')
    await writeFile(plain, fieldText)
    const a = await openInput(plain)
    assert.equal(a.kind, 'kineto-trace')
    assert.equal(a.trace.events.kind.length, memory.filter((m) => m['Device Type'] === 1).length + 1, 'and the stand-in')
    assert.equal(await detectInputKind(fixture('pytorch/synthetic.json')), 'pytorch-snapshot')
    const head = (text: string) => new TextEncoder().encode(text)
    assert.equal(kindOf(head('{"segments": [], "device_traces": []}'), 'x.json'), 'pytorch-snapshot')
    assert.equal(kindOf(head('{\n "schemaVersion": 1, "deviceProperties": ['), 'x'), 'kineto-trace')
    assert.throws(() => kindOf(gzipSync('{"segments": []}'), 'x.json.gz'), /gzip-compressed; decompress it first/)
  })
})

/** A profiler trace of `events`, as the profiler lays one out. */
function trace(events: string[]): string {
  return `{\n  "schemaVersion": 1,\n  "displayTimeUnit": "ms",\n  "traceEvents": [\n${events.join(',\n')}\n  ],\n  "traceName": "x"\n}\n`
}
function memoryEvent(ts: number, addr: number, bytes: number | string, device = 0, type = 1): string {
  return `  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": ${ts}, "args": {"Total Reserved": 2097152, "Total Allocated": 0, "Bytes": ${typeof bytes === 'string' ? JSON.stringify(bytes) : bytes}, "Device Id": ${device}, "Device Type": ${type}, "Addr": ${addr}}}`
}
/** What with_stack=True puts on an op: its Python frames, a few hundred bytes. */
const STACK = Array.from({ length: 6 }, (_, i) => `torch/nn/modules/module.py(${1700 + i}): _call_impl;train.py(${40 + i}): forward`).join(';')
function cpuOp(ts: number, name: string): string {
  return `  {"ph": "X", "cat": "cpu_op", "name": ${JSON.stringify(name)}, "pid": 1, "tid": 1, "ts": ${ts}, "dur": 5, "args": {"External id": 1, "Input Dims": [[2048, 8000], [2048]], "Input type": ["float", "long int"], "Concrete Inputs": ["", "{\\"a\\": [1]}"], "Ev Idx": 0, "Call stack": "${STACK}"}}`
}

describe('hostile profiler traces', () => {
  const cases: [string, () => Promise<string>, RegExp][] = [
    [
      'a truncated file',
      async () => {
        const path = join(scratch, 'cut.json')
        await writeFile(path, fieldText.slice(0, Math.floor(fieldText.length / 2)))
        return path
      },
      /byte \d+: the file ends inside the traceEvents array \(after \d+ whole events, in one begun at byte \d+\): it is cut short/,
    ],
    [
      'a truncated gzip file',
      async () => {
        const gz = await readFile(FIELD)
        const path = join(scratch, 'cut.json.gz')
        await writeFile(path, gz.subarray(0, Math.floor(gz.length / 2)))
        return path
      },
      /the gzip data is damaged or cut short/,
    ],
    [
      'an event over the size bound',
      async () => {
        const path = join(scratch, 'huge-event.json')
        const big = `  {"ph": "X", "cat": "cpu_op", "name": "x", "args": {"stack": ${JSON.stringify('a\\"b'.repeat(400_000))}}}`
        await writeFile(path, trace([memoryEvent(1, 4096, 512), big, memoryEvent(3, 4096, -512)]))
        return path
      },
      /byte \d+: event 1 of traceEvents is larger than 1048576 bytes/,
    ],
    [
      'a non-numeric Bytes',
      async () => {
        const path = join(scratch, 'bytes.json')
        await writeFile(path, trace([memoryEvent(1, 4096, 512), memoryEvent(2, 8192, '1024')]))
        return path
      },
      /byte \d+: event 1 of traceEvents \(\[memory\]\): "Bytes" is "1024", not a whole number/,
    ],
    [
      'a traceEvents that is not an array',
      async () => {
        const path = join(scratch, 'object.json')
        await writeFile(path, '{"schemaVersion": 1, "traceEvents": {"ph": "i"}}')
        return path
      },
      /byte \d+: "traceEvents" is not an array/,
    ],
  ]
  for (const [name, make, message] of cases)
    it(`${name}: an InputError naming the file; the CLI exits 2, in seconds`, async () => {
      const path = await make()
      const started = Date.now()
      await assert.rejects(openInput(path), (e: unknown) => {
        assert.ok(e instanceof InputError, String(e))
        assert.equal(e.file, path)
        assert.match(e.message, message)
        return true
      })
      const run = await vramscope(['info', path])
      assert.equal(run.code, 2, shown(run))
      assert.match(run.stderr, new RegExp(`^vramscope: ${escape(path)}: .*`, 'm'))
      assert.match(run.stderr, message)
      assert.doesNotMatch(run.stderr, /internal error|\n\s+at /, 'no crash, no stack')
      assert.ok(Date.now() - started < 20_000, `took ${Date.now() - started} ms`)
    })

  it('a free of an unknown address frees a stand-in allocated at the start; host and other devices left out, events sorted by time', () => {
    const text = trace([
      memoryEvent(5, 4096, 512),
      cpuOp(6, 'aten::empty'),
      memoryEvent(1, 999, -64), // allocated before the profiler started
      memoryEvent(7, 4096, -512),
      memoryEvent(8, 4096, 256, 1), // same address, another device
      memoryEvent(9, 12, 100, -1, 0), // host
      memoryEvent(9, 12, 100, 0, 7), // another device type
    ])
    const r = parseKinetoTrace(new TextEncoder().encode(text), 'mem.json')
    assert.equal(r.unknownFrees, 1)
    assert.equal(r.standInAllocs, 1, 'Total Allocated 0 after the free: the 64 bytes were all there was')
    assert.equal(r.hostEvents, 1)
    assert.equal(r.otherDeviceEvents, 1)
    assert.equal(r.traceEvents, 7)
    const e = r.trace.events
    assert.deepEqual([...e.kind], [EventKind.alloc, EventKind.free, EventKind.alloc, EventKind.free, EventKind.alloc])
    assert.deepEqual([...e.size], [64, 0, 512, 0, 256])
    assert.deepEqual([...e.device], [0, 0, 0, 0, 1])
    assert.equal(e.id[1], e.id[0], "the free is the stand-in's")
    assert.deepEqual([...e.time], [0, 0, 4000, 6000, 7000]) // ns from the first memory event (ts 1 µs, the unknown free)
    // The op at 6-11 µs holds only the alloc at 8 (on cuda:1, the same thread).
    assert.deepEqual(
      [...e.tag].map((t) => (t < 0 ? null : r.trace.tables.tags[t])),
      [BEFORE_PROFILER_TAG, null, null, null, 'aten::empty'],
    )
    assert.equal(r.trace.meta.properties['kineto.stand_in_bytes'], '64')
    assert.ok(r.trace.meta.warnings.some((w) => w.startsWith('1 free of an address with no live allocation') && w.includes('stands in')))
    assert.equal(r.liveAtEnd, 1)
    assert.equal(r.peakReserved, 2097152)
    // From the first recorded event, after the stand-in; cuda:1's 2 MiB joins at its event.
    assert.deepEqual([...r.recordedReserved!.index], [1, 4])
    assert.deepEqual([...r.recordedReserved!.bytes], [2097152, 4194304])
  })

  it('tags: the innermost enclosing cpu_op of the same thread, none outside every op', () => {
    const op = (ts: number, dur: number, name: string, tid = 1) =>
      `{"ph": "X", "cat": "cpu_op", "name": "${name}", "pid": 1, "tid": ${tid}, "ts": ${ts}, "dur": ${dur}, "args": {}}`
    const text = trace([
      op(0, 100, 'outer'),
      op(10, 10, 'inner'),
      op(40, 10, 'other thread', 2),
      op(60, 5, 'sibling'),
      memoryEvent(15, 1 << 12, 8), // inner
      memoryEvent(45, 2 << 12, 8), // outer: the op at 40 is another thread's
      memoryEvent(62, 3 << 12, 8), // sibling
      memoryEvent(70, 4 << 12, 8), // outer again, the sibling ended
      memoryEvent(200, 5 << 12, 8), // none
      memoryEvent(20, 6 << 12, 8), // inner: its end is inclusive
    ])
    const r = parseKinetoTrace(new TextEncoder().encode(text), 'tags.json')
    const { tag } = r.trace.events
    const names = [...tag].map((t) => (t < 0 ? null : r.trace.tables.tags[t]))
    // In time order: 15, 20, 45, 62, 70, 200.
    assert.deepEqual(names, ['inner', 'inner', 'outer', 'sibling', 'outer', null])
    assert.equal(r.trace.meta.properties['kineto.cpu_ops'], '4')
  })
})

describe('a large profiler trace', () => {
  it('200k events open in memory far below the file size (streamed, one event at a time)', async (t) => {
    const path = join(scratch, 'large.json')
    const out = createWriteStream(path)
    const write = (s: string) => (out.write(s) ? Promise.resolve() : new Promise<void>((r) => out.once('drain', () => r())))
    await write('{\n  "schemaVersion": 1,\n  "traceEvents": [\n')
    const N = 200_000
    let allocs = 0
    for (let i = 0; i < N; i++) {
      const kind = i % 5
      // Four cpu_ops for each memory event, as in a real trace; allocations freed two later.
      const event =
        kind < 3
          ? cpuOp(i, `aten::op_${i % 97}`)
          : kind === 3
            ? memoryEvent(i, 0x7f0000000000 + (i % 1000) * 4096, 4096 + (i % 7) * 512)
            : memoryEvent(i, 0x7f0000000000 + ((i - 1) % 1000) * 4096, -(4096 + ((i - 1) % 7) * 512))
      if (kind === 3) allocs++
      await write(`${i === 0 ? '' : ',\n'}${event}`)
    }
    await write('\n  ]\n}\n')
    await new Promise<void>((r, j) => out.end((e?: Error | null) => (e ? j(e) : r())))
    const fileBytes = (await readFile(path)).length
    assert.ok(fileBytes > 100e6, `the trace is ${fileBytes} bytes`)

    const small = join(scratch, 'small.json')
    await writeFile(small, trace([memoryEvent(1, 4096, 512), memoryEvent(2, 4096, -512)]))
    const baseline = await runBounded([BIN, 'info', small, '--json'], 60_000, 2e9)
    assert.equal(baseline.code, 0, baseline.stderr)
    const run = await runBounded([BIN, 'info', path, '--json'], 120_000, 2e9)
    assert.equal(run.code, 0, run.stderr)
    const info = JSON.parse(run.stdout) as { events: number }
    assert.equal(info.events, 2 * allocs)
    const grown = run.peakRss - baseline.peakRss
    t.diagnostic(
      `${Math.round(fileBytes / 1e6)} MB trace: peak RSS ${Math.round(run.peakRss / 1e6)} MB, ${Math.round(grown / 1e6)} MB above a 2-event trace's, ${Math.round(run.ms)} ms`,
    )
    assert.ok(grown < fileBytes, `opening a ${Math.round(fileBytes / 1e6)} MB trace grew the peak memory by ${Math.round(grown / 1e6)} MB`)
  })
})
