// Replay through the real addon (src-main/services/replay/replay.ts -> native/binding/replay_wrap.cpp):
// for every strategy the per-event counters equal the same calls made one by one on an Allocator;
// progress is reported; an AbortSignal cancels with a coded error; bad arguments are named; a cap
// given as "24GiB" makes requests fail; region placement reaches the simulated device; the same
// input gives the same columns.
import assert from 'node:assert/strict'
import { availableParallelism } from 'node:os'
import { describe, it } from 'node:test'

import { Allocator, traceOpNames, type NativeError } from '../../../../src-main/services/replay/allocators.ts'
import { NO_STREAM, replayThreads, replayTrace, toStrategyResult, type ReplayTarget } from '../../../../src-main/services/replay/replay.ts'
import { EventKind, allocateEvents, type RequestTrace } from '../../../../src-main/services/trace/model.ts'
import { random } from '../../../helpers/trace-samples.ts'
import { CAPACITY, MiB, strategyConfigs } from './strategy-configs.ts'

const GiB = 1024 * MiB

/**
 * `n` events over two streams: sizes log-uniform from 1 B to `maxSize`, about 45 % frees (one in
 * ten on the other stream), a marker every `markerEvery` events, the clock 1 µs an event.
 */
function randomTrace(n: number, seed: number, maxSize = 256 * 1024, markerEvery = 1000): RequestTrace {
  const rand = random(seed)
  const events = allocateEvents(n)
  const live: { id: number; stream: number }[] = []
  let nextId = 0
  for (let i = 0; i < n; i++) {
    events.time[i] = i * 1000
    if (i % markerEvery === markerEvery - 1) {
      events.kind[i] = EventKind.marker
    } else if (live.length > 0 && (live.length >= 300 || rand() < 0.45)) {
      const pick = Math.floor(rand() * live.length)
      const block = live[pick]!
      live[pick] = live[live.length - 1]!
      live.pop()
      events.kind[i] = EventKind.free
      events.id[i] = block.id
      events.stream[i] = rand() < 0.1 ? 1 - block.stream : block.stream
    } else {
      const stream = rand() < 0.5 ? 0 : 1
      events.kind[i] = EventKind.alloc
      events.id[i] = nextId
      events.size[i] = Math.floor(2 ** (rand() * Math.log2(maxSize)))
      events.stream[i] = stream
      live.push({ id: nextId++, stream })
    }
  }
  return {
    meta: { source: 'synthetic', warnings: [], properties: {} },
    events,
    tables: { streams: ['0', '7'], frames: [], stacks: [], tags: [], markers: [] },
  }
}

/** What a program making the same calls one by one sees after each event. */
function oneByOne(trace: RequestTrace, target: ReplayTarget): { requested: number[]; rounded: number[]; reserved: number[]; failures: number } {
  const a = new Allocator(target.strategy, target.params, 'simulated', { capacity: CAPACITY })
  const live = new Map<number, bigint>()
  const out = { requested: [] as number[], rounded: [] as number[], reserved: [] as number[], failures: 0 }
  const e = trace.events
  for (let i = 0; i < e.kind.length; i++) {
    a.setTime(e.time[i]!)
    const kind = e.kind[i]
    if (kind === EventKind.alloc) {
      try {
        const address = a.allocate(e.size[i]!, e.stream[i]! + 1)
        if (address !== 0n) live.set(e.id[i]!, address)
      } catch (error) {
        assert.equal((error as NativeError).code, 'OUT_OF_MEMORY')
        out.failures++
      }
    } else if (kind === EventKind.free) {
      const address = live.get(e.id[i]!)
      if (address !== undefined) {
        a.deallocate(address, e.stream[i]! + 1)
        live.delete(e.id[i]!)
      }
    } else if (kind === EventKind.marker && a.supportsReset) {
      a.reset()
      live.clear()
    }
    const s = a.stats()
    out.requested.push(s.requestedLive)
    out.rounded.push(s.roundedLive)
    out.reserved.push(s.reservedLive)
  }
  a.dispose()
  return out
}

describe('replay through every strategy', () => {
  const trace = randomTrace(3000, 5)
  for (const config of strategyConfigs()) {
    it(`${config.label}: per-event counters equal the calls made one by one`, async () => {
      const target: ReplayTarget = { strategy: config.strategy, params: config.params, label: config.label, device: { capacity: CAPACITY } }
      const [result] = await replayTrace(trace, [target], { fullMetrics: true, buckets: 50 })
      assert.ok(result)
      const expected = oneByOne(trace, target)
      assert.deepEqual(Array.from(result.full!.requested), expected.requested)
      assert.deepEqual(Array.from(result.full!.rounded), expected.rounded)
      assert.deepEqual(Array.from(result.full!.reserved), expected.reserved)
      const s = result.summary
      assert.equal(s.failures, expected.failures)
      assert.equal(s.events, 3000)
      assert.equal(s.peakReserved, Math.max(...expected.reserved))
      assert.equal(expected.reserved[s.peakReservedEvent], s.peakReserved)
      assert.equal(result.label, config.label)
      assert.equal(result.strategy, config.strategy)

      // Layout: one length for every column, events in order, allocs where the trace allocates.
      const l = result.layout
      for (const column of [l.address, l.size, l.requested, l.stream, l.aux, l.event]) assert.equal(column.length, l.op.length)
      const names = traceOpNames()
      let allocs = 0
      for (let k = 0; k < l.op.length; k++) {
        if (k > 0) assert.ok(l.event[k]! >= l.event[k - 1]!, 'layout events follow the request events')
        if (names[l.op[k]!] === 'alloc') {
          allocs++
          assert.equal(trace.events.kind[l.event[k]!], EventKind.alloc)
          assert.equal(l.requested[k], trace.events.size[l.event[k]!])
          assert.equal(l.stream[k], trace.events.stream[l.event[k]!])
        }
      }
      assert.equal(allocs + s.failures + s.zeroSizeAllocs, s.allocs)

      // Buckets cover every event; min <= last <= max.
      const b = result.buckets
      assert.equal(b.end.length, 50)
      assert.equal(b.end[b.end.length - 1], 3000)
      for (let k = 0; k < b.end.length; k++) {
        assert.ok(b.reservedMin[k]! <= b.reservedLast[k]! && b.reservedLast[k]! <= b.reservedMax[k]!)
        assert.equal(b.reservedLast[k], expected.reserved[b.end[k]! - 1])
      }
    })
  }
})

describe('replay progress and cancel', () => {
  const big = randomTrace(300_000, 9)
  const targets: ReplayTarget[] = [{ strategy: 'caching' }, { strategy: 'buddy', params: { pool_size: '1GiB' } }]

  it('replays side by side on at most a thread per target and core, and one at a time when memory would not hold more', () => {
    assert.equal(replayThreads(1000, 100, 3, false), Math.min(availableParallelism(), 3))
    assert.equal(replayThreads(1000, 100, 1, true), 1)
    // A working set larger than all the memory there is: one after another.
    assert.equal(replayThreads(1e9, 1e12, 5, true), 1)
  })

  it('reports progress per target, ending at the whole', async () => {
    const seen: { target: number; label: string; eventsDone: number; fraction: number }[] = []
    const results = await replayTrace(big, targets, { onProgress: (p) => seen.push(p) })
    assert.equal(results.length, 2)
    // 300000 events: reports at 65536, 131072, 196608, 262144 and at the end, per target; the
    // targets replay side by side, so their reports interleave.
    assert.equal(seen.length, 10)
    assert.deepEqual([...new Set(seen.map((p) => p.label))].sort(), ['buddy (pool_size=1GiB)', 'caching'])
    for (const target of [0, 1]) {
      const own = seen.filter((p) => p.target === target).map((p) => p.eventsDone)
      assert.deepEqual(own, [65536, 131072, 196608, 262144, 300_000], `target ${target}'s reports, in order`)
    }
    // The fraction is of both targets' events together: it never goes back and ends at the whole.
    for (let i = 1; i < seen.length; i++) assert.ok(seen[i]!.fraction >= seen[i - 1]!.fraction)
    assert.equal(seen[seen.length - 1]!.fraction, 1)
    assert.equal(seen[seen.length - 1]!.eventsDone, 300_000)
  })

  it('stops when the AbortSignal aborts, rejecting with CANCELLED', async () => {
    const controller = new AbortController()
    let reports = 0
    const started = Date.now()
    await assert.rejects(
      replayTrace(big, targets, {
        signal: controller.signal,
        onProgress: () => {
          reports++
          controller.abort(new Error('user closed the window'))
        },
      }),
      (error: NativeError) => error.code === 'CANCELLED',
    )
    // The native loop stopped at its next check, long before two targets of 300000 events.
    assert.ok(reports <= 2, `${reports} progress reports after the abort`)
    assert.ok(Date.now() - started < 60_000)
  })

  it('rejects at once when the signal is already aborted', async () => {
    await assert.rejects(replayTrace(big, targets, { signal: AbortSignal.abort() }), (error: NativeError) => error.code === 'CANCELLED')
  })

  it('rejects with the error a progress callback throws', async () => {
    await assert.rejects(
      replayTrace(big, targets, {
        onProgress: () => {
          throw new Error('progress bar broke')
        },
      }),
      /progress bar broke/,
    )
  })
})

describe('replay options and results', () => {
  it('a cap as "24GiB" makes the requests that do not fit fail, counted', async () => {
    const events = allocateEvents(30)
    for (let i = 0; i < 30; i++) {
      events.kind[i] = EventKind.alloc
      events.id[i] = i
      events.size[i] = 1 * GiB
      events.time[i] = i
    }
    const trace: RequestTrace = {
      meta: { source: 'synthetic', warnings: [], properties: {} },
      events,
      tables: { streams: ['0'], frames: [], stacks: [], tags: [], markers: [] },
    }
    const [capped, free] = [
      (await replayTrace(trace, [{ strategy: 'cuda_malloc' }], { cap: '24GiB' }))[0]!,
      (await replayTrace(trace, [{ strategy: 'cuda_malloc' }]))[0]!,
    ]
    assert.equal(capped.summary.failures, 6)
    assert.equal(capped.summary.firstFailures[0], 24)
    assert.equal(capped.summary.peakReserved, 24 * GiB)
    assert.equal(free.summary.failures, 0)
    const sameInBytes = (await replayTrace(trace, [{ strategy: 'cuda_malloc' }], { cap: 24 * GiB }))[0]!
    assert.equal(sameInBytes.summary.failures, 6)
  })

  it('stopAtFailure ends at the first failure; fragmentation: false makes no walks', async () => {
    const events = allocateEvents(30)
    for (let i = 0; i < 30; i++) {
      events.kind[i] = EventKind.alloc
      events.id[i] = i
      events.size[i] = 1 * GiB
      events.time[i] = i
    }
    const trace: RequestTrace = {
      meta: { source: 'synthetic', warnings: [], properties: {} },
      events,
      tables: { streams: ['0'], frames: [], stacks: [], tags: [], markers: [] },
    }
    const [stopped] = await replayTrace(trace, [{ strategy: 'cuda_malloc' }], { cap: '24GiB', stopAtFailure: true, fragmentation: false })
    assert.equal(stopped!.summary.stoppedAtFailure, true)
    assert.equal(stopped!.summary.failures, 1)
    assert.equal(stopped!.summary.firstFailures[0], 24)
    assert.equal(stopped!.summary.events, 25)
    assert.equal(stopped!.summary.fragmentationWalks, 0)
    assert.ok(Number.isNaN(stopped!.summary.externalFragmentationAtPeak))
    assert.ok(Array.from(stopped!.buckets.externalFragmentation).every((f) => Number.isNaN(f)))
    const [whole] = await replayTrace(trace, [{ strategy: 'cuda_malloc' }], { cap: '24GiB' })
    assert.equal(whole!.summary.stoppedAtFailure, false)
    assert.equal(whole!.summary.failures, 6)
    await assert.rejects(replayTrace(trace, [{ strategy: 'cuda_malloc' }], { stopAtFailure: 1 as never }), /options\.stopAtFailure must be a boolean/)
  })

  it('structureEvents: false leaves the splits and merges out of the layout, and nothing else', async () => {
    const trace = randomTrace(4000, 17)
    const targets: ReplayTarget[] = [{ strategy: 'caching' }, { strategy: 'buddy' }]
    const full = await replayTrace(trace, targets)
    const thin = await replayTrace(trace, targets, { structureEvents: false })
    const split = traceOpNames().indexOf('split')
    const merge = traceOpNames().indexOf('merge')
    for (const [k, f] of full.entries()) {
      const t = thin[k]!
      const kept = [...f.layout.op.keys()].filter((i) => f.layout.op[i] !== split && f.layout.op[i] !== merge)
      assert.ok(kept.length < f.layout.op.length, `${f.label} split or merged some blocks`)
      for (const column of ['op', 'address', 'size', 'requested', 'stream', 'aux', 'event'] as const)
        assert.deepEqual(
          Array.from(t.layout[column] as ArrayLike<unknown>),
          kept.map((i) => (f.layout[column] as ArrayLike<unknown>)[i]),
          `${f.label}: ${column}`,
        )
      assert.deepEqual(t.buckets.reservedMax, f.buckets.reservedMax)
    }
    await assert.rejects(replayTrace(trace, targets, { structureEvents: 'no' as never }), /options\.structureEvents must be a boolean/)
  })

  it("a trace's pool column sends allocs to CUDA graphs' private pools", async () => {
    const events = allocateEvents(4)
    const sizes = [3 * MiB, 0, 3 * MiB, 0]
    for (let i = 0; i < 4; i++) {
      events.kind[i] = i % 2 === 0 ? EventKind.alloc : EventKind.free
      events.id[i] = i >> 1
      events.size[i] = sizes[i]!
      events.time[i] = i
    }
    const trace: RequestTrace = {
      meta: { source: 'synthetic', warnings: [], properties: {} },
      events,
      tables: { streams: ['0'], frames: [], stacks: [], tags: [], markers: [] },
    }
    const target = [{ strategy: 'caching', params: { preset: 'pytorch' } }]
    const [shared] = await replayTrace(trace, target)
    assert.equal(shared!.summary.peakReserved, 20 * MiB)
    events.pool = Uint32Array.from([0, 0, 1, 0])
    const [graph] = await replayTrace(trace, target)
    assert.equal(graph!.summary.peakReserved, 40 * MiB)
    events.pool = new Uint32Array(3)
    await assert.rejects(replayTrace(trace, target), /trace\.events\.pool has 3 entries/)
  })

  it('markers reset the arena unless told not to', async () => {
    const trace = randomTrace(5000, 3)
    const [reset] = await replayTrace(trace, [{ strategy: 'arena', params: { reserve: '1GiB' } }])
    const [kept] = await replayTrace(trace, [{ strategy: 'arena', params: { reserve: '1GiB' } }], { resetAtMarkers: false })
    assert.equal(reset!.summary.resets, 5)
    assert.ok(reset!.summary.droppedByReset > 0)
    assert.equal(kept!.summary.resets, 0)
    assert.equal(kept!.summary.droppedByReset, 0)
  })

  it('region placement puts the regions where a recording had them', async () => {
    const trace = randomTrace(200, 4)
    const placement = [0x7f4000000000n, 0x7f8000000000n]
    const [result] = await replayTrace(trace, [{ strategy: 'caching', params: { preset: 'pytorch' }, regionPlacement: placement }])
    const reserveOp = traceOpNames().indexOf('region_reserve')
    const regions = Array.from(result!.layout.address).filter((_, k) => result!.layout.op[k] === reserveOp)
    assert.ok(regions.length >= 1)
    assert.equal(regions[0], placement[0])
    assert.equal(result!.label, 'caching (pytorch)')
  })

  it('the same input gives the same columns', async () => {
    const trace = randomTrace(20_000, 8)
    const targets: ReplayTarget[] = [{ strategy: 'caching', params: { preset: 'pytorch' } }, { strategy: 'slab' }]
    const [a, b] = [await replayTrace(trace, targets), await replayTrace(trace, targets)]
    for (let t = 0; t < targets.length; t++) {
      for (const key of ['op', 'address', 'size', 'requested', 'stream', 'aux', 'event'] as const)
        assert.deepEqual(a[t]!.layout[key], b[t]!.layout[key], `layout.${key}`)
      for (const key of Object.keys(a[t]!.buckets) as (keyof (typeof a)[0]['buckets'])[])
        assert.deepEqual(a[t]!.buckets[key], b[t]!.buckets[key], `buckets.${key}`)
      const { wallNs: _w, eventsPerSecond: _e, ...summaryA } = a[t]!.summary
      const { wallNs: _w2, eventsPerSecond: _e2, ...summaryB } = b[t]!.summary
      assert.deepEqual(summaryA, summaryB)
    }
  })

  it('toStrategyResult gives each layout event its time and stream handle', async () => {
    const trace = randomTrace(2000, 2)
    const [result] = await replayTrace(trace, [{ strategy: 'caching' }])
    const file = toStrategyResult(result!, trace)
    assert.equal(file.name, 'caching')
    const l = result!.layout
    for (let k = 0; k < l.op.length; k++) {
      assert.equal(file.layout!.time[k], trace.events.time[l.event[k]!])
      const expected = l.stream[k] === NO_STREAM ? 0 : [0, 7][l.stream[k]!]
      assert.equal(file.layout!.stream[k], expected)
    }
    assert.equal(file.metrics!.reserved.length, result!.buckets.end.length)
    assert.equal(file.summary!['peakReserved'], result!.summary.peakReserved)
    assert.equal(typeof file.summary!['deviceCalls.regionAlloc'], 'number')
  })
})

describe('replay arguments', () => {
  const trace = randomTrace(100, 1)
  const named = (pattern: RegExp) => (error: Error & { code?: string }) => error.code === 'INVALID_ARGUMENT' && pattern.test(error.message)

  it('names the bad argument before anything runs', async () => {
    await assert.rejects(replayTrace(trace, [{ strategy: 'nope' }]), named(/^targets\[0\]\.strategy: unknown strategy "nope"/))
    await assert.rejects(replayTrace(trace, [{ strategy: 'caching', params: { nope: 1 } }]), named(/^targets\[0\]\.params\.nope/))
    await assert.rejects(replayTrace(trace, [{ strategy: 'slab' }, { strategy: 'slab' }]), named(/^targets\[1\]\.label: 'slab'/))
    await assert.rejects(replayTrace(trace, []), named(/^targets must name at least one/))
    await assert.rejects(replayTrace(trace, [{ strategy: 'slab' }], { cap: 'lots' }), named(/^options\.cap: 'lots' is not a size/))
    await assert.rejects(replayTrace(trace, [{ strategy: 'slab' }], { cap: 0 }), named(/^options\.cap must be more than 0/))
    await assert.rejects(replayTrace(trace, [{ strategy: 'slab' }], { bogus: true } as never), named(/^options\.bogus/))
    await assert.rejects(replayTrace(trace, [{ strategy: 'slab', regionPlacement: [1] as never }]), named(/^targets\[0\]\.regionPlacement/))
    await assert.rejects(replayTrace(trace, [{ strategy: 'slab', device: { granularity: 1000 } }]), named(/^targets\[0\]\.device\.granularity/))
  })

  it('names the bad event of a malformed trace', async () => {
    const broken = randomTrace(100, 1)
    broken.events.kind[5] = 9
    await assert.rejects(replayTrace(broken, [{ strategy: 'slab' }]), named(/^trace\.events\.kind\[5\]/))
    const fractional = randomTrace(100, 1)
    const at = fractional.events.kind.indexOf(EventKind.alloc)
    fractional.events.size[at] = 1.5
    await assert.rejects(replayTrace(fractional, [{ strategy: 'slab' }]), named(new RegExp(`^trace\\.events\\.size\\[${at}\\]`)))
    const short = randomTrace(100, 1)
    short.events.time = new Float64Array(10)
    await assert.rejects(replayTrace(short, [{ strategy: 'slab' }]), named(/^trace\.events\.time has 10 entries/))
    await assert.rejects(replayTrace({ events: {} } as never, [{ strategy: 'slab' }]), named(/^trace\.events\.kind must be a Uint8Array/))
  })
})
