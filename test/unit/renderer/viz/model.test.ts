// The renderer's model of a strategy's memory (src-renderer/viz) rebuilt from layout events must
// say what the native allocator's own counters said: a real PyTorch snapshot is replayed through
// every strategy by the real addon, sent through the web host's bundle encoding, decoded as the
// decode worker does, and at every event the model's requested, rounded and reserved bytes equal
// the replay's per-event metrics; its exact fragmentation equals the replay's walks. Then the
// layout (address packing, zoom) and the rasterizer on the same data, and the bundle format.
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { describe, it } from 'node:test'

import { decodeBundle, encodeBundle, BundleError } from '../../../../src-shared/bundle.ts'
import { listStrategies } from '../../../../src-main/services/replay/allocators.ts'
import { DEFAULT_STRATEGIES } from '../../../../src-main/services/app-session.ts'
import { replayBundle } from '../../../../src-main/services/replay/replay-input.ts'
import { sentLayout } from '../../../../src-shared/wire.ts'
import { openInput } from '../../../../src-main/services/import/open-input.ts'
import { replayTrace } from '../../../../src-main/services/replay/replay.ts'
import { parseStrategySpecs } from '../../../../src-main/services/replay/strategy-spec.ts'
import { decodeReplay } from '../../../../src-renderer/viz/data.ts'
import { rasterize, rgba, type MapPalette } from '../../../../src-renderer/viz/draw.ts'
import { addressOf, linearOf, placeModel, wholeView, zoomView } from '../../../../src-renderer/viz/layout.ts'
import { buildStrategyModel, figuresAt, fragmentationAt, NEVER, Op } from '../../../../src-renderer/viz/model.ts'
import { requestedSeries } from '../../../../src-shared/requested.ts'
import { LayoutOp } from '../../../../src-shared/layout.ts'
import { strategiesNamed } from '../../../../src-renderer/viz/strategy-count.ts'
import { strategyConfigs } from '../../services/replay/strategy-configs.ts'

const SNAPSHOT = join(import.meta.dirname, '..', '..', '..', 'fixtures', 'pytorch', 'convnet_varimg.pickle')

const palette: MapPalette = {
  unreserved: rgba(1, 1, 1),
  addressSpace: rgba(2, 2, 2),
  free: rgba(3, 3, 3),
  waste: rgba(4, 4, 4),
  pending: rgba(5, 5, 5),
  dead: rgba(7, 7, 7),
  freedGhost: rgba(6, 6, 6),
  edgeDarken: 0,
  categories: Uint32Array.of(rgba(100, 0, 0)),
}

describe('strategy model from layout events', async () => {
  const input = await openInput(SNAPSHOT)
  const configs = strategyConfigs()
  const targets = configs.map((c) => ({ label: c.label, strategy: c.strategy, params: c.params }))
  const results = await replayTrace(input.trace, targets, { layout: true, fullMetrics: true, buckets: 64, walkBudgetPerEvent: 0, peakWalkBudgetPerEvent: 0 })
  // Through the wire format, as the renderer receives it.
  const buffer = encodeBundle(replayBundle(input.trace, input.strategies, results))
  const views = decodeReplay(buffer.buffer.slice(buffer.byteOffset, buffer.byteOffset + buffer.byteLength) as ArrayBuffer)
  const n = input.trace.events.kind.length

  it('keeps the recorded layout first and one view per replayed strategy', () => {
    assert.equal(views.length, input.strategies.length + results.length)
    assert.equal(views[0]!.name, 'pytorch (recorded)')
    assert.equal(views[0]!.recorded, true)
    assert.deepEqual(
      views.slice(1).map((v) => v.name),
      results.map((r) => r.label),
    )
  })

  for (const [index, result] of results.entries()) {
    it(`${result.label}: requested, rounded and reserved at every event equal the replay's counters`, () => {
      const view = views[input.strategies.length + index]!
      const full = result.full!
      let checked = 0
      for (let e = 0; e < n; e += 7) {
        const f = figuresAt(view.model, e)
        assert.equal(f.requested, full.requested[e], `requested after event ${e}`)
        assert.equal(f.rounded, full.rounded[e], `rounded after event ${e}`)
        assert.equal(f.reserved, full.reserved[e], `reserved after event ${e}`)
        checked++
      }
      assert.ok(checked > 100)
    })

    it(`${result.label}: exact fragmentation equals the replay's walks at bucket ends`, () => {
      const view = views[input.strategies.length + index]!
      const b = result.buckets
      let compared = 0
      for (let k = 0; k < b.end.length; k++) {
        const expected = b.externalFragmentation[k]!
        if (Number.isNaN(expected)) continue
        const got = fragmentationAt(view.model, b.end[k]! - 1)
        assert.ok(Math.abs(got.fragmentation - expected) < 1e-9, `bucket ${k} (event ${b.end[k]! - 1}): ${got.fragmentation} vs ${expected}`)
        assert.equal(got.largestFree, b.largestFreeBlock[k], `largest free block, bucket ${k}`)
        compared++
      }
      assert.ok(compared > 10, `compared ${compared} buckets`)
    })
  }

  it('async_pool under a cap: reserved at every event equals the replay, though the pool releases memory with no address (trims)', async () => {
    // The pool trims its cache when a request would pass the cap; the header read the regions'
    // bytes alone, above the cap and above the peak in the table.
    const peak = results[0]!.summary.peakRequested
    const cap = Math.ceil((peak * 1.05) / 2 ** 20) * 2 ** 20
    const [pool] = await replayTrace(input.trace, [{ strategy: 'async_pool' }], { layout: true, fullMetrics: true, cap })
    const encoded = encodeBundle(replayBundle(input.trace, [], [pool!]))
    const [view] = decodeReplay(encoded.buffer.slice(encoded.byteOffset, encoded.byteOffset + encoded.byteLength) as ArrayBuffer)
    assert.ok(pool!.layout.op.includes(LayoutOp.trim), 'the pool trimmed')
    for (let e = 0; e < n; e++) {
      const reserved = figuresAt(view!.model, e).reserved
      assert.equal(reserved, pool!.full!.reserved[e], `reserved after event ${e}`)
      assert.ok(reserved <= pool!.summary.peakReserved && reserved <= cap, `after event ${e}: ${reserved} within the peak and the cap`)
    }
  })

  it("caching with the program's empty_cache (trim events): reserved at every event equals the replay, the trims' sum not taken off twice", async () => {
    // cuda_graph__default: torch.cuda.graph empties the cache before each capture; caching's trim
    // releases its segments by address and sums them up in a layout trim.
    const real = await openInput(join(import.meta.dirname, '..', '..', '..', 'fixtures', 'pytorch', 'real', 'cuda_graph__default.pickle'))
    const [r] = await replayTrace(real.trace, [{ strategy: 'caching', params: { preset: 'pytorch' } }], { layout: true, fullMetrics: true })
    assert.ok(r!.summary.trims > 0, 'the trace has trims')
    const encoded = encodeBundle(replayBundle(real.trace, [], [r!]))
    const [view] = decodeReplay(encoded.buffer.slice(encoded.byteOffset, encoded.byteOffset + encoded.byteLength) as ArrayBuffer)
    for (let e = 0; e < real.trace.events.kind.length; e++) assert.equal(figuresAt(view!.model, e).reserved, r!.full!.reserved[e], `reserved after event ${e}`)
  })

  it('the layouts travel without aux and with sizes as u32 where exact', () => {
    const bundle = replayBundle(input.trace, input.strategies, results)
    assert.equal(Object.keys(bundle.arrays).filter((k) => k.endsWith('.aux')).length, 0)
    assert.ok(bundle.arrays['s1.l0.size'] instanceof Uint32Array, "a replay's sizes below 4 GiB as u32")
  })

  it("the program's requested bytes from the request columns alone equal the replay's counters in every bucket", () => {
    const e = input.trace.events
    const series = requestedSeries(e.kind, e.id, e.size, 97)
    const full = results[0]!.full!
    let start = 0
    for (let b = 0; b < series.end.length; b++) {
      let max = -Infinity
      let min = Infinity
      for (let i = start; i < series.end[b]!; i++) {
        max = Math.max(max, full.requested[i]!)
        min = Math.min(min, full.requested[i]!)
      }
      assert.equal(series.max[b], max, `largest requested in bucket ${b}`)
      assert.equal(series.min[b], min, `smallest requested in bucket ${b}`)
      start = series.end[b]!
    }
    assert.equal(start, n, 'the buckets cover every event')
    assert.equal(series.peak, Math.max(...full.requested))
  })

  it("the recorded layout holds PyTorch's reserved bytes at its peak", () => {
    const recorded = views[0]!
    let peak = 0
    for (let e = 0; e < n; e += 3) peak = Math.max(peak, figuresAt(recorded.model, e).reserved)
    assert.ok(peak > 0)
    assert.ok(peak <= (input.strategies[0]!.summary?.['peakReserved'] ?? Infinity))
  })

  it('places every block inside the packed address space, and maps back', () => {
    for (const view of views) {
      const { spans, blockLinear } = placeModel(view.model)
      for (let i = 1; i < spans.start.length; i++) assert.ok(spans.start[i]! >= spans.end[i - 1]!, 'spans sorted and disjoint')
      for (let k = 0; k < view.model.blocks.count; k++) {
        const lin = blockLinear[k]!
        assert.ok(Number.isFinite(lin), `${view.name}: block ${k} placed`)
        assert.equal(addressOf(spans, lin), view.model.blocks.address[k])
        assert.equal(linearOf(spans, view.model.blocks.address[k]!), lin)
      }
    }
  })

  it('draws every live block, and the owner buffer names the block under each of its pixels', () => {
    const view = views[1]!
    const width = 400
    const height = 200
    const pixels = new Uint32Array(width * height)
    const owner = new Int32Array(width * height)
    const e = Math.floor(n / 2)
    const category = new Uint32Array(view.model.blocks.count)
    const r = rasterize(
      view.model,
      view.placed,
      { width, height, view: wholeView(view.placed.spans), event: e, recentWindow: 0, category, selected: -1 },
      palette,
      pixels,
      owner,
    )
    assert.equal(r.liveBlocksDrawn, figuresAt(view.model, e).liveBlocks)
    const owners = new Set<number>()
    for (const o of owner) if (o >= 0) owners.add(o)
    for (const k of owners) assert.ok(view.model.blocks.from[k]! <= e && e < view.model.blocks.to[k]!, `pixel owner ${k} is live`)
    // Zoomed onto one live block: its pixels are its own, requested part in its colour.
    const b = view.model.blocks
    let k = 0
    while (!(b.from[k]! <= e && e < b.to[k]!)) k++
    const zoom = { start: view.placed.blockLinear[k]!, length: b.size[k]! * 2 }
    rasterize(view.model, view.placed, { width, height, view: zoom, event: e, recentWindow: 0, category, selected: -1 }, palette, pixels, owner)
    assert.equal(owner[0], k)
    assert.equal(pixels[0], palette.categories[0])
    const z = zoomView(wholeView(view.placed.spans), 0.5, 0.5, view.placed.spans.total, width * height)
    assert.ok(Math.abs(z.length - view.placed.spans.total / 2) < 1)
  })
})

describe('interval records', () => {
  it('closes blocks at free, at a completed pending free and at reset; splits partial unmaps', () => {
    const rows: [number, bigint, number, number][] = [
      // op, address, size, event
      [Op.vaReserve, 0x10000n, 8 << 20, 0],
      [Op.map, 0x10000n, 4 << 20, 0],
      [Op.alloc, 0x10000n, 1024, 0],
      [Op.alloc, 0x10400n, 1024, 1],
      [Op.free, 0x10000n, 1024, 2],
      [Op.freePending, 0x10400n, 1024, 3],
      [Op.freeCompleted, 0x10400n, 1024, 5],
      [Op.alloc, 0x10800n, 512, 6],
      [Op.reset, 0n, 0, 7],
      [Op.unmap, 0x10000n + BigInt(2 << 20), 2 << 20, 8],
      [Op.failure, 0n, 999, 9],
    ]
    const m = buildStrategyModel({
      op: Uint8Array.from(rows.map((r) => r[0])),
      address: BigUint64Array.from(rows.map((r) => r[1])),
      size: Float64Array.from(rows.map((r) => r[2])),
      requested: Float64Array.from(rows.map((r) => r[2])),
      stream: new Uint32Array(rows.length),
      event: Uint32Array.from(rows.map((r) => r[3])),
    })
    assert.deepEqual([...m.blocks.to], [2, 5, 7])
    assert.deepEqual([...m.blocks.pendingFrom], [NEVER, 3, NEVER])
    assert.deepEqual([...m.failures], [9])
    assert.deepEqual([...m.resets], [7])
    assert.equal(figuresAt(m, 4).pendingBytes, 1024)
    assert.equal(figuresAt(m, 4).rounded, 0)
    assert.equal(figuresAt(m, 6).rounded, 512)
    assert.equal(figuresAt(m, 7).liveBlocks, 0)
    assert.equal(figuresAt(m, 7).reserved, 4 << 20)
    assert.equal(figuresAt(m, 8).reserved, 2 << 20, 'half the mapping stays mapped after the partial unmap')
    assert.equal(figuresAt(m, 8).addressSpace, 8 << 20)
  })
})

describe('open blocks by address', () => {
  it('closes every block at its own free among 60k blocks at addresses above 2^32, as a Map does', () => {
    let seed = 7
    const rand = () => (seed = (seed * 1103515245 + 12345) >>> 0) / 4294967296
    const rows: [number, bigint, number][] = []
    const live: bigint[] = []
    const isLive = new Set<bigint>()
    const freed: bigint[] = []
    for (let event = 0; event < 120_000; event++) {
      if (live.length > 0 && (rand() < 0.45 || live.length > 20_000)) {
        const k = Math.floor(rand() * live.length)
        const a = live[k]!
        rows.push([Op.free, a, event])
        live[k] = live.at(-1)!
        live.pop()
        isLive.delete(a)
        freed.push(a)
      } else {
        // 256-byte aligned over 16 TiB of address space, a third of them reusing a freed address.
        const a = freed.length > 0 && rand() < 0.33 ? freed.splice(Math.floor(rand() * freed.length), 1)[0]! : BigInt(Math.floor(rand() * 2 ** 36)) * 256n
        if (isLive.has(a)) continue
        isLive.add(a)
        live.push(a)
        rows.push([Op.alloc, a, event])
      }
    }
    const m = buildStrategyModel({
      op: Uint8Array.from(rows.map((r) => r[0])),
      address: BigUint64Array.from(rows.map((r) => r[1])),
      size: new Float64Array(rows.length).fill(256),
      requested: new Float64Array(rows.length).fill(256),
      stream: new Uint32Array(rows.length),
      event: Uint32Array.from(rows.map((r) => r[2])),
    })
    const open = new Map<bigint, number>()
    const to: number[] = []
    for (const [op, address, event] of rows) {
      if (op === Op.alloc) {
        open.set(address, to.length)
        to.push(NEVER)
      } else {
        to[open.get(address)!] = event
        open.delete(address)
      }
    }
    assert.ok(rows.length > 100_000)
    assert.deepEqual([...m.blocks.to.subarray(0, m.blocks.count)], to)
    assert.deepEqual(
      [...m.blocks.address.subarray(0, m.blocks.count)],
      rows.filter((r) => r[0] === Op.alloc).map((r) => Number(r[1])),
    )
  })
})

describe('column bundles', () => {
  it('a sent layout narrows sizes and requested sizes to u32 only where every value is exact', () => {
    const sent = (sizes: number[], requested = sizes) =>
      sentLayout({
        op: new Uint8Array(sizes.length).fill(Op.alloc),
        address: BigUint64Array.from(sizes, (_, i) => BigInt(0x10000 + i * 4096)),
        size: Float64Array.from(sizes),
        requested: Float64Array.from(requested),
        stream: new Uint32Array(sizes.length),
        event: Uint32Array.from(sizes, (_, i) => i),
      }).layout
    const narrow = sent([0, 512, 2 ** 32 - 1])
    assert.ok(narrow.size instanceof Uint32Array && narrow.requested instanceof Uint32Array)
    assert.deepEqual([...narrow.size], [0, 512, 2 ** 32 - 1])
    assert.ok(sent([512, 2 ** 32]).size instanceof Float64Array, '4 GiB does not fit')
    assert.deepEqual([...sent([512, 2 ** 32]).size], [512, 2 ** 32])
    assert.ok(sent([512, 0.5]).size instanceof Float64Array)
    const wideRequested = sent([512, 1024], [512, 2 ** 40])
    assert.ok(wideRequested.size instanceof Uint32Array && wideRequested.requested instanceof Float64Array)
    assert.deepEqual([...wideRequested.requested], [512, 2 ** 40])
  })

  it('round-trips every array type with the metadata', () => {
    const arrays = {
      a: Uint8Array.of(1, 2, 3),
      b: Uint16Array.of(65535),
      c: Uint32Array.of(1, 2 ** 32 - 1),
      d: Int32Array.of(-1),
      e: Float32Array.of(1.5),
      f: Float64Array.of(Math.PI, Number.NaN),
      g: BigUint64Array.of(2n ** 64n - 1n),
      empty: new Float64Array(0),
    }
    const bytes = encodeBundle({ meta: { hello: 'wörld' }, arrays })
    const decoded = decodeBundle(bytes.buffer as ArrayBuffer)
    assert.deepEqual(decoded.meta, { hello: 'wörld' })
    for (const [name, array] of Object.entries(arrays)) assert.deepEqual(decoded.arrays[name], array, name)
  })

  it('names what is wrong with a damaged bundle', () => {
    const bytes = encodeBundle({ meta: 1, arrays: { x: new Float64Array(4) } })
    assert.throws(() => decodeBundle(new ArrayBuffer(4)), BundleError)
    const bad = bytes.slice()
    bad[0] = 0
    assert.throws(() => decodeBundle(bad.buffer as ArrayBuffer), /bad magic/)
    assert.throws(() => decodeBundle(bytes.slice(0, bytes.length - 8).buffer as ArrayBuffer), /outside the bundle/)
  })
})

describe('map panes held while replays run', () => {
  it('counts the strategies of a spec as the host parses them', () => {
    const known = listStrategies().map((s) => s.name)
    for (const spec of [
      DEFAULT_STRATEGIES,
      'slab',
      'slab:classes=256,1KiB,4KiB,buddy',
      'caching:preset=pytorch:roundup_power2_divisions=[256:1,512:2],slab',
      'buddy,pool_size=4GiB,arena',
      'caching:preset=pytorch , buddy:min_block=512',
    ])
      assert.equal(strategiesNamed(spec, known), parseStrategySpecs([spec]).length, spec)
  })
})

describe('state changes (blocks turned pending or dead), in event order', () => {
  it('equal a comparison sort by event then block, on random layouts with pending frees and bump allocators, dense and sparse', () => {
    let seed = 5
    let checked = 0
    const rand = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 4294967296
    for (const reuse of ['any', 'bump', 'bump-lifo'] as const)
      for (let round = 0; round < 20; round++) {
        const ops: number[] = [Op.regionReserve]
        const addresses: bigint[] = [0x100000n]
        const sizes: number[] = [1 << 20]
        const events: number[] = [0]
        const open: bigint[] = []
        let next = 0x100000n
        let event = 0
        for (let i = 0; i < 400; i++) {
          // Odd rounds spread their events thin (a preview's few blocks over a long trace: sorted, not counted).
          event += rand() < 0.5 ? 0 : 1 + Math.floor(rand() * (round % 2 === 1 ? 50_000 : 3))
          const r = rand()
          if (r < 0.45 || open.length === 0) {
            ops.push(Op.alloc)
            addresses.push(next)
            open.push(next)
            next += 256n
          } else if (r < 0.7) {
            const a = open[Math.floor(rand() * open.length)]!
            ops.push(Op.freePending)
            addresses.push(a)
          } else {
            const a = open.splice(Math.floor(rand() * open.length), 1)[0]!
            ops.push(rand() < 0.5 ? Op.free : Op.freeCompleted)
            addresses.push(a)
          }
          sizes.push(256)
          events.push(event)
        }
        const n = ops.length
        const model = buildStrategyModel(
          {
            op: Uint8Array.from(ops),
            address: BigUint64Array.from(addresses),
            size: Float64Array.from(sizes),
            requested: Float64Array.from(sizes),
            stream: new Uint32Array(n),
            event: Uint32Array.from(events),
          },
          reuse,
        )
        const b = model.blocks
        const expected: [number, number][] = []
        for (let k = 0; k < b.count; k++)
          for (const at of [b.pendingFrom[k]!, b.deadFrom[k]!]) if (at !== NEVER && at > b.from[k]! && at < b.to[k]!) expected.push([at, k])
        expected.sort((x, y) => x[0] - y[0] || x[1] - y[1])
        const got = model.stateChanges
        assert.deepEqual(
          [...got.event].map((e, i) => [e, got.block[i]]),
          expected,
          `${reuse}, round ${round}`,
        )
        checked += expected.length
      }
    assert.ok(checked > 500, `${checked} state changes checked`)
  })
})
