// The renderer's views of stacks (src-renderer/viz/frames.ts, peak.ts, categories.ts, search.ts)
// on a real PyTorch snapshot recorded with the default stacks, decoded as the app decodes it: the
// peak view's groups and colour by frame follow the headline frame (the script's line), not the
// innermost frame (torch::unwind::unwind() for every stack), and the hover names shown frames.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { blockCategories, categoryName, frameCategories } from '../../../../src-renderer/viz/categories.ts'
import { filteredStackAt, hoverFrames, stackHeadlines } from '../../../../src-renderer/viz/frames.ts'
import { peakGroups, peakReservedEvent, PENDING_GROUP } from '../../../../src-renderer/viz/peak.ts'
import { parseQuery, searchBlocks } from '../../../../src-renderer/viz/search.ts'
import { rendererData } from '../../../helpers/renderer-data.ts'
import { realSnapshot } from '../../../helpers/real-snapshots.ts'

describe('stacks in the renderer, on a default-stack snapshot', async () => {
  const { trace, views } = await rendererData(realSnapshot('cuda_graph__default'), 'caching:preset=pytorch')
  const events = trace.kind.length

  it('every stack starts in the unwinder, but no headline is there', () => {
    const headlines = stackHeadlines(trace)
    assert.ok(headlines.length > 10)
    for (let s = 0; s < headlines.length; s++) {
      const first = trace.frames[trace.stackFrames[trace.stackOffsets[s]!]!]!
      assert.match(first.name, /unwind/)
      assert.doesNotMatch(trace.frames[headlines[s]!]!.name, /unwind/)
    }
  })

  for (const view of views) {
    it(`${view.name}: the peak view's groups are the script's lines (or the backward op), not the unwinder`, () => {
      const groups = peakGroups(view, trace, peakReservedEvent(view, events), 'frame').filter((g) => g.key !== PENDING_GROUP)
      assert.ok(groups.length > 2, `${groups.length} groups`)
      const script = groups.filter((g) => /^record_whatif_suite\.py:\d+ prog_cuda_graph$/.test(g.label))
      assert.ok(script.length >= 2, groups.map((g) => g.label).join(' | '))
      assert.ok(
        groups.slice(0, 3).some((g) => script.includes(g)),
        'a line of the script is among the three largest',
      )
      for (const g of groups) assert.doesNotMatch(g.label, /unwind|\?\?/)
    })

    it(`${view.name}: colour by frame tells the script's lines apart`, () => {
      const categories = blockCategories(view, trace, 'frame')
      const names = new Set(Array.from(categories, (c) => categoryName(trace, 'frame', c)))
      assert.ok(names.size > 3, `${names.size} colours`)
      for (const n of names) assert.doesNotMatch(n, /unwind/)
    })
  }

  it("without the trace's columns (a first map drawn before they arrive), streams and sizes colour as with them; tags and frames are one colour", () => {
    const view = views[0]!
    for (const by of ['stream', 'size'] as const) assert.deepEqual(blockCategories(view, null, by), blockCategories(view, trace, by))
    const sizes = new Set(blockCategories(view, null, 'size'))
    assert.ok(sizes.size > 3, `${sizes.size} size classes from the model alone`)
    for (const by of ['tag', 'frame'] as const) {
      const c = blockCategories(view, null, by)
      assert.equal(c.length, view.model.blocks.count)
      assert.ok(c.every((v) => v === 0))
    }
  })

  it('frame colours go to the headlines by memory held, largest first, so the largest groups differ', () => {
    const c = frameCategories(trace)
    assert.ok(c.frames.length > 3)
    for (let i = 1; i < c.share.length; i++) assert.ok(c.share[i - 1]! >= c.share[i]!)
    assert.ok(Math.abs(c.share.reduce((a, b) => a + b, 0) - 1) < 1e-9)
    assert.equal(new Set(c.frames).size, c.frames.length)
    assert.equal(categoryName(trace, 'frame', 0), 'no frames')
    assert.doesNotMatch(categoryName(trace, 'frame', 1), /unwind/)
  })

  it('the hover leads with the headline and lists the shown frames inside it', () => {
    const b = views[0]!.model.blocks
    let checked = 0
    for (let k = 0; k < b.count; k++) {
      const h = hoverFrames(trace, b.from[k]!, 2)
      if (!h.headline) continue
      checked++
      assert.doesNotMatch(h.headline, /unwind/)
      assert.ok(h.inner.length <= 2)
      for (const f of h.inner) assert.doesNotMatch(f, /unwind|_PyEval|\?\?/)
    }
    assert.ok(checked > 0)
  })

  it('search looks at the shown frames, and at hidden ones only when nothing shown matches', () => {
    const model = views[0]!.model
    // Every stack holds torch::unwind::unwind(): a hidden frame, so it is searched only as a fallback.
    const unwinder = searchBlocks(model, trace, parseQuery('unwind::unwind'))
    assert.ok(unwinder.length > 0)
    const forward = searchBlocks(model, trace, parseQuery('linear.py'))
    assert.ok(forward.length > 0 && forward.length < model.blocks.count)
    for (const k of forward) {
      const f = filteredStackAt(trace, model.blocks.from[k]!)!
      assert.ok(f.shown.some((s) => trace.frames[s.frame]!.filename.includes('linear.py')))
    }
  })
})
