// A memory map kept from frame to frame (MapRaster, src-renderer/viz/draw.ts) redraws only the
// blocks freed, placed or changed since its last event. Whatever the step, it must show what a
// full pass at the same event shows, pixel for pixel and owner for owner: real PyTorch snapshots
// (recorded on the GPU machine with default stacks) replayed by the real addon through strategies
// with pending frees (async_pool), dead space (device_bump), resets (arena), regions that come and
// go (slab, vmm_growable) and PyTorch's own policy, drawn on canvases wide enough to give most
// blocks pixels of their own and small enough to crowd many blocks into one pixel.
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { describe, it } from 'node:test'

import { encodeBundle } from '../../../../src-shared/bundle.ts'
import { openInput } from '../../../../src-main/services/import/open-input.ts'
import { replayBundle } from '../../../../src-main/services/replay/replay-input.ts'
import { replayTrace, type ReplayTarget } from '../../../../src-main/services/replay/replay.ts'
import { decodeReplay, type StrategyView } from '../../../../src-renderer/viz/data.ts'
import { MapRaster, rasterize, rgba, type DrawRequest, type MapPalette } from '../../../../src-renderer/viz/draw.ts'
import { wholeView, type MapView } from '../../../../src-renderer/viz/layout.ts'
import { computeFiguresAt, figuresAt } from '../../../../src-renderer/viz/model.ts'

const FIXTURES = join(import.meta.dirname, '..', '..', '..', 'fixtures', 'pytorch')

const palette: MapPalette = {
  unreserved: rgba(1, 1, 1),
  addressSpace: rgba(2, 2, 2),
  free: rgba(3, 3, 3),
  waste: rgba(4, 4, 4),
  pending: rgba(5, 5, 5),
  dead: rgba(7, 7, 7),
  freedGhost: rgba(60, 60, 60),
  edgeDarken: 0.3,
  categories: Uint32Array.of(rgba(200, 0, 0), rgba(0, 200, 0), rgba(0, 0, 200), rgba(200, 200, 0)),
  segmentOutline: rgba(250, 250, 250),
}

const STRATEGIES: ReplayTarget[] = [
  { label: 'caching', strategy: 'caching', params: { preset: 'pytorch' } },
  { label: 'async_pool', strategy: 'async_pool', params: {} },
  { label: 'device_bump', strategy: 'device_bump', params: {} },
  { label: 'arena', strategy: 'arena', params: {} },
  { label: 'slab', strategy: 'slab', params: {} },
  { label: 'vmm_growable', strategy: 'vmm_growable', params: {} },
]

async function views(file: string): Promise<{ views: StrategyView[]; events: number }> {
  const input = await openInput(join(FIXTURES, file))
  const results = await replayTrace(input.trace, STRATEGIES, { layout: true })
  const buffer = encodeBundle(replayBundle(input.trace, [], results))
  return {
    views: decodeReplay(buffer.buffer.slice(buffer.byteOffset, buffer.byteOffset + buffer.byteLength) as ArrayBuffer),
    events: input.trace.events.kind.length,
  }
}

/** Steps the raster forward through `events` and checks every frame against a full pass; returns the raster. */
function stepAndCompare(view: StrategyView, size: { width: number; height: number }, mapView: MapView, events: number[], window: number): MapRaster {
  const { width, height } = size
  const category = new Uint32Array(view.model.blocks.count)
  for (let k = 0; k < category.length; k++) category[k] = k % 5
  const raster = new MapRaster()
  const pixels = new Uint32Array(width * height)
  const full = new Uint32Array(width * height)
  const owner = new Int32Array(width * height)
  for (const [i, e] of events.entries()) {
    const request: DrawRequest = {
      width,
      height,
      view: mapView,
      event: e,
      recentWindow: window,
      category,
      selected: i % 4 === 0 ? e % view.model.blocks.count : -1,
    }
    const got = raster.draw(view.model, view.placed, request, palette, pixels)
    const want = rasterize(view.model, view.placed, request, palette, full, owner)
    assert.equal(got.liveBlocksDrawn, want.liveBlocksDrawn, `${view.name} ${width}×${height}: live blocks drawn after event ${e}`)
    for (let p = 0; p < pixels.length; p++) {
      if (pixels[p] !== full[p] || raster.owner[p] !== owner[p])
        assert.fail(
          `${view.name} ${width}×${height}: after event ${e} (step ${i}) pixel ${p} is ${pixels[p]!.toString(16)} owned by ${raster.owner[p]}; a full pass draws ${full[p]!.toString(16)} owned by ${owner[p]}`,
        )
    }
  }
  return raster
}

for (const file of ['convnet_varimg.pickle', 'transformer_varseq.pickle']) {
  describe(`a map redrawn frame by frame equals a full pass (${file})`, async () => {
    const { views: all, events: n } = await views(file)

    it('while playing forward in steps of 1 to 97 events, highlights, selection and outlines on', () => {
      // Steps of every size up to past the recent window, from a third of the trace.
      const events: number[] = []
      let e = Math.floor(n / 3)
      for (let i = 0; i < 160 && e < n; i++) events.push((e += [1, 2, 3, 7, 13, 31, 97][i % 7]!))
      for (const view of all)
        for (const size of [
          { width: 480, height: 120 },
          { width: 48, height: 6 },
        ]) {
          const raster = stepAndCompare(view, size, wholeView(view.placed.spans), events, 40)
          // The frames after the first were drawn from the previous one, not again from scratch.
          assert.ok(
            raster.passes.incremental > raster.passes.full,
            `${view.name} ${size.width}×${size.height}: ${JSON.stringify(raster.passes)} redrawn frame by frame`,
          )
        }
    })

    it("the map header's figures, stepped forward from the last event asked, equal those summed over every block", () => {
      for (const view of all) {
        let e = Math.floor(n / 4)
        for (let i = 0; i < 200 && e < n; i++, e += [1, 5, 17, 60][i % 4]!)
          assert.deepEqual(figuresAt(view.model, e), computeFiguresAt(view.model, e), `${view.name}: figures after event ${e}`)
      }
    })

    it('when zoomed onto part of the address space, and after seeking back', () => {
      for (const view of all) {
        const whole = wholeView(view.placed.spans)
        const zoom = { start: whole.length * 0.2, length: whole.length * 0.05 }
        const forward = Array.from({ length: 60 }, (_, i) => Math.floor(n / 4) + i * 5)
        stepAndCompare(view, { width: 200, height: 50 }, zoom, [...forward, Math.floor(n / 5), Math.floor(n / 5) + 3], 0)
      }
    })
  })
}
