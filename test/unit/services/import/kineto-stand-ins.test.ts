// What was live before the profiler's first memory event, as the Kineto importer seeds it
// (src-main/services/import/kineto.ts): on generated traces of two CUDA devices that each begin
// with blocks already allocated (Total Allocated counting them, as the profiler's does), the trace
// opens with stand-in allocs, device by device: the bytes no recorded free names as one block never
// freed, then one block for each free of an unknown address, of its size, freed where the free was
// recorded. After them the bytes live on each device at every event are its Total Allocated, and
// the recorded reserved curve still lines up with the events.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { BEFORE_PROFILER_TAG, parseKinetoTrace } from '../../../../src-main/services/import/kineto.ts'
import { EventKind } from '../../../../src-main/services/trace/model.ts'

interface Memory {
  ts: number
  addr: number
  bytes: number
  allocated: number
  reserved: number
  device: number
  type: number
}

interface Generated {
  memory: Memory[]
  /** Per device, what was allocated before the first event: address to size. */
  before: Map<number, number>[]
}

/** A deterministic random walk on two devices that start holding `held[d]` blocks (half of them freed later); host events between. */
function generate(seed: number, count: number, held: [number, number]): Generated {
  let s = seed >>> 0
  const rand = () => (s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32
  const before = held.map(
    (n, d) => new Map(Array.from({ length: n }, (_, k) => [0x100000 * (d + 1) + k * 0x1000, 4096 * (1 + Math.floor(rand() * 300))])),
  ) as Generated['before']
  // The first half of them are freed as the trace goes on; the rest stay live to the end.
  const old = before.map((m) => new Map([...m].slice(0, Math.ceil(m.size / 2))))
  const live: Map<number, number>[] = [new Map(), new Map()]
  const allocated = before.map((m) => [...m.values()].reduce((a, b) => a + b, 0))
  const reserved = allocated.map((a) => Math.ceil(a / 2097152) * 2097152 + 2097152)
  const memory: Memory[] = []
  let nextAddr = 0x7f0000000000
  for (let k = 0; k < count; k++) {
    const ts = 1000 + k
    const r = rand()
    if (r < 0.08) {
      memory.push({ ts, addr: nextAddr++, bytes: 512, allocated: 0, reserved: 0, device: 0, type: 0 })
      continue
    }
    const device = rand() < 0.35 ? 1 : 0
    let addr: number
    let bytes: number
    if (r < 0.16 && old[device]!.size > 0) {
      // A block allocated before the profiler started, freed now.
      ;[addr, bytes] = old[device]!.entries().next().value!
      old[device]!.delete(addr)
      bytes = -bytes
    } else if (r < 0.55 && live[device]!.size > 0) {
      ;[addr, bytes] = live[device]!.entries().next().value!
      live[device]!.delete(addr)
      bytes = -bytes
    } else {
      addr = nextAddr++
      bytes = 512 * (1 + Math.floor(rand() * 4096))
      live[device]!.set(addr, bytes)
    }
    allocated[device]! += bytes
    reserved[device] = Math.max(reserved[device]!, Math.ceil(allocated[device]! / 2097152) * 2097152)
    memory.push({ ts, addr, bytes, allocated: allocated[device]!, reserved: reserved[device]!, device, type: 1 })
  }
  return { memory, before }
}

function chromeTrace(memory: Memory[]): Uint8Array {
  const events = memory.map(
    (m) =>
      `{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": ${m.ts}, "args": {"Total Reserved": ${m.reserved}, "Total Allocated": ${m.allocated}, "Bytes": ${m.bytes}, "Device Id": ${m.device}, "Device Type": ${m.type}, "Addr": ${m.addr}}}`,
  )
  return new TextEncoder().encode(`{"schemaVersion": 1, "traceEvents": [\n${events.join(',\n')}\n]}`)
}

/** The stand-ins the importer should put first: per device, the blocks never freed as one, then each freed one in the order of its free. */
function expectedStandIns({ memory, before }: Generated): { device: number; size: number; freedAt: number }[] {
  const out: { device: number; size: number; freedAt: number }[] = []
  const cuda = memory.filter((m) => m.type === 1)
  for (const device of [0, 1]) {
    const freed = cuda.map((m, j) => ({ m, j })).filter(({ m }) => m.device === device && m.bytes < 0 && before[device]!.has(m.addr))
    const rest = [...before[device]!.values()].reduce((a, b) => a + b, 0) - freed.reduce((a, { m }) => a - m.bytes, 0)
    if (rest > 0) out.push({ device, size: rest, freedAt: -1 })
    for (const { m, j } of freed) out.push({ device, size: -m.bytes, freedAt: j })
  }
  return out
}

describe('stand-ins for what was allocated before the profiler started', () => {
  for (const [seed, held] of [
    [3, [40, 12]],
    [19, [5, 0]],
    [2026, [0, 30]],
  ] as const) {
    it(`come first, sized, tagged and freed as recorded; the bytes live follow Total Allocated on both devices (seed ${seed}, ${held.join(' and ')} blocks before)`, () => {
      const generated = generate(seed, 4000, [...held])
      const cuda = generated.memory.filter((m) => m.type === 1)
      const r = parseKinetoTrace(chromeTrace(generated.memory), 'generated.json')
      const { kind, id, size, device, time, tag } = r.trace.events
      const expected = expectedStandIns(generated)
      const seeded = expected.length
      assert.ok(
        expected.some((b) => b.freedAt >= 0),
        'some blocks of before are freed in the trace',
      )
      assert.deepEqual(
        expected.filter((b) => b.freedAt < 0).map((b) => b.device),
        [0, 1].filter((d) => held[d]! > 1),
        'a block never freed on each device that held more than one',
      )
      assert.equal(r.standInAllocs, seeded)
      assert.equal(r.unknownFrees, expected.filter((b) => b.freedAt >= 0).length)
      const p = r.trace.meta.properties
      assert.equal(p['kineto.stand_in_allocs'], String(seeded))
      const allocatedBefore = generated.before.reduce((a, m) => a + [...m.values()].reduce((x, y) => x + y, 0), 0)
      assert.equal(p['kineto.allocated_before'], String(allocatedBefore))
      assert.equal(p['kineto.stand_in_bytes'], String(allocatedBefore), 'the stand-ins hold all of it')
      assert.equal(kind.length, seeded + cuda.length, 'one request event per CUDA memory event after them (no address reused while live)')

      const tagIndex = r.trace.tables.tags.indexOf(BEFORE_PROFILER_TAG)
      assert.ok(tagIndex >= 0)
      for (let i = 0; i < seeded; i++) {
        const b = expected[i]!
        assert.deepEqual([kind[i], size[i], device[i], time[i], tag[i]], [EventKind.alloc, b.size, b.device, 0, tagIndex], `stand-in ${i}`)
        if (b.freedAt < 0) {
          for (let j = seeded; j < kind.length; j++) assert.ok(kind[j] !== EventKind.free || id[j] !== id[i], `the block never freed is freed at ${j}`)
        } else {
          const at = seeded + b.freedAt
          assert.deepEqual([kind[at], id[at], device[at]], [EventKind.free, id[i], b.device], `stand-in ${i} is freed where its free was recorded`)
        }
      }
      for (let i = seeded; i < kind.length; i++) assert.notEqual(tag[i], tagIndex, `recorded event ${i} under the stand-ins' tag`)
      assert.equal(
        r.liveAtEnd,
        cuda.filter((m) => m.bytes > 0).length - cuda.filter((m) => m.bytes < 0).length + r.unknownFrees + expected.filter((b) => b.freedAt < 0).length,
        'the blocks never freed count as live at the end',
      )

      // The bytes live on each device after every recorded event are that event's Total Allocated.
      const sizes = new Map<number, number>()
      const live = [0, 0]
      const series = r.recordedReserved!
      assert.equal(series.index[0], seeded, 'the recorded curve starts at the first recorded event')
      const latest = new Map<number, number>()
      let p2 = -1
      for (let i = 0; i < kind.length; i++) {
        if (kind[i] === EventKind.alloc) {
          sizes.set(id[i]!, size[i]!)
          live[device[i]!]! += size[i]!
        } else if (kind[i] === EventKind.free) live[device[i]!]! -= sizes.get(id[i]!)!
        while (p2 + 1 < series.index.length && series.index[p2 + 1]! <= i) p2++
        if (i < seeded) continue
        const m = cuda[i - seeded]!
        assert.equal(live[m.device], m.allocated, `event ${i}: bytes live on cuda:${m.device}`)
        latest.set(m.device, m.reserved)
        assert.equal(
          series.bytes[p2],
          [...latest.values()].reduce((a, b) => a + b, 0),
          `event ${i}: the recorded reserved`,
        )
      }
      assert.ok(r.trace.meta.warnings.some((w) => w.includes('every replay starts holding them')))
      assert.ok(!r.trace.meta.warnings.some((w) => /skipped|start without/.test(w)), r.trace.meta.warnings.join('\n'))
    })
  }

  it('frees of unknown blocks larger than Total Allocated says were there: the frees stand in, nothing more, and a warning says the figures disagree', () => {
    const memory = (ts: number, addr: number, bytes: number, allocated: number) =>
      `{"ph": "i", "name": "[memory]", "ts": ${ts}, "args": {"Total Reserved": 4194304, "Total Allocated": ${allocated}, "Bytes": ${bytes}, "Device Id": 0, "Device Type": 1, "Addr": ${addr}}}`
    // Total Allocated says 1,000 bytes were there before the first free; the frees give back 1,500.
    const text = `{"traceEvents": [${[memory(1, 0x1000, -500, 500), memory(2, 0x2000, -1000, 0)].join(',')}]}`
    const r = parseKinetoTrace(new TextEncoder().encode(text), 'over.json')
    assert.equal(r.standInAllocs, 2)
    assert.deepEqual([...r.trace.events.size.subarray(0, 2)], [500, 1000])
    assert.equal(r.liveAtEnd, 0)
    assert.ok(r.trace.meta.warnings.some((w) => w.includes("the profiler's figures disagree")))
  })

  it('a trace that starts empty has no stand-ins and no tag for them', () => {
    const text = `{"traceEvents": [{"ph": "i", "name": "[memory]", "ts": 1, "args": {"Total Reserved": 2097152, "Total Allocated": 512, "Bytes": 512, "Device Id": 0, "Device Type": 1, "Addr": 4096}}]}`
    const r = parseKinetoTrace(new TextEncoder().encode(text), 'empty-start.json')
    assert.equal(r.standInAllocs, 0)
    assert.equal(r.trace.meta.properties['kineto.allocated_before'], '0')
    assert.ok(!r.trace.tables.tags.includes(BEFORE_PROFILER_TAG))
    assert.deepEqual([...r.recordedReserved!.index], [0])
  })
})
