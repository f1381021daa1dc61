// The views on every kind of real input, in Chromium against the real `vramscope serve`: a GPU
// recording made by vramscope on an H100 (its recorded layout first, beside the modelled
// strategies), and an RMM logging_resource_adaptor CSV opened from disk through the file input.
// For each: the maps, the timeline and the metrics table are drawn, playback moves the event, and
// a click on a map inspects a block; a torch.profiler trace, whose timeline draws the profiler's
// recorded reserved curve beside the replays'. The PyTorch snapshots are covered by app.e2e.test.ts.
// Screenshots go to test/e2e/output (look at them).
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'

import type { Page } from 'playwright-core'

import { browserSkipReason, eventPosition, openApp, OUTPUT, ROOT, waitForCount, type OpenedApp } from './helpers.ts'

const skip = browserSkipReason()
if (skip) console.log(`# e2e skipped: ${skip}`)

/** Clicks across the first map until the inspector shows a block; returns its id text. */
async function inspectSomeBlock(page: Page): Promise<string> {
  const canvas = page.locator('.map canvas').first()
  const box = (await canvas.boundingBox())!
  for (let y = 2; y < box.height; y += 5)
    for (let x = 2; x < box.width; x += 25) {
      await canvas.click({ position: { x, y } })
      if ((await page.getByTestId('inspected-id').count()) > 0) return (await page.getByTestId('inspected-id').textContent()) ?? ''
    }
  return ''
}

/** What every input must show once open: a map per strategy, the timeline, the metrics table. */
async function checkViews(page: Page, maps: number): Promise<string[]> {
  await page.locator('.map canvas').first().waitFor({ timeout: 60_000 })
  await waitForCount(page.locator('.map'), (n) => n >= maps)
  assert.ok((await page.locator('.timeline svg, .timeline canvas').count()) > 0, 'the timeline is drawn')
  // The table renders after the maps: wait for it rather than read it at once (a loaded machine lags).
  await waitForCount(page.locator('table.metrics thead th'), (n) => n - 1 >= maps, 30_000).catch(() => 0)
  const header = await page.locator('table.metrics thead th').allTextContents()
  assert.ok(header.length - 1 >= maps, `a metrics column per strategy: ${header.join(', ')}`)
  return page.locator('.map h3').allTextContents()
}

describe('every kind of input in the browser', { skip }, () => {
  let app: OpenedApp
  let page: Page

  before(async () => {
    app = await openApp()
    page = app.page
  })
  after(() => app?.close())

  it('a GPU recording: the recorded layout first, playback, a block inspected', async () => {
    await page.locator('[data-sample="h100-inference-buddy.vramscope"]').click()
    const names = await checkViews(page, 2)
    assert.match(names[0]!, /buddy \(recorded\)/, `the recording's own layout comes first: ${names.join(', ')}`)
    await page.keyboard.press('Home')
    assert.equal(await eventPosition(page), 0)
    await page.keyboard.press('ArrowRight')
    assert.equal(await eventPosition(page), 1, 'a step moves the event')
    await page.locator('input[aria-label="event"]').fill('200')
    assert.equal(await eventPosition(page), 200, 'the scrubber moves the event')
    const id = await inspectSomeBlock(page)
    assert.ok(id !== '', 'a click on the recorded map selected a block')
    await page.screenshot({ path: join(OUTPUT, 'source-recording.png'), fullPage: true })
  })

  it('an RMM log opened from disk: maps, metrics, a block inspected', async () => {
    const file = join(ROOT, 'test', 'fixtures', 'rmm', 'with-failures.csv')
    await page.getByTestId('file-input').setInputFiles(file)
    await page.getByText('with-failures.csv').first().waitFor({ timeout: 30_000 })
    const names = await checkViews(page, 2)
    assert.ok(
      names.every((n) => !n.includes('(recorded)')),
      `an RMM log has no recorded layout: ${names.join(', ')}`,
    )
    await page.getByRole('button', { name: 'peak' }).click() // the 1 GiB block is live there
    const id = await inspectSomeBlock(page)
    assert.ok(id !== '', 'a click on a map selected a block')
    await page.screenshot({ path: join(OUTPUT, 'source-rmm.png'), fullPage: true })
  })

  it("a torch.profiler trace: the profiler's recorded reserved curve drawn beside the replays'", async () => {
    const file = join(ROOT, 'test', 'fixtures', 'pytorch', 'field-profile.json.gz')
    await page.getByTestId('file-input').setInputFiles(file)
    await page.getByText('field-profile.json.gz').first().waitFor({ timeout: 30_000 })
    const names = await checkViews(page, 2)
    assert.ok(
      names.every((n) => !n.includes('(recorded)')),
      `a profiler trace has no recorded layout: ${names.join(', ')}`,
    )
    const curve = page.getByTestId('recorded-reserved')
    await curve.waitFor({ timeout: 30_000 })
    const d = (await curve.getAttribute('d')) ?? ''
    assert.ok(d.split('L').length > 10, `the curve is drawn over the trace: ${d.slice(0, 80)}`)
    // The profiler's peak, 1.28 GiB (the fixture's largest Total Reserved), named in the legend.
    assert.match((await page.getByTestId('recorded-reserved-legend').textContent()) ?? '', /the profiler's recorded reserved \(peak 1\.28 GiB\)/)
    // Beside the replays' own reserved curves, one per map.
    assert.ok((await page.locator('.timeline path.reserved').count()) >= names.length)
    // The PyTorch-policy map starts holding what was allocated before the profiler started (a
    // stand-in at the start of the trace), so its peak reserved reads as the profiler's.
    const header = await page.locator('table.metrics thead th').allTextContents()
    const column = header.findIndex((h) => /pytorch/.test(h))
    assert.ok(column > 0, `a PyTorch-policy column: ${header.join(', ')}`)
    const peakRow = page.locator('table.metrics tbody tr').filter({ has: page.locator('th', { hasText: /^peak reserved$/ }) })
    const cells = await peakRow.locator('td').allTextContents()
    assert.match(cells[column - 1] ?? '', /^1\.28 GiB/, `${header[column]}: peak reserved ${cells[column - 1]}`)
    await page.screenshot({ path: join(OUTPUT, 'source-kineto.png'), fullPage: true })
  })

  it('raised no uncaught errors in the page', () => {
    assert.deepEqual(app.pageErrors, [])
  })
})
