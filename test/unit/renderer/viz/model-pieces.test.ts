// A replay's layout read in pieces as its bundle streams in gives the same model as the whole
// layout at once: every strategy (arena's resets, VMM's maps and unmaps, the recorded PyTorch
// layout) replayed by the real addon on a real snapshot, its bundle cut into small layout pieces
// and fed to the renderer's ReplayDecoder in byte chunks of random sizes, against the models the
// whole-layout builder makes from the replay's own columns.
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { describe, it } from 'node:test'

import { BundleError, bundleByteLength, encodeBundle, encodeBundleParts } from '../../../../src-shared/bundle.ts'
import { replayBundle } from '../../../../src-main/services/replay/replay-input.ts'
import { openInput } from '../../../../src-main/services/import/open-input.ts'
import { replayTrace } from '../../../../src-main/services/replay/replay.ts'
import { LayoutOp } from '../../../../src-shared/layout.ts'
import { carriesSize, sentLayout, sentPieces } from '../../../../src-shared/wire.ts'
import { decodeReplay, ReplayDecoder, replayFrom, type StrategyView } from '../../../../src-renderer/viz/data.ts'
import { buildStrategyModel, reuseKindOf, StrategyModelBuilder, type StrategyModel } from '../../../../src-renderer/viz/model.ts'
import { strategyConfigs } from '../../services/replay/strategy-configs.ts'

const SNAPSHOT = join(import.meta.dirname, '..', '..', '..', 'fixtures', 'pytorch', 'convnet_varimg.pickle')

/** A model's records as plain arrays, cut to their counts (builders may hold spare room). */
function records(model: StrategyModel) {
  const cut = (o: object, n: number) =>
    Object.fromEntries(
      Object.entries(o)
        .filter(([k]) => k !== 'count')
        .map(([k, v]) => [k, Array.from((v as Uint32Array).subarray(0, n))]),
    )
  return {
    blocks: cut(model.blocks, model.blocks.count),
    regions: cut(model.regions, model.regions.count),
    failures: Array.from(model.failures),
    resets: Array.from(model.resets),
  }
}

function seeded(seed: number) {
  return () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 4294967296
}

describe('a layout in pieces', async () => {
  const input = await openInput(SNAPSHOT)
  const targets = strategyConfigs().map((c) => ({ label: c.label, strategy: c.strategy, params: c.params }))
  const results = await replayTrace(input.trace, targets, { layout: true })
  const bytes = encodeBundle(replayBundle(input.trace, input.strategies, results, 257))
  const whole = decodeReplay(bytes.slice().buffer)

  it('covers layouts of many pieces', () => {
    const longest = Math.max(...results.map((r) => r.layout.op.length))
    assert.ok(longest > 5 * 257, `the longest layout has ${longest} events`)
    assert.ok(
      results.some((r) => r.layout.op.includes(LayoutOp.unmap)),
      'some strategy maps and unmaps (VMM)',
    )
  })

  it('a layout travels without its splits and merges, a size only where the model reads one, requested bytes and stream only for allocs', () => {
    let droppedSome = false
    for (const r of results) {
      const l = r.layout
      const { layout: sent, pieces } = sentLayout(l, 1000)
      // The same drawn events in the same order, each column read from the full one.
      let j = 0
      let s = 0
      let a = 0
      let event = 0
      for (let k = 0; k < l.op.length; k++) {
        const op = l.op[k]!
        if (op === LayoutOp.split || op === LayoutOp.merge) {
          droppedSome = true
          continue
        }
        assert.equal(sent.op[j], op, `${r.label}: op of event ${k}`)
        // Addresses as u32 words above a base (where the model reads one); events as u16 steps.
        const words = sent.words
        assert.ok(words && sent.address instanceof Uint32Array, `${r.label}: addresses travel as u32 words`)
        if (op !== LayoutOp.failure && op !== LayoutOp.reset && op !== LayoutOp.trim)
          assert.equal(words.base + sent.address[j]! * 2 ** words.shift, Number(l.address[k]), `${r.label}: address of event ${k}`)
        assert.ok(sent.event instanceof Uint16Array, `${r.label}: events travel as u16 steps`)
        event = j % 1000 === 0 ? pieces.eventBases![j / 1000]! : event + sent.event[j]!
        assert.equal(event, l.event[k], `${r.label}: request event of event ${k}`)
        if (j % 1000 === 0)
          assert.deepEqual([pieces.events[j / 1000], pieces.sizes[j / 1000], pieces.allocs[j / 1000]], [j, s, a], `${r.label}: piece ${j / 1000} starts`)
        if (carriesSize(op)) assert.equal(sent.size[s++], l.size[k], `${r.label}: size of event ${k}`)
        if (op === LayoutOp.alloc) {
          assert.equal(sent.requested[a], l.requested[k], `${r.label}: requested bytes of event ${k}`)
          assert.equal(sent.stream[a++], l.stream[k], `${r.label}: stream of event ${k}`)
        }
        j++
      }
      assert.deepEqual([sent.op.length, sent.size.length, sent.requested.length, sent.stream.length], [j, s, a, a], r.label)
      assert.equal(pieces.events.length, Math.max(1, Math.ceil(j / 1000)), r.label)
    }
    assert.ok(droppedSome, 'some strategy split or merged blocks (caching, buddy)')
  })

  it('addresses that do not fit u32 words travel as u64, events whose steps do not fit u16 as u32, and read the same', () => {
    // Two blocks 2^45 bytes apart at 256-byte alignment (2^37 units), the second 70 000 events on.
    const far = 2 ** 45 + 256
    const dense = {
      op: Uint8Array.from([LayoutOp.alloc, LayoutOp.alloc, LayoutOp.free, LayoutOp.failure]),
      address: BigUint64Array.from([0x10000n, BigInt(0x10000 + far), 0x10000n, 0n]),
      size: Float64Array.from([512, 1024, 0, 4096]),
      requested: Float64Array.from([500, 1000, 0, 4096]),
      stream: Uint32Array.from([0, 1, 0, 0]),
      event: Uint32Array.from([3, 70_003, 70_004, 70_005]),
    }
    const { layout } = sentLayout(dense)
    assert.ok(layout.address instanceof BigUint64Array && layout.words === undefined, 'u64 addresses')
    assert.ok(layout.event instanceof Uint32Array && layout.eventBase === undefined, 'u32 events')
    const model = buildStrategyModel(dense)
    assert.deepEqual(Array.from(model.blocks.address.subarray(0, 2)), [0x10000, 0x10000 + far])
    assert.deepEqual(Array.from(model.blocks.from.subarray(0, 2)), [3, 70_003])
    assert.deepEqual(Array.from(model.blocks.to.subarray(0, 2)), [70_004, 0xffffffff])
    assert.deepEqual(Array.from(model.failures), [70_005])
    // Near addresses and small steps: u32 words and u16 steps, the same model.
    const near = { ...dense, address: BigUint64Array.from([0x10000n, 0x10000n + 4096n, 0x10000n, 0n]), event: Uint32Array.from([3, 5, 6, 9]) }
    const thin = sentLayout(near).layout
    assert.ok(thin.address instanceof Uint32Array && thin.words !== undefined && thin.event instanceof Uint16Array)
    assert.deepEqual([thin.words.base, thin.words.shift, Array.from(thin.address)], [0x10000, 12, [0, 1, 0, 0]])
    const m = buildStrategyModel(near)
    assert.deepEqual(Array.from(m.blocks.address.subarray(0, 2)), [0x10000, 0x10000 + 4096])
    assert.deepEqual(Array.from(m.blocks.to.subarray(0, 2)), [6, 0xffffffff])
  })

  it('StrategyModelBuilder over pieces of any size equals buildStrategyModel over the whole', () => {
    const random = seeded(7)
    for (const r of results) {
      const l = r.layout
      const layout = { op: l.op, address: l.address, size: l.size, requested: l.requested, stream: l.stream, event: l.event }
      const expected = records(buildStrategyModel(layout, reuseKindOf(r.strategy, r.params)))
      // No capacity hints: the records grow as the pieces come.
      for (const piece of [1, 2 + Math.floor(random() * 50), 100 + Math.floor(random() * 3000)]) {
        const builder = new StrategyModelBuilder(reuseKindOf(r.strategy, r.params))
        for (const p of sentPieces(layout, piece).pieces) builder.add(p)
        assert.deepEqual(records(builder.finish()), expected, `${r.label}, pieces of ${piece}`)
      }
    }
  })

  it("StrategyModelBuilder refuses a piece whose addresses read unlike the first piece's", () => {
    const l = results.find((r) => r.strategy === 'caching')!.layout
    const builder = new StrategyModelBuilder()
    builder.add(sentLayout({ ...l, op: l.op.subarray(0, 100), address: l.address.subarray(0, 100), event: l.event.subarray(0, 100) }).layout)
    const later = sentLayout({ ...l, op: l.op.subarray(100, 200), address: l.address.subarray(100, 200), event: l.event.subarray(100, 200) }).layout
    assert.throws(() => builder.add({ ...later, words: { base: later.words!.base + 512, shift: later.words!.shift } }), /read unlike the first piece/)
  })

  it('the bundle read in byte chunks of random sizes gives the same views as read whole, and the whole-layout models', () => {
    const random = seeded(11)
    const decoder = new ReplayDecoder()
    for (let at = 0; at < bytes.byteLength;) {
      // Mostly small chunks, so pieces end inside chunks, and a few large ones.
      const size = random() < 0.9 ? 1 + Math.floor(random() * 4096) : 1 + Math.floor(random() * 200_000)
      decoder.push(bytes.slice(at, at + size))
      at += size
    }
    const streamed = decoder.finish()
    const plain = (views: StrategyView[]) =>
      views.map((v) => ({
        name: v.name,
        summary: v.summary,
        records: records(v.model),
        metrics: v.metrics && Object.fromEntries(Object.entries(v.metrics).map(([k, a]) => [k, Array.from(a as Float64Array)])),
      }))
    assert.deepEqual(plain(streamed), plain(whole))
    for (const [i, r] of results.entries()) {
      const l = r.layout
      const model = buildStrategyModel(
        { op: l.op, address: l.address, size: l.size, requested: l.requested, stream: l.stream, event: l.event },
        reuseKindOf(r.strategy, r.params),
      )
      assert.deepEqual(records(streamed[input.strategies.length + i]!.model), records(model), r.label)
    }
  })

  it('chunks pushed from one buffer written over after each push (reused) give the same views as read whole', () => {
    const random = seeded(12)
    const decoder = new ReplayDecoder()
    const scratch = new Uint8Array(70_000)
    for (let at = 0; at < bytes.byteLength;) {
      // The first chunks shorter than the header, so the head is kept across pushes.
      const size = Math.min(bytes.byteLength - at, at < 64 ? 1 + Math.floor(random() * 7) : 1 + Math.floor(random() * scratch.byteLength))
      scratch.set(bytes.subarray(at, at + size))
      decoder.push(scratch.subarray(0, size), true)
      scratch.fill(0xa5)
      at += size
    }
    assert.deepEqual(
      decoder.finish().map((v) => records(v.model)),
      whole.map((v) => records(v.model)),
    )
  })

  it('replayFrom reads a byte stream through one buffer, and any other stream chunk by chunk, to the same views', async () => {
    const chunks = (random: () => number) => {
      const out: Uint8Array[] = []
      for (let at = 0; at < bytes.byteLength;) {
        const size = 1 + Math.floor(random() * 300_000)
        out.push(bytes.slice(at, at + size))
        at += size
      }
      return out
    }
    const byteStream = (parts: Uint8Array[]) =>
      new ReadableStream({
        type: 'bytes',
        pull(controller) {
          const next = parts.shift()
          if (next) controller.enqueue(next)
          else {
            // A byte source ends a pending read into the reader's buffer with respond(0), as fetch's does.
            controller.close()
            controller.byobRequest?.respond(0)
          }
        },
      })
    const plainStream = (parts: Uint8Array[]) =>
      new ReadableStream<Uint8Array>({
        pull(controller) {
          const next = parts.shift()
          if (next) controller.enqueue(next)
          else controller.close()
        },
      })
    const expected = whole.map((v) => records(v.model))
    assert.deepEqual(
      (await replayFrom(byteStream(chunks(seeded(13))))).map((v) => records(v.model)),
      expected,
    )
    assert.deepEqual(
      (await replayFrom(plainStream(chunks(seeded(14))))).map((v) => records(v.model)),
      expected,
    )
    // A stream that ends short is the decoder's error, however it is read.
    await assert.rejects(replayFrom(byteStream([bytes.slice(0, bytes.byteLength - 5)])), BundleError)
  })

  it("encodeBundleParts are encodeBundle's bytes, and the header announces their length", () => {
    const bundle = replayBundle(input.trace, input.strategies, results.slice(0, 2), 257)
    const parts = encodeBundleParts(bundle)
    const joined = Buffer.concat(parts)
    assert.deepEqual(new Uint8Array(joined), encodeBundle(bundle))
    assert.equal(bundleByteLength(parts[0]!), joined.byteLength)
    assert.equal(bundleByteLength(parts[0]!.subarray(0, 11)), undefined, 'not enough bytes for the header yet')
  })

  it('a bundle cut short or run long is a BundleError', () => {
    const short = new ReplayDecoder()
    short.push(bytes.slice(0, bytes.byteLength - 8))
    assert.throws(() => short.finish(), BundleError)
    const long = new ReplayDecoder()
    long.push(bytes.slice())
    assert.throws(() => long.push(new Uint8Array(8)), BundleError)
    assert.throws(() => new ReplayDecoder().finish(), BundleError)
  })
})
