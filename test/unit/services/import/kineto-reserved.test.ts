// The profiler's Total Reserved curve as the Kineto importer keeps it (trace.recordedReserved,
// src-main/services/import/kineto.ts): on generated traces (two CUDA devices, host events, frees
// of blocks allocated before the profiler started) the curve read at every request event equals
// what a plain walk of the file's events says the allocator held then, and only changes are kept;
// the stand-ins for those blocks, first in the trace, come before the curve's first point.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { parseKinetoTrace } from '../../../../src-main/services/import/kineto.ts'
import { seriesPeak, type RecordedSeries } from '../../../../src-main/services/trace/model.ts'

interface Memory {
  ts: number
  addr: number
  bytes: number
  reserved: number
  device: number
  type: number
}

/** A deterministic random walk of [memory] events: allocs, frees, frees of unknown blocks, host events. */
function generate(seed: number, count: number): Memory[] {
  let s = seed >>> 0
  const rand = () => (s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32
  const live: Map<number, number>[] = [new Map(), new Map()]
  const reserved = [0, 0]
  const out: Memory[] = []
  let nextAddr = 0x7f0000000000
  for (let k = 0; k < count; k++) {
    const ts = 1000 + k
    const device = rand() < 0.3 ? 1 : 0
    const r = rand()
    if (r < 0.1) {
      out.push({ ts, addr: nextAddr++, bytes: 512, reserved: 0, device: 0, type: 0 })
      continue
    }
    // The reserved figure moves by whole 2 MiB segments, sometimes not at all.
    const step = rand() < 0.5 ? 0 : (Math.floor(rand() * 5) - 2) * 2097152
    reserved[device] = Math.max(0, reserved[device]! + step)
    const blocks = live[device]!
    if (r < 0.15) out.push({ ts, addr: 0x100 + k, bytes: -4096, reserved: reserved[device]!, device, type: 1 })
    else if (r < 0.55 && blocks.size > 0) {
      const [addr, size] = blocks.entries().next().value!
      blocks.delete(addr)
      out.push({ ts, addr, bytes: -size, reserved: reserved[device]!, device, type: 1 })
    } else {
      const addr = nextAddr++
      const size = 512 * (1 + Math.floor(rand() * 64))
      blocks.set(addr, size)
      out.push({ ts, addr, bytes: size, reserved: reserved[device]!, device, type: 1 })
    }
  }
  return out
}

function chromeTrace(memory: Memory[]): Uint8Array {
  const events = memory.map(
    (m) =>
      `{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": ${m.ts}, "args": {"Total Reserved": ${m.reserved}, "Total Allocated": 0, "Bytes": ${m.bytes}, "Device Id": ${m.device}, "Device Type": ${m.type}, "Addr": ${m.addr}}}`,
  )
  return new TextEncoder().encode(`{"schemaVersion": 1, "traceEvents": [\n${events.join(',\n')}\n]}`)
}

/**
 * The allocator's reserved bytes (summed over devices) at each request event, by a plain walk:
 * first a stand-in alloc for each free of a block not allocated in the file (nothing recorded
 * then: NaN), then one request event for each CUDA event (the generator never reuses a live address).
 */
function expectedAtEvents(memory: Memory[]): number[] {
  const latest = new Map<number, number>()
  const allocated = new Set<string>()
  const out: number[] = []
  for (const m of memory) {
    if (m.type !== 1) continue
    const key = `${m.device}:${m.addr}`
    if (m.bytes > 0) allocated.add(key)
    else if (!allocated.has(key)) out.unshift(Number.NaN)
  }
  for (const m of memory) {
    if (m.type !== 1) continue
    latest.set(m.device, m.reserved)
    out.push([...latest.values()].reduce((a, b) => a + b, 0))
  }
  return out
}

/** The step curve read at each of `n` events. */
function readAt(series: RecordedSeries, n: number): number[] {
  const out: number[] = []
  let p = -1
  for (let i = 0; i < n; i++) {
    while (p + 1 < series.index.length && series.index[p + 1]! <= i) p++
    out.push(p < 0 ? Number.NaN : series.bytes[p]!)
  }
  return out
}

describe('the recorded reserved curve of a profiler trace', () => {
  for (const seed of [1, 7, 2026]) {
    it(`is the allocator's Total Reserved at every request event, changes only (seed ${seed})`, () => {
      const memory = generate(seed, 3000)
      const { trace, recordedReserved, unknownFrees, standInAllocs } = parseKinetoTrace(chromeTrace(memory), 'generated.json')
      const n = trace.events.kind.length
      assert.ok(recordedReserved && trace.recordedReserved === recordedReserved, 'the curve rides with the trace')
      assert.ok(unknownFrees > 50, `${unknownFrees} frees of unknown blocks`)
      // Total Allocated is 0 throughout: the frees of unknown blocks are all that stands in.
      assert.equal(standInAllocs, unknownFrees)
      assert.deepEqual(readAt(recordedReserved, n), expectedAtEvents(memory))
      const { index, bytes } = recordedReserved
      assert.equal(index[0], standInAllocs, 'the curve starts at the first recorded event, after the stand-ins')
      for (let k = 1; k < index.length; k++) {
        assert.ok(index[k]! > index[k - 1]!, `point ${k}: indices increase`)
        assert.notEqual(bytes[k], bytes[k - 1], `point ${k} is a change`)
      }
      assert.ok(index.length < n, `${index.length} points for ${n} events: unchanged stretches are one point`)
      const cudaReserved = memory.filter((m) => m.type === 1)
      assert.ok(seriesPeak(recordedReserved)! >= Math.max(...cudaReserved.map((m) => m.reserved)))
    })
  }

  it('has one point per change on one device, its peak the kineto.peak_reserved property', () => {
    const memory = generate(11, 2000).map((m) => ({ ...m, device: 0 }))
    // One device, no unknown frees: each CUDA event is a request event.
    const known = memory.filter((m) => m.type === 0 || m.bytes > 0 || memory.some((a) => a.addr === m.addr && a.bytes > 0))
    const { trace, recordedReserved } = parseKinetoTrace(chromeTrace(known), 'one-device.json')
    assert.equal(trace.meta.properties['kineto.unknown_frees'], '0')
    assert.equal(String(seriesPeak(recordedReserved)), trace.meta.properties['kineto.peak_reserved'])
    assert.equal(String(recordedReserved!.index.length), trace.meta.properties['kineto.reserved_points'])
  })

  it('is absent when no CUDA memory event carries Total Reserved', () => {
    const { trace, recordedReserved } = parseKinetoTrace(chromeTrace(generate(3, 200).filter((m) => m.type === 0)), 'host-only.json')
    assert.equal(recordedReserved, undefined)
    assert.equal(trace.recordedReserved, undefined)
  })
})
