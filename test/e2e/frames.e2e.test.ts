// Stacks in the app, on a real PyTorch snapshot recorded with the default stacks (C++ and Python
// frames: every stack starts with torch::unwind::unwind() and ~30 allocator, dispatcher and
// interpreter frames): the peak view's groups are the script's lines, the inspector leads with
// the frame of the user's code and keeps the whole stack behind "all N frames", the map's hover
// names the shown frames, colour by frame tells the groups apart, search matches shown frames.
// Screenshots go to test/e2e/output (look at them).
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'

import type { Page } from 'playwright-core'

import { realSnapshot } from '../helpers/real-snapshots.ts'
import { browserSkipReason, openApp, OUTPUT, waitForCount, type OpenedApp } from './helpers.ts'

const skip = browserSkipReason()
if (skip) console.log(`# e2e skipped: ${skip}`)

const HIDDEN = /torch::unwind|CapturedTraceback|_PyEval_EvalFrameDefault|__libc_start_main|at::_ops::|_call_impl/

describe('frames of a default-stack snapshot in the browser', { skip }, () => {
  let app: OpenedApp
  let page: Page

  before(async () => {
    app = await openApp()
    page = app.page
    await page.getByTestId('file-input').setInputFiles(realSnapshot('gpt2_varshape__default'))
    await page.locator('.map canvas').first().waitFor({ timeout: 60_000 })
    await waitForCount(page.locator('.map'), (n) => n >= 2)
  })
  after(() => app?.close())

  it("the peak view's top group is the script's line, not the unwinder", async () => {
    const peak = page.getByRole('region', { name: 'peak view' })
    await peak.scrollIntoViewIfNeeded()
    await peak.getByLabel('peak view strategy').selectOption({ label: 'pytorch (recorded)' })
    const labels = (await peak.getByTestId('peak-groups').locator('tbody td.name').allTextContents()).map((l) => l.trim())
    assert.ok(labels.length > 3, `several groups: ${labels.join(' | ')}`)
    assert.match(labels[0]!, /^record_whatif_suite\.py:\d+ prog_gpt2_varshape$/, `top group: ${labels[0]}`)
    for (const l of labels) assert.doesNotMatch(l, /unwind/)
    await page.screenshot({ path: join(OUTPUT, 'frames-peak-view.png'), fullPage: true })
  })

  it('the inspector leads with the frame of the user code, shows filtered frames, and all of them on request', async () => {
    const peak = page.getByRole('region', { name: 'peak view' })
    const first = peak.getByTestId('peak-groups').locator('tbody tr').first()
    const label = ((await first.locator('td.name').textContent()) ?? '').trim()
    await first.locator('td.name button').click()
    const headline = (await page.getByTestId('headline').textContent()) ?? ''
    assert.ok(headline.includes(label), `allocated at the group's frame: ${headline}`)
    const list = page.getByTestId('frames')
    assert.equal(await list.getAttribute('data-frames'), 'shown')
    const shown = await list.locator('li').allTextContents()
    assert.ok(shown.length > 0 && shown.length < 30, `${shown.length} shown frames`)
    assert.match(shown[0]!, /\.py:\d+/, `the first shown frame is Python: ${shown[0]}`)
    for (const f of shown) assert.doesNotMatch(f, HIDDEN)
    assert.match((await page.getByTestId('hidden-frames').textContent()) ?? '', /\d+ frames hidden/)
    await page.getByTestId('inspected-id').scrollIntoViewIfNeeded()
    await page.screenshot({ path: join(OUTPUT, 'frames-inspector.png'), fullPage: true })
    await page.getByRole('complementary', { name: 'inspector' }).screenshot({ path: join(OUTPUT, 'frames-inspector-panel.png') })
    await page.getByTestId('all-frames').check()
    assert.equal(await page.getByTestId('frames').getAttribute('data-frames'), 'all')
    const all = await page.getByTestId('frames').locator('li').allTextContents()
    assert.ok(all.length > shown.length, `${all.length} frames in all`)
    assert.match(all[0]!, /torch::unwind::unwind/, 'the whole stack starts in the unwinder')
    await page.getByRole('complementary', { name: 'inspector' }).screenshot({ path: join(OUTPUT, 'frames-inspector-all.png') })
    await page.getByTestId('all-frames').uncheck()
  })

  it("the map's hover names the block's shown frames; colour by frame", async () => {
    await page.locator('select').filter({ hasText: 'size class' }).selectOption('frame')
    const legend = (await page.getByTestId('frame-legend').locator('span').allTextContents()).map((t) => t.trim())
    assert.match(legend[0]!, /^record_whatif_suite\.py:\d+ prog_gpt2_varshape$/, `the legend names the largest frame first: ${legend.join(' | ')}`)
    for (const l of legend) assert.doesNotMatch(l, /unwind/)
    const canvas = page.locator('.map canvas').first()
    await canvas.scrollIntoViewIfNeeded()
    const box = (await canvas.boundingBox())!
    // Blocks the autograd engine allocated have C++ frames only: look on to one from Python.
    let frames: string[] = []
    const python = () => frames.some((f) => /\.py:\d+ /.test(f))
    for (let y = 3; y < box.height && !python(); y += 7)
      for (let x = 5; x < box.width && !python(); x += 37) {
        await canvas.hover({ position: { x, y } })
        frames = await page.locator('[data-testid="map-tip"] .tip-headline, [data-testid="map-tip"] .tip-frame').allTextContents()
        for (const f of frames) assert.doesNotMatch(f, HIDDEN)
      }
    assert.ok(
      frames.some((f) => /\.py:\d+ /.test(f)),
      `Python frames in the hover: ${frames.join(' | ')}`,
    )
    assert.match(frames[0]!, /^at record_whatif_suite\.py:\d+ prog_gpt2_varshape$/, 'the hover leads with the frame of the script')
    await page.screenshot({ path: join(OUTPUT, 'frames-hover.png') })
    const tip = (await page.getByTestId('map-tip').boundingBox())!
    await page.screenshot({
      path: join(OUTPUT, 'frames-hover-tip.png'),
      clip: { x: Math.max(0, tip.x - 40), y: Math.max(0, tip.y - 30), width: 480, height: tip.height + 60 },
    })
  })

  it('an SVG export coloured by frame carries the legend of frames', async () => {
    await page.locator('h1').click()
    const [png] = await Promise.all([page.waitForEvent('download'), page.keyboard.press('e')])
    await png.saveAs(join(OUTPUT, 'frames-export.png'))
    const [svg] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'SVG' }).click()])
    const text = readFileSync((await svg.path())!, 'utf8')
    assert.match(text, />record_whatif_suite\.py:\d+ prog_gpt2_varshape<\/text>/)
    assert.doesNotMatch(text, /unwind/)
  })

  it('search matches the shown frames', async () => {
    await page.locator('h1').click()
    await page.keyboard.press('/')
    await page.keyboard.type('linear.py')
    const count = page.getByTestId('search-count')
    assert.match((await count.textContent()) ?? '', /^\s*[\d,]+ blocks · frames containing/)
    await page.keyboard.press('Enter')
    const shown = await page.getByTestId('frames').locator('li').allTextContents()
    assert.ok(
      shown.some((f) => f.includes('linear.py')),
      `the inspector shows the matching frame: ${shown.slice(0, 4).join(' | ')}`,
    )
  })

  it('raised no uncaught errors in the page', () => {
    assert.deepEqual(app.pageErrors, [])
  })
})
