// Property tests (fast-check) for the renderer's replay model and address layout. Random but valid
// layout-event sequences (blocks allocated, freed, freed pending then completed, regions reserved
// and released, address space reserved with granules mapped and unmapped, resets) are built by a
// small interpreter that also keeps the truth by brute force: a bitmap of 256-byte cells. After
// every request event, figuresAt and fragmentationAt must equal that recount, for each way a
// strategy reuses memory. The layout functions must map addresses to linear positions and back
// exactly, keep order, and keep zoomed views inside the whole.
import assert from 'node:assert/strict'
import { it } from 'node:test'

import fc from 'fast-check'

import { addressOf, clampView, linearOf, panView, placeModel, zoomView } from '../../../../src-renderer/viz/layout.ts'
import { buildStrategyModel, figuresAt, fragmentationAt, NO_STREAM, Op, type LayoutColumns, type ReuseKind } from '../../../../src-renderer/viz/model.ts'

const CELL = 256
const CELLS = 256
const BASE = 0x7f00_0000_0000

type Action =
  | { kind: 'tick' }
  | { kind: 'reserve'; cells: number }
  | { kind: 'release'; pick: number }
  | { kind: 'va'; cells: number }
  | { kind: 'map'; pick: number; at: number; cells: number }
  | { kind: 'unmap'; pick: number; at: number; cells: number }
  | { kind: 'alloc'; cells: number; slack: number; stream: number }
  | { kind: 'free'; pick: number }
  | { kind: 'freePending'; pick: number }
  | { kind: 'complete'; pick: number }
  | { kind: 'reset' }
  | { kind: 'failure' }
  | { kind: 'split' }

const action: fc.Arbitrary<Action> = fc.oneof(
  { weight: 4, arbitrary: fc.constant({ kind: 'tick' as const }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('reserve' as const), cells: fc.integer({ min: 1, max: 40 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('release' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('va' as const), cells: fc.integer({ min: 2, max: 48 }) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('map' as const), pick: fc.nat(), at: fc.nat(), cells: fc.integer({ min: 1, max: 8 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('unmap' as const), pick: fc.nat(), at: fc.nat(), cells: fc.integer({ min: 1, max: 16 }) }) },
  {
    weight: 8,
    arbitrary: fc.record({
      kind: fc.constant('alloc' as const),
      cells: fc.integer({ min: 1, max: 6 }),
      slack: fc.integer({ min: 0, max: CELL - 1 }),
      stream: fc.integer({ min: 0, max: 2 }),
    }),
  },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('free' as const), pick: fc.nat() }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('freePending' as const), pick: fc.nat() }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('complete' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'reset' as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'failure' as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'split' as const }) },
)

/** The truth after one request event, counted cell by cell. */
interface Truth {
  liveBlocks: number
  requested: number
  rounded: number
  pendingBytes: number
  deadBytes: number
  reserved: number
  addressSpace: number
  freeBytes: number
  largestFree: number
}

interface Block {
  cell: number
  cells: number
  requested: number
  state: 'live' | 'pending' | 'dead'
}

/** Runs the actions, emitting valid layout events and the brute-force truth after each request event. */
function interpret(actions: Action[], reuse: ReuseKind): { layout: LayoutColumns; truth: Truth[] } {
  const memory = new Uint8Array(CELLS) // 1: inside reserved memory (a region or a mapped granule)
  const claimed = new Uint8Array(CELLS) // 1: inside a region or an address-space reservation
  const regions: { cell: number; cells: number }[] = []
  const reservations: { cell: number; cells: number }[] = []
  let blocks: Block[] = []
  let bumpOrder: Block[] = [] // allocation order since the last reset
  const ops: number[] = []
  const addresses: bigint[] = []
  const sizes: number[] = []
  const requesteds: number[] = []
  const streams: number[] = []
  const events: number[] = []
  const truth: Truth[] = []
  let event = 0
  const emit = (op: number, cell: number, bytes: number, requested = 0, stream = NO_STREAM) => {
    ops.push(op)
    addresses.push(BigInt(BASE + cell * CELL))
    sizes.push(bytes)
    requesteds.push(requested)
    streams.push(stream)
    events.push(event)
  }
  const occupied = () => {
    const cells = new Uint8Array(CELLS)
    for (const b of blocks) cells.fill(1, b.cell, b.cell + b.cells)
    return cells
  }
  const freeRun = (inside: (c: number) => boolean, length: number, from = 0, to = CELLS): number => {
    for (let start = from; start + length <= to; start++) {
      let ok = true
      for (let c = start; c < start + length && ok; c++) ok = inside(c)
      if (ok) return start
    }
    return -1
  }
  const record = () => {
    const taken = occupied()
    let freeBytes = 0
    let largestFree = 0
    let run = 0
    for (let c = 0; c <= CELLS; c++) {
      if (c < CELLS && memory[c] && !taken[c]) run++
      else {
        freeBytes += run * CELL
        largestFree = Math.max(largestFree, run * CELL)
        run = 0
      }
    }
    const sum = (state: Block['state'], f: (b: Block) => number) => blocks.filter((b) => b.state === state).reduce((s, b) => s + f(b), 0)
    truth.push({
      liveBlocks: blocks.filter((b) => b.state !== 'dead').length,
      requested: sum('live', (b) => b.requested),
      rounded: sum('live', (b) => b.cells * CELL),
      pendingBytes: sum('pending', (b) => b.cells * CELL),
      deadBytes: sum('dead', (b) => b.cells * CELL),
      reserved: memory.reduce((s, m) => s + m, 0) * CELL,
      addressSpace: reservations.reduce((s, r) => s + r.cells, 0) * CELL,
      freeBytes,
      largestFree,
    })
  }
  const close = (b: Block) => {
    blocks = blocks.filter((x) => x !== b)
    bumpOrder = bumpOrder.filter((x) => x !== b)
  }
  const freed = (b: Block, op: number) => {
    emit(op, b.cell, b.cells * CELL)
    if (reuse === 'any') return close(b)
    b.state = 'dead'
    // arena's lifo_reclaim: the pointer steps back over the topmost freed blocks.
    if (reuse === 'bump-lifo' && bumpOrder.at(-1) === b) while (bumpOrder.length > 0 && bumpOrder.at(-1)!.state === 'dead') close(bumpOrder.at(-1)!)
  }
  const pick = <T>(list: T[], n: number): T | undefined => (list.length === 0 ? undefined : list[n % list.length])
  for (const a of actions) {
    switch (a.kind) {
      case 'tick':
        record()
        event++
        break
      case 'reserve': {
        const at = freeRun((c) => !claimed[c], a.cells)
        if (at < 0) break
        claimed.fill(1, at, at + a.cells)
        memory.fill(1, at, at + a.cells)
        regions.push({ cell: at, cells: a.cells })
        emit(Op.regionReserve, at, a.cells * CELL)
        break
      }
      case 'release': {
        const r = pick(regions, a.pick)
        if (!r || blocks.some((b) => b.cell < r.cell + r.cells && b.cell + b.cells > r.cell)) break
        claimed.fill(0, r.cell, r.cell + r.cells)
        memory.fill(0, r.cell, r.cell + r.cells)
        regions.splice(regions.indexOf(r), 1)
        emit(Op.regionRelease, r.cell, r.cells * CELL)
        break
      }
      case 'va': {
        const at = freeRun((c) => !claimed[c], a.cells)
        if (at < 0) break
        claimed.fill(1, at, at + a.cells)
        reservations.push({ cell: at, cells: a.cells })
        emit(Op.vaReserve, at, a.cells * CELL)
        break
      }
      case 'map': {
        const r = pick(reservations, a.pick)
        if (!r) break
        const start = r.cell + (a.at % r.cells)
        const cells = Math.min(a.cells, r.cell + r.cells - start)
        if (memory.subarray(start, start + cells).some((m) => m)) break
        memory.fill(1, start, start + cells)
        emit(Op.map, start, cells * CELL)
        break
      }
      case 'unmap': {
        const r = pick(reservations, a.pick)
        if (!r) break
        const start = r.cell + (a.at % r.cells)
        const cells = Math.min(a.cells, r.cell + r.cells - start)
        // Strategies unmap only granules no block uses; the range may cut mappings or span several.
        if (
          occupied()
            .subarray(start, start + cells)
            .some((m) => m)
        )
          break
        memory.fill(0, start, start + cells)
        emit(Op.unmap, start, cells * CELL)
        break
      }
      case 'alloc': {
        const taken = occupied()
        const at = freeRun((c) => memory[c] === 1 && !taken[c], a.cells)
        if (at < 0) break
        const b: Block = { cell: at, cells: a.cells, requested: a.cells * CELL - a.slack, state: 'live' }
        blocks.push(b)
        bumpOrder.push(b)
        emit(Op.alloc, at, a.cells * CELL, b.requested, a.stream)
        break
      }
      case 'free': {
        const b = pick(
          blocks.filter((x) => x.state === 'live'),
          a.pick,
        )
        if (b) freed(b, Op.free)
        break
      }
      case 'freePending': {
        const b = pick(
          blocks.filter((x) => x.state === 'live'),
          a.pick,
        )
        if (!b) break
        b.state = 'pending'
        emit(Op.freePending, b.cell, b.cells * CELL)
        break
      }
      case 'complete': {
        const b = pick(
          blocks.filter((x) => x.state === 'pending'),
          a.pick,
        )
        if (b) freed(b, Op.freeCompleted)
        break
      }
      case 'reset':
        blocks = []
        bumpOrder = []
        emit(Op.reset, 0, 0)
        break
      case 'failure':
        emit(Op.failure, 0, CELL)
        break
      case 'split':
        emit(Op.split, 0, CELL)
        break
    }
  }
  record()
  const layout: LayoutColumns = {
    op: Uint8Array.from(ops),
    address: BigUint64Array.from(addresses),
    size: Float64Array.from(sizes),
    requested: Float64Array.from(requesteds),
    stream: Uint32Array.from(streams),
    event: Uint32Array.from(events),
  }
  return { layout, truth }
}

const runs = Number(process.env['VRAMSCOPE_PROPERTY_RUNS'] ?? 300)
// A fixed seed by default, so that CI runs the same cases every time (a failure prints its seed and
// path); VRAMSCOPE_PROPERTY_SEED=random (or a number) explores new ones on demand.
const seedSetting = process.env['VRAMSCOPE_PROPERTY_SEED'] ?? '20261122'
if (seedSetting !== 'random') fc.configureGlobal({ seed: Number(seedSetting) })

for (const reuse of ['any', 'bump', 'bump-lifo'] as const) {
  it(`model (reuse ${reuse}): figuresAt and fragmentationAt equal a cell-by-cell recount after every request event (${runs} random layouts)`, (t) => {
    // What the random layouts reached, so a generator that stops making interesting states fails.
    const reached = { states: 0, live: 0, pending: 0, dead: 0, fragmented: 0, mapped: 0 }
    fc.assert(
      fc.property(fc.array(action, { minLength: 1, maxLength: 400, size: 'max' }), (actions) => {
        const { layout, truth } = interpret(actions, reuse)
        for (const t of truth) {
          reached.states++
          if (t.liveBlocks > 0) reached.live++
          if (t.pendingBytes > 0) reached.pending++
          if (t.deadBytes > 0) reached.dead++
          if (t.largestFree < t.freeBytes) reached.fragmented++
          if (t.addressSpace > 0 && t.reserved > 0) reached.mapped++
        }
        const model = buildStrategyModel(layout, reuse)
        // Out of order on purpose: the model answers any event without replaying from the start.
        const order = truth.map((_, e) => e).reverse()
        for (const e of order) {
          const t = truth[e]!
          const f = figuresAt(model, e)
          assert.deepEqual(
            {
              liveBlocks: f.liveBlocks,
              requested: f.requested,
              rounded: f.rounded,
              pendingBytes: f.pendingBytes,
              deadBytes: f.deadBytes,
              reserved: f.reserved,
              addressSpace: f.addressSpace,
            },
            {
              liveBlocks: t.liveBlocks,
              requested: t.requested,
              rounded: t.rounded,
              pendingBytes: t.pendingBytes,
              deadBytes: t.deadBytes,
              reserved: t.reserved,
              addressSpace: t.addressSpace,
            },
            `figures after event ${e}`,
          )
          const g = fragmentationAt(model, e)
          assert.equal(g.freeBytes, t.freeBytes, `free bytes after event ${e}`)
          assert.equal(g.largestFree, t.largestFree, `largest free block after event ${e}`)
          assert.equal(g.fragmentation, t.freeBytes > 0 ? 1 - t.largestFree / t.freeBytes : 0)
        }
        assert.equal(model.failures.length, actions.filter((a) => a.kind === 'failure').length)
      }),
      { numRuns: runs },
    )
    t.diagnostic(`states checked: ${JSON.stringify(reached)}`)
    for (const [what, count] of Object.entries(reached)) if (what !== 'dead' || reuse !== 'any') assert.ok(count > runs, `few states with ${what}: ${count}`)
  })
}

// Ranges (regions) at random 256-byte-aligned addresses, possibly overlapping or touching.
const ranges = fc.array(fc.record({ start: fc.integer({ min: 0, max: 1 << 20 }), cells: fc.integer({ min: 1, max: 64 }) }), { minLength: 1, maxLength: 20 })

function modelOfRanges(list: { start: number; cells: number }[]) {
  const layout = {
    op: Uint8Array.from(list, () => Op.regionReserve),
    address: BigUint64Array.from(list, (r) => BigInt(BASE + r.start * CELL)),
    size: Float64Array.from(list, (r) => r.cells * CELL),
    requested: new Float64Array(list.length),
    stream: new Uint32Array(list.length).fill(NO_STREAM),
    event: new Uint32Array(list.length),
  }
  return buildStrategyModel(layout)
}

it(`layout: linearOf and addressOf invert each other inside the spans, keep address order, and give NaN outside (${runs} random range sets)`, () => {
  fc.assert(
    fc.property(ranges, fc.array(fc.integer({ min: -64, max: (1 << 20) + 128 }), { minLength: 1, maxLength: 40 }), (list, probes) => {
      const { spans } = placeModel(modelOfRanges(list))
      for (let i = 1; i < spans.start.length; i++) {
        assert.ok(spans.end[i - 1]! < spans.start[i]!, 'spans are sorted, disjoint and not touching (touching ones merge)')
        assert.ok(spans.offset[i - 1]! + (spans.end[i - 1]! - spans.start[i - 1]!) < spans.offset[i]!, 'a gap between spans')
      }
      const covered = (address: number) => list.some((r) => address >= BASE + r.start * CELL && address < BASE + (r.start + r.cells) * CELL)
      let previous = -Infinity
      let previousLinear = -Infinity
      const addresses = probes.map((p) => BASE + p * CELL + (p & 0xff)).sort((x, y) => x - y)
      for (const address of addresses) {
        const linear = linearOf(spans, address)
        if (!covered(address)) {
          assert.ok(Number.isNaN(linear), `address ${address - BASE} outside every range maps to NaN`)
          continue
        }
        assert.ok(linear >= 0 && linear < spans.total, 'inside the linear space')
        assert.equal(addressOf(spans, linear), address, 'addressOf(linearOf(a)) == a')
        if (address > previous) assert.ok(linear > previousLinear, 'linear order follows address order')
        previous = address
        previousLinear = linear
      }
    }),
    { numRuns: runs },
  )
})

it(`layout: the spans are the union of the regions and of the blocks outside them, touching ranges joined (${runs} random sets)`, () => {
  const blocks = fc.array(fc.record({ start: fc.integer({ min: 0, max: 1 << 12 }), cells: fc.integer({ min: 1, max: 16 }) }), { maxLength: 20 })
  fc.assert(
    fc.property(
      fc.array(fc.record({ start: fc.integer({ min: 0, max: 1 << 12 }), cells: fc.integer({ min: 1, max: 64 }) }), { maxLength: 12 }),
      blocks,
      (regions, placed) => {
        const events = [...regions.map((r) => ({ op: Op.regionReserve, ...r })), ...placed.map((b) => ({ op: Op.alloc, ...b }))]
        const model = buildStrategyModel({
          op: Uint8Array.from(events, (e) => e.op),
          address: BigUint64Array.from(events, (e) => BigInt(BASE + e.start * CELL)),
          size: Float64Array.from(events, (e) => e.cells * CELL),
          requested: Float64Array.from(events, (e) => e.cells * CELL),
          stream: Uint32Array.from(events, (e) => (e.op === Op.alloc ? 0 : NO_STREAM)),
          event: Uint32Array.from(events, (_, i) => i),
        })
        // Reference: cells covered, walked in address order. Without regions every block is a range;
        // with them, only blocks that start outside every region.
        const inRegion = (cell: number) => regions.some((r) => cell >= r.start && cell < r.start + r.cells)
        const ranges = regions.length > 0 ? [...regions, ...placed.filter((b) => !inRegion(b.start))] : placed
        const expected: [number, number][] = []
        for (const r of [...ranges].sort((x, y) => x.start - y.start)) {
          const last = expected.at(-1)
          if (last && r.start <= last[1]) last[1] = Math.max(last[1], r.start + r.cells)
          else expected.push([r.start, r.start + r.cells])
        }
        const { spans } = placeModel(model)
        assert.deepEqual(
          Array.from(spans.start, (a, i) => [(a - BASE) / CELL, (spans.end[i]! - BASE) / CELL]),
          expected,
        )
      },
    ),
    { numRuns: runs },
  )
})

it(`layout: zoomView and panView stay inside the whole, keep the anchor fixed and never zoom past the minimum (${runs * 4} random views)`, () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 2 ** 40 }),
      fc.integer({ min: 1, max: 4096 }),
      fc.double({ min: 0, max: 1, noNaN: true }),
      fc.double({ min: 0, max: 1, noNaN: true }),
      fc.double({ min: 0.01, max: 100, noNaN: true }),
      fc.double({ min: 0, max: 1, noNaN: true }),
      fc.double({ min: -2, max: 2, noNaN: true }),
      (total, pixels, startFraction, lengthFraction, factor, anchor, pan) => {
        const view = clampView({ start: startFraction * total, length: Math.max(1, lengthFraction * total) }, total)
        const inside = (v: { start: number; length: number }) => v.start >= 0 && v.length > 0 && v.length <= total && v.start + v.length <= total * (1 + 1e-12)
        assert.ok(inside(view))
        const zoomed = zoomView(view, factor, anchor, total, pixels)
        assert.ok(inside(zoomed), 'the zoomed view lies inside the whole')
        assert.ok(zoomed.length >= Math.min(total, 16 * pixels) * (1 - 1e-12), 'no closer than 16 bytes a pixel')
        const pivot = view.start + anchor * view.length
        const clamped = zoomed.length === total || zoomed.start === 0 || zoomed.start + zoomed.length >= total * (1 - 1e-12)
        if (!clamped) assert.ok(Math.abs(zoomed.start + anchor * zoomed.length - pivot) <= 1e-6 * total, 'the anchor stays where it was')
        const panned = panView(view, pan * view.length, total)
        assert.ok(inside(panned), 'the panned view lies inside the whole')
        assert.equal(panned.length, view.length, 'panning keeps the zoom')
      },
    ),
    { numRuns: runs * 4 },
  )
})
