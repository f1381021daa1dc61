// Deterministic sample traces and strategy results for the trace file tests, fuzzers and the
// benchmark: every table filled, every event kind, addresses beyond 2^53.
import { EventKind, allocateEvents, type RequestTrace, type TraceEvents } from '../../src-main/services/trace/model.ts'
import { allocateLayout, type LayoutTrace } from '../../src-shared/layout.ts'
import type { StrategyResult } from '../../src-shared/results.ts'

/** mulberry32: a small seeded generator, so a failing case can be replayed from its seed. */
export function random(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** A trace of `n` events: allocs and frees of live blocks, markers every 97 events, an oom. */
export function sampleTrace(n: number, seed = 1): RequestTrace {
  const rand = random(seed)
  const events = allocateEvents(n)
  const live: number[] = []
  let nextId = 0
  const markers: string[] = []
  for (let i = 0; i < n; i++) {
    events.time[i] = i * 1000 + Math.floor(rand() * 1000)
    events.device[i] = i % 2
    if (i % 97 === 96) {
      events.kind[i] = EventKind.marker
      events.id[i] = markers.length
      markers.push(`step ${markers.length}`)
    } else if (i % 501 === 500) {
      events.kind[i] = EventKind.oom
      events.size[i] = 2 ** 40 + i
      events.stream[i] = 1
    } else if (live.length > 0 && rand() < 0.45) {
      const pick = Math.floor(rand() * live.length)
      events.kind[i] = EventKind.free
      events.id[i] = live[pick]!
      live[pick] = live[live.length - 1]!
      live.pop()
      events.stream[i] = i % 3
    } else {
      events.kind[i] = EventKind.alloc
      events.id[i] = nextId
      live.push(nextId++)
      events.size[i] = 1 + Math.floor(rand() * 64 * 1024 * 1024)
      events.stream[i] = i % 3
      events.stack[i] = i % 4 === 0 ? -1 : i % 3
      events.tag[i] = i % 5 === 0 ? i % 2 : -1
    }
  }
  return {
    meta: {
      source: 'synthetic',
      origin: 'sample',
      gpu: 'NVIDIA H100 80GB HBM3',
      driver: '580.65.06',
      warnings: ['a sample warning'],
      properties: { seed: String(seed), ünïcode: 'värde ✓' },
    },
    events,
    tables: {
      streams: ['0', '0x7f00aa01', '0x7f00aa02'],
      frames: [
        { name: 'forward', filename: 'model.py', line: 42 },
        { name: 'linear', filename: 'torch/nn/modules/linear.py', line: 125 },
        { name: '<unknown>', filename: '', line: -1 },
      ],
      stacks: [new Uint32Array([1, 0]), new Uint32Array([2]), new Uint32Array([])],
      tags: ['thread 1', 'thread 2'],
      markers,
    },
  }
}

export function sampleLayout(n: number, seed = 2): LayoutTrace {
  const rand = random(seed)
  const layout = allocateLayout(n)
  for (let i = 0; i < n; i++) {
    layout.op[i] = i % 15
    // Device addresses use the high bits; a number could not hold them exactly.
    layout.address[i] = 0xffff_8000_0000_0000n + BigInt(i) * 256n
    layout.size[i] = 256 * (1 + Math.floor(rand() * 4096))
    layout.requested[i] = layout.size[i]! - (i % 256)
    layout.stream[i] = i % 2 === 0 ? 0 : 0x7f00aa01
    layout.time[i] = i * 10.5
    layout.aux[i] = i % 7
  }
  return layout
}

export function sampleStrategies(n = 64): StrategyResult[] {
  const metricsRows = 16
  const series = (f: (i: number) => number) => Float64Array.from({ length: metricsRows }, (_, i) => f(i))
  return [
    {
      name: 'caching (pytorch)',
      strategy: 'caching',
      params: { preset: 'pytorch', max_split_size: '2MiB', expandable: false },
      layout: sampleLayout(n),
      metrics: {
        time: series((i) => i * 1e6),
        requested: series((i) => i * 1024),
        rounded: series((i) => i * 1536),
        reserved: series((i) => 2 ** 21 * (1 + (i >> 2))),
        externalFragmentation: series((i) => (i % 5) / 5),
        deviceCalls: series((i) => i >> 2),
      },
      summary: { peakReserved: 2 ** 23, peakRequested: 15360, failures: 0, deviceCalls: 3 },
    },
    { name: 'buddy', strategy: 'buddy', params: {}, summary: { peakReserved: 2 ** 24 } },
    { name: 'pytorch (recorded)', strategy: 'recorded', params: { source: 'snapshot' }, layout: sampleLayout(5, 3) },
  ]
}

export function eventsEqual(a: TraceEvents, b: TraceEvents): boolean {
  const keys = ['kind', 'id', 'size', 'stream', 'device', 'time', 'stack', 'tag'] as const
  // The optional pool column: absent reads as all zeros (the default pools).
  const poolOf = (e: TraceEvents, i: number) => (e.pool === undefined ? 0 : e.pool[i]!)
  return (
    keys.every((k) => a[k].length === b[k].length && a[k].every((v, i) => Object.is(v, b[k][i]))) &&
    (a.pool === undefined && b.pool === undefined ? true : a.kind.every((_, i) => poolOf(a, i) === poolOf(b, i)))
  )
}
