// Exporting the view (src-renderer/viz/export.ts): a real map rasterized from a replayed PyTorch
// snapshot, turned into SVG rects, paints back to exactly the same pixels with far fewer rects
// than pixels; the scene keeps maps apart and inside the image; text is escaped.
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { describe, it } from 'node:test'

import { rasterize, rgba, type MapPalette } from '../../../../src-renderer/viz/draw.ts'
import {
  commonestColor,
  composeScene,
  cssColor,
  metricsAt,
  pixelRects,
  sceneToSvg,
  exportFileStem,
  type ExportPanel,
} from '../../../../src-renderer/viz/export.ts'
import { wholeView } from '../../../../src-renderer/viz/layout.ts'
import { peakReservedEvent } from '../../../../src-renderer/viz/peak.ts'
import { rendererData } from '../../../helpers/renderer-data.ts'

const SNAPSHOT = join(import.meta.dirname, '..', '..', '..', 'fixtures', 'pytorch', 'convnet_varimg.pickle')
// The map's own kinds of pixel, and a few block colours (blocks coloured by stream, as the app starts).
const PALETTE: MapPalette = {
  unreserved: rgba(246, 247, 249),
  addressSpace: rgba(226, 230, 238),
  free: rgba(196, 203, 214),
  waste: rgba(214, 80, 80),
  pending: rgba(240, 180, 30),
  dead: rgba(150, 110, 120),
  freedGhost: rgba(120, 130, 150),
  edgeDarken: 0.35,
  categories: Uint32Array.of(rgba(78, 121, 167), rgba(242, 142, 43), rgba(89, 161, 79)),
}
const COLORS = { background: '#ffffff', text: '#111111', muted: '#666666', border: '#cccccc' }

describe('export', async () => {
  const { trace, views } = await rendererData(SNAPSHOT, 'caching:preset=pytorch,buddy')
  const width = 360
  const height = 140
  const maps = views.map((view) => {
    const pixels = new Uint32Array(width * height)
    const owner = new Int32Array(width * height)
    const event = peakReservedEvent(view, trace.kind.length)
    rasterize(
      view.model,
      view.placed,
      { width, height, view: wholeView(view.placed.spans), event, recentWindow: 8, category: view.model.blocks.stream.map((s) => s % 3), selected: -1 },
      PALETTE,
      pixels,
      owner,
    )
    return pixels
  })

  it('writes colours as #rrggbb from the pixel words', () => {
    assert.equal(cssColor(0xff030201), '#010203')
    assert.equal(cssColor(0xff0000ff), '#ff0000')
  })

  it('rects over the commonest colour paint back every pixel of a real map, far fewer than pixels', () => {
    for (const pixels of maps) {
      const background = commonestColor(pixels)
      const rects = pixelRects(pixels, width, height, background)
      const painted = new Uint32Array(width * height).fill(background)
      for (const r of rects) for (let y = r.y; y < r.y + r.height; y++) painted.fill(r.color, y * width + r.x, y * width + r.x + r.width)
      assert.deepEqual(painted, pixels)
      let runs = 0
      for (let y = 0; y < height; y++) for (let x = 0; x < width; x++) if (x === 0 || pixels[y * width + x] !== pixels[y * width + x - 1]) runs++
      assert.ok(rects.length <= runs, `${rects.length} rects, ${runs} row runs`)
      assert.ok(rects.length < (width * height) / 20, `${rects.length} rects for ${width * height} pixels`)
    }
  })

  it('lays the maps out apart, inside the image, above the metrics, in the columns asked for', () => {
    const panels: ExportPanel[] = views.map((v) => ({
      title: v.name,
      subtitle: 'reserved 1 GiB · in use 512 MiB · waste 1 MiB · 1,000 blocks, and more text than fits',
      width,
      height,
    }))
    const metrics = metricsAt(views, 100)
    assert.deepEqual(
      metrics.columns,
      views.map((v) => v.name),
    )
    for (const r of metrics.rows) assert.equal(r.values.length, views.length)
    const scene = composeScene('trace · event 100', panels, metrics, COLORS, 2)
    const boxes = scene.items.filter((i) => i.kind === 'map')
    assert.equal(boxes.length, views.length)
    for (const [i, a] of boxes.entries()) {
      assert.ok(a.x >= 0 && a.y >= 0 && a.x + a.width <= scene.width && a.y + a.height <= scene.height, `map ${i} inside`)
      for (const b of boxes.slice(i + 1))
        assert.ok(a.x + a.width <= b.x || b.x + b.width <= a.x || a.y + a.height <= b.y || b.y + b.height <= a.y, 'maps do not overlap')
    }
    assert.equal(new Set(boxes.map((b) => b.x)).size, Math.min(2, views.length), 'two columns')
    const lowestMap = Math.max(...boxes.map((b) => b.y + b.height))
    const metricLabels = scene.items.filter((i) => i.kind === 'text' && i.text === 'reserved')
    assert.ok(metricLabels.length === 1 && metricLabels[0]!.kind === 'text' && metricLabels[0]!.y > lowestMap, 'the metrics come after the maps')
    for (const t of scene.items) if (t.kind === 'text' && t.anchor === 'start') assert.ok(t.x < scene.width)
  })

  it("the SVG has a rect per run over each map's background, the titles as escaped text, and parses as balanced XML", () => {
    const panels: ExportPanel[] = views.map((v, i) => ({ title: i === 0 ? 'a <b> & "c"' : v.name, subtitle: '', width, height }))
    const svg = sceneToSvg(composeScene('heading', panels, metricsAt(views, 100), COLORS, 1), maps)
    assert.match(svg, /^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg" width="\d+" height="\d+"/)
    assert.ok(svg.includes('>a &lt;b&gt; &amp; &quot;c&quot;</text>'))
    const rects = svg.match(/<rect /g)!.length
    const expected = maps.reduce((n, p) => n + pixelRects(p, width, height, commonestColor(p)).length + 2, 1)
    assert.equal(rects, expected, 'the page, and per map a background, an outline and the runs')
    // Tags balance: every opened element is closed in order.
    const stack: string[] = []
    for (const m of svg.matchAll(/<(\/?)([a-z]+)[^>]*?(\/?)>/g)) {
      if (m[3] === '/') continue
      if (m[1] === '/') assert.equal(stack.pop(), m[2])
      else stack.push(m[2]!)
    }
    assert.deepEqual(stack, [])
    assert.ok(svg.length < 400_000, `${svg.length} characters`)
  })

  it('with colour by frame, the legend (colour squares and frames) stands above the maps and in the SVG', () => {
    const panels: ExportPanel[] = views.map((v) => ({ title: v.name, subtitle: '', width, height }))
    const legend = Array.from({ length: 9 }, (_, i) => ({ color: `#00000${i}`, label: `model.py:${100 + i} forward_with_a_long_name_${i}` }))
    const scene = composeScene('heading', panels, metricsAt(views, 100), COLORS, 2, legend)
    const swatches = scene.items.filter((i) => i.kind === 'swatch')
    assert.equal(swatches.length, 9)
    const top = Math.min(...scene.items.filter((i) => i.kind === 'map').map((m) => m.y))
    for (const s of swatches) assert.ok(s.y + s.size < top && s.x + s.size <= scene.width, 'legend above the maps, inside the image')
    assert.ok(new Set(swatches.map((s) => s.y)).size > 1, 'a long legend wraps')
    for (const t of scene.items) if (t.kind === 'text') assert.ok(t.x <= scene.width)
    const svg = sceneToSvg(scene, maps)
    assert.ok(svg.includes('>model.py:100 forward_with_a_long_name_0</text>'))
    assert.ok(svg.includes('fill="#000008"/>'))
  })

  it('names the file after the trace and the event', () => {
    assert.equal(exportFileStem('convnet varimg.pickle', 42), 'vramscope-convnet_varimg-event42')
    assert.equal(exportFileStem('', 0), 'vramscope-trace-event0')
  })
})
