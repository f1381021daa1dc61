// The PyTorch snapshot importer on the real snapshots recorded on an H100 (each with the
// torch.cuda.memory_stats() of the same run and a csv of its device trace), on a small synthetic
// snapshot with every action, two devices and a ring-buffer overflow (its events are listed in
// scripts/fixtures/make_hostile_pickles.py), on a real snapshot whose oldest events were dropped,
// and on bad input.
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'

import {
  RECORDED_LAYOUT_NAME,
  importPytorchSnapshot,
  importPytorchSnapshotBytes,
  parsePytorchSnapshot,
  roundedSize,
  type PytorchImport,
} from '../../../../../src-main/services/import/pytorch/index.ts'
import { SnapshotImportError, type SnapshotErrorCode } from '../../../../../src-main/services/import/pytorch/snapshot-error.ts'
import { PickleDict, unpickle, type PickleValue } from '../../../../../src-main/services/import/pytorch/pickle-reader.ts'
import { LayoutOp, type LayoutTrace } from '../../../../../src-shared/layout.ts'
import { EventKind, type TraceEvents } from '../../../../../src-main/services/trace/model.ts'

const dir = join(import.meta.dirname, '..', '..', '..', '..', 'fixtures', 'pytorch')
const path = (name: string) => join(dir, name)
const bytes = (name: string) => new Uint8Array(readFileSync(path(name)))
const REAL = ['convnet_varimg', 'inference_mixed', 'mlp_varbatch', 'transformer_varseq']
const MiB = 1 << 20

interface CsvRow {
  action: string
  address: number
  size: number
  stream: number
  time: number
}

function csv(name: string): CsvRow[] {
  const lines = readFileSync(path(`${name}.trace.csv`), 'utf8')
    .trim()
    .split('\n')
  assert.equal(lines[0], 'action,address,size,stream,time_us')
  return lines.slice(1).map((line) => {
    const [action, address, size, stream, time] = line.split(',')
    return { action: action!, address: Number(address), size: Number(size), stream: Number(stream), time: Number(time) }
  })
}

function stats(name: string): Record<string, number> {
  return JSON.parse(readFileSync(path(`${name}.stats.json`), 'utf8')).memory_stats
}

function layoutOf(result: PytorchImport, index = 0): LayoutTrace {
  const layout = result.recorded[index]?.layout
  assert.ok(layout, 'a recorded layout')
  return layout
}

function rows(events: TraceEvents, kind: number): number[] {
  const out: number[] = []
  events.kind.forEach((k, i) => k === kind && out.push(i))
  return out
}

function opRows(layout: LayoutTrace, op: number): number[] {
  const out: number[] = []
  layout.op.forEach((o, i) => o === op && out.push(i))
  return out
}

/** Bytes reserved from the device over the layout (reservations and mappings), and its peak. */
function reservedPeak(layout: LayoutTrace): number {
  let reserved = 0
  let peak = 0
  for (let i = 0; i < layout.op.length; i++) {
    const op = layout.op[i]
    if (op === LayoutOp.regionReserve || op === LayoutOp.map) reserved += layout.size[i]!
    if (op === LayoutOp.regionRelease || op === LayoutOp.unmap) reserved -= layout.size[i]!
    peak = Math.max(peak, reserved)
  }
  return peak
}

function sameImport(a: PytorchImport, b: PytorchImport, ignoreProperties: string[] = []): void {
  for (const column of ['kind', 'id', 'size', 'stream', 'device', 'time', 'stack', 'tag'] as const)
    assert.deepEqual(Array.from(a.trace.events[column]), Array.from(b.trace.events[column]), `events.${column}`)
  assert.deepEqual(a.trace.tables, b.trace.tables)
  assert.deepEqual(a.trace.meta.warnings, b.trace.meta.warnings)
  const props = (p: Record<string, string>) => Object.fromEntries(Object.entries(p).filter(([k]) => !ignoreProperties.includes(k)))
  assert.deepEqual(props(a.trace.meta.properties), props(b.trace.meta.properties))
  assert.equal(a.recorded.length, b.recorded.length)
  a.recorded.forEach((r, i) => {
    const other = b.recorded[i]!
    assert.equal(r.name, other.name)
    assert.deepEqual(r.params, other.params)
    for (const column of ['op', 'address', 'size', 'requested', 'stream', 'time', 'aux'] as const)
      assert.deepEqual(
        Array.from(r.layout![column] as ArrayLike<number | bigint>),
        Array.from(other.layout![column] as ArrayLike<number | bigint>),
        `layout.${column}`,
      )
  })
  assert.deepEqual(a.devices, b.devices)
  assert.deepEqual(a.overflow, b.overflow)
}

describe('the real snapshots, against the csv and memory_stats of the same run', () => {
  for (const name of REAL) {
    describe(name, () => {
      const result = parsePytorchSnapshot(bytes(`${name}.pickle`), `${name}.pickle`)
      const trace = result.trace
      const events = trace.events
      const table = csv(name)
      const layout = layoutOf(result)
      const count = (action: string) => table.filter((r) => r.action === action).length

      it('has one request event per alloc and free_requested, plus markers only', () => {
        assert.equal(rows(events, EventKind.alloc).length, count('alloc'))
        assert.equal(rows(events, EventKind.free).length, count('free_requested'))
        assert.equal(rows(events, EventKind.oom).length, count('oom'))
        assert.equal(
          events.kind.length,
          count('alloc') + count('free_requested') + count('oom') + count('snapshot') + rows(events, EventKind.marker).length - count('snapshot'),
        )
        assert.equal(result.overflow.orphanEvents + result.overflow.synthesizedAllocs + result.overflow.synthesizedSegments, 0, 'nothing was lost')
        assert.deepEqual(trace.meta.warnings, [])
      })

      it('gives every alloc the size and time of its csv row, and every free the block freed', () => {
        const allocs = rows(events, EventKind.alloc)
        const csvAllocs = table.filter((r) => r.action === 'alloc')
        const t0 = Math.min(table[0]!.time, ...readAnnotations(name).map((a) => a.time))
        const addressOf: number[] = []
        allocs.forEach((row, k) => {
          assert.equal(events.size[row], csvAllocs[k]!.size, `alloc ${k}`)
          assert.equal(events.time[row], (csvAllocs[k]!.time - t0) * 1000, `alloc ${k} time`)
          assert.equal(events.id[row], k, 'ids are dense, in order')
          addressOf[events.id[row]!] = csvAllocs[k]!.address
        })
        const frees = rows(events, EventKind.free)
        const csvFrees = table.filter((r) => r.action === 'free_requested')
        frees.forEach((row, k) => {
          assert.equal(addressOf[events.id[row]!], csvFrees[k]!.address, `free ${k} frees the block at its csv address`)
          assert.equal(events.time[row], (csvFrees[k]!.time - t0) * 1000)
        })
        for (let i = 1; i < events.time.length; i++) assert.ok(events.time[i]! >= events.time[i - 1]!, 'time never goes back')
      })

      it("keeps each alloc's frames, innermost first, deduplicated", () => {
        const root = unpickle(bytes(`${name}.pickle`)) as PickleDict
        const entries = ((root.get('device_traces') as PickleValue[][])[0] as PickleDict[]).filter((e) => e.get('action') === 'alloc')
        const allocs = rows(events, EventKind.alloc)
        let withFrames = 0
        allocs.forEach((row, k) => {
          const frames = entries[k]!.get('frames') as PickleDict[]
          if (frames.length === 0) {
            assert.equal(events.stack[row], -1, `alloc ${k} has no frames`)
            return
          }
          withFrames++
          const stack = trace.tables.stacks[events.stack[row]!]
          assert.ok(stack, `alloc ${k} has a stack`)
          assert.deepEqual(
            Array.from(stack, (f) => trace.tables.frames[f]),
            frames.map((f) => ({ name: f.get('name'), filename: f.get('filename'), line: f.get('line') })),
          )
        })
        assert.ok(withFrames > 0, 'allocs made from Python code have frames (the backward pass has none)')
        const distinct = new Set(trace.tables.frames.map((f) => `${f.name}|${f.filename}|${f.line}`))
        assert.equal(distinct.size, trace.tables.frames.length, 'no frame twice')
        assert.ok(
          trace.tables.frames.some((f) => f.filename === 'make_pytorch_snapshots.py'),
          'the workload script itself',
        )
      })

      it('names the streams as the snapshot did and uses only those', () => {
        assert.deepEqual(trace.tables.streams, [...new Set(table.map((r) => String(r.stream)))])
        for (const s of events.stream) assert.ok(s < trace.tables.streams.length)
      })

      it('turns external annotations into markers in time order', () => {
        const annotations = readAnnotations(name)
        const markers = rows(events, EventKind.marker)
        assert.equal(markers.length, annotations.length)
        markers.forEach((row, k) => assert.equal(trace.tables.markers[events.id[row]!], `${annotations[k]!.name} (${annotations[k]!.stage.toLowerCase()})`))
      })

      it(`has ${RECORDED_LAYOUT_NAME} with PyTorch's segment count and peak reserved from memory_stats`, () => {
        const s = stats(name)
        assert.equal(result.recorded[0]!.name, RECORDED_LAYOUT_NAME)
        assert.equal(opRows(layout, LayoutOp.regionReserve).length, s['segment.all.allocated'])
        assert.equal(opRows(layout, LayoutOp.regionRelease).length, s['segment.all.freed'])
        assert.equal(reservedPeak(layout), s['reserved_bytes.all.peak'])
        assert.equal(opRows(layout, LayoutOp.alloc).length, s['allocation.all.allocated'])
        const blockFrees = opRows(layout, LayoutOp.free).length + opRows(layout, LayoutOp.freeCompleted).length
        assert.equal(blockFrees, s['allocation.all.freed'])
        assert.equal(opRows(layout, LayoutOp.freePending).length, opRows(layout, LayoutOp.freeCompleted).length)
      })

      it("places every recorded block at its csv address with PyTorch's 512-byte rounding", () => {
        const csvAllocs = table.filter((r) => r.action === 'alloc')
        opRows(layout, LayoutOp.alloc).forEach((row, k) => {
          assert.equal(layout.address[row], BigInt(csvAllocs[k]!.address))
          assert.equal(layout.requested[row], csvAllocs[k]!.size)
          assert.equal(layout.size[row], roundedSize(csvAllocs[k]!.size))
          assert.equal(layout.size[row]! % 512, 0)
        })
        const segments = table.filter((r) => r.action === 'segment_alloc')
        opRows(layout, LayoutOp.regionReserve).forEach((row, k) => {
          assert.equal(layout.address[row], BigInt(segments[k]!.address))
          assert.equal(layout.size[row], segments[k]!.size)
          assert.ok(layout.aux[row] === 1 || layout.aux[row] === 2, 'pool known from the segments list')
          assert.equal(layout.aux[row], segments[k]!.size === 2 * MiB ? 1 : 2, 'small pool segments are 2 MiB')
        })
      })
    })
  }

  it('reads the JSON form (json.dump of the pickle) to the same trace and layout', () => {
    const fromPickle = parsePytorchSnapshot(bytes('convnet_varimg.pickle'), 'convnet_varimg')
    const fromJson = parsePytorchSnapshot(bytes('convnet_varimg.json'), 'convnet_varimg')
    assert.equal(fromJson.format, 'json')
    assert.equal(fromPickle.format, 'pickle')
    sameImport(fromPickle, fromJson, ['pytorch.format', 'pickle.protocol'])
    assert.equal(fromPickle.trace.meta.properties['pickle.protocol'], '4')
  })

  it('gives the same import whether the file is read in chunks with the memo pre-pass or parsed whole', async () => {
    const progress: { bytesDone: number; bytesTotal: number; phase: string }[] = []
    const file = path('transformer_varseq.pickle')
    const streamed = await importPytorchSnapshot(file, { chunkBytes: 64 << 10, boundedAbove: 0, onProgress: (p) => progress.push(p) })
    const whole = parsePytorchSnapshot(bytes('transformer_varseq.pickle'), file)
    sameImport(streamed, whole)
    const size = bytes('transformer_varseq.pickle').length
    assert.deepEqual([...new Set(progress.map((p) => p.phase))], ['scan', 'parse'])
    assert.ok(
      progress.every((p) => p.bytesTotal === 2 * size),
      'two passes over the file',
    )
    assert.ok(
      progress.every((p, i) => i === 0 || p.bytesDone > progress[i - 1]!.bytesDone),
      'progress only grows',
    )
    assert.equal(progress.at(-1)!.bytesDone, 2 * size)
    assert.ok(progress.length >= 2 * Math.floor(size / (64 << 10)))
    assert.equal(streamed.trace.meta.origin, 'transformer_varseq.pickle', 'the base name, no machine path')
  })

  it('yields to the event loop between chunks of an in-memory snapshot', async () => {
    let ticks = 0
    const timer = setInterval(() => ticks++, 0)
    const ticking = new Promise<void>((resolve) => setImmediate(resolve))
    await ticking
    const before = ticks
    const result = await importPytorchSnapshotBytes(bytes('transformer_varseq.pickle'), 'transformer_varseq.pickle', { chunkBytes: 16 << 10 })
    clearInterval(timer)
    assert.ok(ticks > before, 'timers ran during the import')
    sameImport(result, parsePytorchSnapshot(bytes('transformer_varseq.pickle'), 'transformer_varseq.pickle'))
  })

  it('stops when its signal is aborted', async () => {
    const controller = new AbortController()
    const run = importPytorchSnapshot(path('transformer_varseq.pickle'), {
      chunkBytes: 16 << 10,
      signal: controller.signal,
      onProgress: (p) => p.bytesDone > 100_000 && controller.abort(),
    })
    await assert.rejects(run, (e: Error) => e.name === 'AbortError')
  })
})

function readAnnotations(name: string): { name: string; stage: string; time: number }[] {
  const root = unpickle(bytes(`${name}.pickle`)) as PickleDict
  return ((root.get('external_annotations') as PickleDict[] | undefined) ?? [])
    .filter((a) => (a.get('device') ?? 0) === 0)
    .map((a) => ({ name: a.get('name') as string, stage: a.get('stage') as string, time: a.get('time_us') as number }))
    .sort((a, b) => a.time - b.time)
}

describe('the synthetic snapshot: every action, two streams, two devices, an overflow', () => {
  const result = parsePytorchSnapshot(bytes('synthetic.pickle'), 'synthetic.pickle')
  const { events, tables } = result.trace
  const layout = layoutOf(result)
  const t = (us: number) => us * 1000
  const S0 = 0x7f0000000000
  const S1 = 0x7f0000200000
  const S2 = 0x7f0001600000
  const V0 = 0x7f1000000000

  it('lists devices 0 and 1 and imports device 0 by default', () => {
    assert.deepEqual(result.devices, [0, 1])
    assert.equal(result.trace.meta.properties['pytorch.device'], '0')
    assert.equal(result.trace.meta.properties['pytorch.devices'], '0,1')
    assert.ok(events.device.every((d) => d === 0))
  })

  it('maps each event as make_hostile_pickles.py lists it', () => {
    const shown = Array.from(events.kind, (k, i) => {
      const what = k === EventKind.alloc ? 'alloc' : k === EventKind.free ? 'free' : k === EventKind.marker ? 'marker' : k === EventKind.trim ? 'trim' : 'oom'
      return k === EventKind.marker
        ? `${what} ${tables.markers[events.id[i]!]} @${events.time[i]}`
        : `${what} ${events.id[i]} ${events.size[i]} s${events.stream[i]} @${events.time[i]}`
    })
    assert.deepEqual(shown, [
      // Stand-ins at t = 0: the block freed first (its alloc was lost), the block live at the end never allocated.
      'alloc 0 4096 s0 @0',
      'alloc 6 1000000 s0 @0',
      'free 0 4096 s0 @0',
      `alloc 1 1000 s0 @${t(11)}`,
      `alloc 2 512 s0 @${t(12)}`,
      `free 1 1000 s0 @${t(20)}`,
      `alloc 3 700 s1 @${t(30)}`,
      `marker Optimizer.step#SGD.step (start) @${t(35)}`,
      `alloc 4 100 s0 @${t(41)}`,
      // Its free was requested at 40 and completed at 45: the block went back to the pool then.
      `free 2 512 s0 @${t(45)}`,
      `oom 0 ${80 * 1024 * MiB} s0 @${t(50)}`,
      `marker Optimizer.step#SGD.step (end) @${t(55)}`,
      `marker snapshot @${t(60)}`,
      `alloc 5 ${3 * MiB} s1 @${t(71)}`,
      `free 5 ${3 * MiB} s1 @${t(72)}`,
      // Segments released with no allocation after them: the program's empty_cache.
      `trim 0 ${20 * MiB} s1 @${t(80)}`,
      `trim 0 ${2 * MiB} s0 @${t(95)}`,
    ])
    assert.deepEqual(tables.streams, ['0', String(0x55aa00)])
    assert.deepEqual(tables.tags, ['phase=eval'])
    assert.equal(events.tag[rows(events, EventKind.oom)[0]!], 0)
    assert.deepEqual(
      tables.frames.map((f) => f.name),
      ['forward', 'step', 'main', 'backward'],
    )
    assert.deepEqual(
      tables.stacks.map((s) => Array.from(s)),
      [
        [0, 1, 2],
        [3, 1, 2],
      ],
    )
    assert.equal(events.stack[3], 0, 'alloc 1 was made in forward')
    assert.equal(events.stack[1], 1, 'the live block stand-in keeps the frames the segments list gives it')
  })

  it("records PyTorch's layout, pending frees, segments, mappings and the failure", () => {
    const shown = Array.from(
      layout.op,
      (op, i) => `${op} ${layout.address[i]!.toString(16)} ${layout.size[i]} ${layout.requested[i]} ${layout.stream[i]} ${layout.aux[i]} @${layout.time[i]}`,
    )
    const h = (n: number) => n.toString(16)
    assert.deepEqual(shown, [
      `${LayoutOp.alloc} ${h(S2 + 4096)} 4096 4096 0 0 @0`,
      `${LayoutOp.regionReserve} ${h(S2)} ${20 * MiB} ${20 * MiB} 0 2 @0`,
      `${LayoutOp.alloc} ${h(S2 + 8192)} ${MiB} 1000000 0 0 @0`,
      `${LayoutOp.free} ${h(S2 + 4096)} 4096 4096 0 0 @0`,
      `${LayoutOp.regionReserve} ${h(S0)} ${2 * MiB} ${2 * MiB} 0 1 @${t(10)}`,
      `${LayoutOp.alloc} ${h(S0)} 1024 1000 0 0 @${t(11)}`,
      `${LayoutOp.alloc} ${h(S0 + 1024)} 512 512 0 0 @${t(12)}`,
      `${LayoutOp.free} ${h(S0)} 1024 1000 0 0 @${t(20)}`,
      `${LayoutOp.alloc} ${h(S0)} 1024 700 ${0x55aa00} 0 @${t(30)}`,
      `${LayoutOp.freePending} ${h(S0 + 1024)} 512 512 0 0 @${t(40)}`,
      `${LayoutOp.alloc} ${h(S0 + 2048)} 512 100 0 0 @${t(41)}`,
      `${LayoutOp.freeCompleted} ${h(S0 + 1024)} 512 512 0 0 @${t(45)}`,
      `${LayoutOp.failure} 0 ${80 * 1024 * MiB} ${80 * 1024 * MiB} 0 0 @${t(50)}`,
      `${LayoutOp.regionReserve} ${h(S1)} ${20 * MiB} ${20 * MiB} ${0x55aa00} 0 @${t(70)}`,
      `${LayoutOp.alloc} ${h(S1)} ${3 * MiB} ${3 * MiB} ${0x55aa00} 0 @${t(71)}`,
      `${LayoutOp.free} ${h(S1)} ${3 * MiB} ${3 * MiB} ${0x55aa00} 0 @${t(72)}`,
      `${LayoutOp.regionRelease} ${h(S1)} ${20 * MiB} ${20 * MiB} ${0x55aa00} 0 @${t(80)}`,
      `${LayoutOp.map} ${h(V0)} ${2 * MiB} ${2 * MiB} 0 0 @${t(90)}`,
      `${LayoutOp.unmap} ${h(V0)} ${2 * MiB} ${2 * MiB} 0 0 @${t(95)}`,
    ])
    assert.equal(reservedPeak(layout), 42 * MiB)
  })

  it('says memory was in use before the first recorded event, and how many stand-ins there are', () => {
    assert.deepEqual(result.overflow, { orphanEvents: 1, synthesizedAllocs: 2, synthesizedBlocks: 2, synthesizedSegments: 1 })
    assert.equal(result.trace.meta.warnings.length, 1)
    assert.match(
      result.trace.meta.warnings[0]!,
      /^memory was already in use when recording started: 2 blocks and 1 segment existed before the first recorded event \(1 later event refers to them\); they stand in at t = 0 as 2 allocations in the request trace, 2 blocks and 1 segment in the recorded layout\. Recording began after the program allocated them, or the trace's ring buffer was full/,
    )
    assert.equal(result.trace.meta.properties['pytorch.overflow.synthesized_allocs'], '2')
  })

  it('keeps the allocator settings as properties and layout parameters', () => {
    assert.equal(result.trace.meta.properties['pytorch.allocator.PYTORCH_CUDA_ALLOC_CONF'], 'expandable_segments:True')
    assert.equal(result.trace.meta.properties['pytorch.allocator.roundup_power2_divisions'], '{"1":0,"2":0}')
    assert.deepEqual(result.recorded[0]!.params['roundup_power2_divisions'], { '1': 0, '2': 0 })
    assert.equal(result.recorded[0]!.strategy, 'pytorch')
    assert.equal(result.recorded[0]!.params['device'], 0)
  })

  it('gives settings dicts of integer keys the keys an object of their entries has, in numeric order, the last of a repeated key', () => {
    // allocator_settings = {'other': {3: 1, 2: 2}, 'dups': {1: 5, '1': 7}, 'mixed': {'b': 1, 2: 0, 'a': 3}}, no events.
    const out: number[] = [0x80, 4, 0x7d, 0x28]
    const text = (v: string) => out.push(0x8c, v.length, ...new TextEncoder().encode(v))
    const int = (v: number) => out.push(0x4b, v)
    text('device_traces')
    out.push(0x5d)
    text('allocator_settings')
    out.push(0x7d, 0x28)
    text('other')
    out.push(0x7d, 0x28)
    for (const v of [3, 1, 2, 2]) int(v)
    out.push(0x75)
    text('dups')
    out.push(0x7d, 0x28)
    int(1)
    int(5)
    text('1')
    int(7)
    out.push(0x75)
    text('mixed')
    out.push(0x7d, 0x28)
    text('b')
    int(1)
    int(2)
    int(0)
    text('a')
    int(3)
    out.push(0x75, 0x75, 0x75, 0x2e)
    const result = parsePytorchSnapshot(new Uint8Array(out), 'settings.pickle')
    const params = result.recorded[0]!.params
    assert.deepEqual(params['other'], { '2': 2, '3': 1 })
    assert.deepEqual(Object.keys(params['other'] as object), ['2', '3'])
    assert.deepEqual(params['dups'], { '1': 7 })
    assert.deepEqual(Object.keys(params['mixed'] as object), ['2', 'b', 'a'])
    assert.equal(result.trace.meta.properties['pytorch.allocator.other'], '{"2":2,"3":1}')
    assert.equal(result.trace.meta.properties['pytorch.allocator.dups'], '{"1":7}')
    assert.equal(result.trace.meta.properties['pytorch.allocator.mixed'], '{"2":0,"b":1,"a":3}')
  })

  for (const variant of ['synthetic-protocol-2.pickle', 'synthetic-protocol-3.pickle', 'synthetic-protocol-5.pickle', 'synthetic.json']) {
    it(`reads ${variant} to the same import`, () => {
      sameImport(parsePytorchSnapshot(bytes(variant), 'synthetic'), parsePytorchSnapshot(bytes('synthetic.pickle'), 'synthetic'), [
        'pytorch.format',
        'pickle.protocol',
      ])
    })
  }

  it('imports device 1 alone, with its own clock start and annotation', () => {
    const one = parsePytorchSnapshot(bytes('synthetic.pickle'), 'synthetic.pickle', { device: 1 })
    const e = one.trace.events
    assert.deepEqual(Array.from(e.kind), [EventKind.alloc, EventKind.marker])
    assert.deepEqual(Array.from(e.time), [1000, 2000])
    assert.deepEqual(Array.from(e.device), [1, 1])
    assert.equal(one.trace.tables.markers[e.id[1]!], 'other device (start)')
    assert.equal(one.recorded[0]!.name, RECORDED_LAYOUT_NAME)
    assert.equal(one.recorded[0]!.params['device'], 1)
    assert.deepEqual(one.overflow, { orphanEvents: 0, synthesizedAllocs: 0, synthesizedBlocks: 0, synthesizedSegments: 0 })
  })

  it('imports every device at once in one time order, one recorded layout each', () => {
    const all = parsePytorchSnapshot(bytes('synthetic.pickle'), 'synthetic.pickle', { device: 'all' })
    assert.deepEqual(
      all.recorded.map((r) => r.name),
      [`${RECORDED_LAYOUT_NAME}, cuda:0`, `${RECORDED_LAYOUT_NAME}, cuda:1`],
    )
    const e = all.trace.events
    assert.equal(e.kind.length, events.kind.length + 2)
    for (let i = 1; i < e.time.length; i++) assert.ok(e.time[i]! >= e.time[i - 1]!)
    assert.deepEqual(new Set(e.device), new Set([0, 1]))
    assert.equal(new Set(e.id.filter((_, i) => e.kind[i] === EventKind.alloc)).size, rows(e, EventKind.alloc).length, 'ids unique across devices')
  })

  it('refuses a device the snapshot does not have', () => {
    assert.throws(
      () => parsePytorchSnapshot(bytes('synthetic.pickle'), 'synthetic.pickle', { device: 5 }),
      (e: unknown) => e instanceof SnapshotImportError && e.code === 'not-a-snapshot' && /device 5 .* devices 0, 1/.test(e.message),
    )
  })
})

describe('a real snapshot whose ring buffer overflowed (mlp_varbatch without its oldest events)', () => {
  const cut = JSON.parse(readFileSync(path('mlp_varbatch_overflowed.cut.json'), 'utf8')).dropped_first_events as number
  const kept = csv('mlp_varbatch').slice(cut)
  const result = parsePytorchSnapshot(bytes('mlp_varbatch_overflowed.pickle'), 'mlp_varbatch_overflowed.pickle')

  it('synthesizes at t = 0 an alloc for each block freed or live at the end whose alloc was dropped', () => {
    assert.doesNotMatch(result.trace.meta.warnings.join('\n'), /\b0 (later )?events\b/, 'no clause about nothing')
    // What the kept csv rows say: frees of blocks they never allocated, and blocks allocated before the cut still live at the end.
    const live = new Set<number>()
    let orphanFrees = 0
    for (const r of kept) {
      if (r.action === 'alloc') live.add(r.address)
      if (r.action === 'free_requested') {
        if (!live.has(r.address)) orphanFrees++
        live.delete(r.address)
      }
    }
    const root = unpickle(bytes('mlp_varbatch_overflowed.pickle')) as PickleDict
    const liveAtEnd = (root.get('segments') as PickleDict[]).flatMap((s) =>
      (s.get('blocks') as PickleDict[]).filter((b) => b.get('state') === 'active_allocated').map((b) => b.get('address') as number),
    )
    const unseenLive = liveAtEnd.filter((a) => !live.has(a)).length
    const orphanCompletions = kept.filter(
      (r, i) => r.action === 'free_completed' && !kept.slice(0, i).some((q) => q.action === 'free_requested' && q.address === r.address),
    ).length
    assert.ok(orphanFrees + unseenLive > 0, 'the cut dropped allocations')
    assert.equal(result.overflow.synthesizedAllocs, orphanFrees + unseenLive)
    assert.equal(result.overflow.orphanEvents, orphanFrees + orphanCompletions)
    const e = result.trace.events
    const allocs = rows(e, EventKind.alloc)
    assert.equal(allocs.length, kept.filter((r) => r.action === 'alloc').length + orphanFrees + unseenLive)
    assert.equal(rows(e, EventKind.free).length, kept.filter((r) => r.action === 'free_requested').length)
    allocs.slice(0, orphanFrees + unseenLive).forEach((row) => assert.equal(e.time[row], 0))
    assert.match(result.trace.meta.warnings.join('\n'), /existed before the first recorded event.*ring buffer was full and dropped its oldest events/)
  })

  it("restores every segment live at the end, so the layout still has memory_stats' segments and peak", () => {
    const s = stats('mlp_varbatch')
    const layout = layoutOf(result)
    assert.equal(opRows(layout, LayoutOp.regionReserve).length, s['segment.all.allocated'])
    assert.equal(reservedPeak(layout), s['reserved_bytes.all.peak'])
    assert.equal(result.overflow.synthesizedSegments, s['segment.all.allocated']! - kept.filter((r) => r.action === 'segment_alloc').length)
  })
})

describe('bad input: a SnapshotImportError naming the file, the place and the problem', () => {
  const refused = (data: Uint8Array | string, code: SnapshotErrorCode, message: RegExp) =>
    assert.throws(
      () => parsePytorchSnapshot(typeof data === 'string' ? new TextEncoder().encode(data) : data, 'bad.snapshot'),
      (e: unknown) => {
        assert.ok(e instanceof SnapshotImportError, String(e))
        assert.equal(e.code, code, e.message)
        assert.equal(e.file, 'bad.snapshot')
        assert.match(e.message, message)
        return true
      },
    )
  const hostile = (name: string) => new Uint8Array(readFileSync(join(dir, '..', 'hostile', name)))

  it('refuses an empty file', () => refused(new Uint8Array(0), 'empty', /^bad\.snapshot: the file is empty$/))
  it('refuses a pickle that would run os.system, running nothing', () =>
    refused(hostile('os-system-global-reduce.pickle'), 'forbidden', /^bad\.snapshot: byte 2: GLOBAL .*posix\.system/))
  it('refuses a pickle that is not a snapshot', () => refused(hostile('not-a-snapshot.pickle'), 'not-a-snapshot', /no 'device_traces': not a memory snapshot/))
  it('refuses a snapshot whose root is not a dict', () =>
    refused(new Uint8Array([0x80, 4, 0x5d, 0x2e]), 'not-a-snapshot', /^bad\.snapshot: the root must be a dict \(a memory snapshot\), got a list$/))
  it('refuses broken JSON', () => refused('{"device_traces": [', 'corrupt', /^bad\.snapshot: not valid JSON/))
  it('names the event whose field has the wrong type', () =>
    refused(
      '{"segments": [], "device_traces": [[{"action": "alloc", "addr": 512, "size": 1, "stream": 0, "time_us": 1}, {"action": "alloc", "addr": "0x10"}]]}',
      'not-a-snapshot',
      /^bad\.snapshot: device_traces\[0\]\[1\]: 'addr' must be a non-negative integer below 2\^53, got "0x10"/,
    ))
  it('names the byte offset of a bad event in a pickle', () =>
    assert.throws(
      () => parsePytorchSnapshot(hostile('truncated-snapshot.pickle'), 'cut.pickle'),
      (e: unknown) => e instanceof SnapshotImportError && e.code === 'truncated' && /^cut\.pickle: byte \d+: /.test(e.message),
    ))
  it('counts unknown actions instead of failing on them', () => {
    const r = parsePytorchSnapshot(
      new TextEncoder().encode('{"segments": [], "device_traces": [[{"action": "defragment", "addr": 0, "size": 0, "stream": 0, "time_us": 5}]]}'),
      'future.json',
    )
    assert.equal(r.trace.events.kind.length, 0)
    assert.deepEqual(r.trace.meta.warnings, ['1 events with the unknown action "defragment" were skipped'])
  })
  it('skips an annotation without a finite time (found by the fuzzer: it left an empty row)', () => {
    const r = parsePytorchSnapshot(
      new TextEncoder().encode(
        '{"segments": [], "device_traces": [[{"action": "alloc", "addr": 512, "size": 1, "stream": 0, "time_us": 7}]], "external_annotations": [{"stage": "START", "name": "x", "device": 0, "time_us": 1e400}, {"stage": "END", "name": "x", "device": 0, "time_us": 9}]}',
      ),
      'annotations.json',
    )
    assert.deepEqual(Array.from(r.trace.events.kind), [EventKind.alloc, EventKind.marker])
    assert.deepEqual(Array.from(r.trace.events.time), [0, 2000])
    assert.deepEqual(r.trace.tables.markers, ['x (end)'])
  })
  it('reports a missing file as unreadable', async () => {
    await assert.rejects(importPytorchSnapshot(path('no-such-file.pickle')), (e: unknown) => e instanceof SnapshotImportError && e.code === 'unreadable')
  })
})
