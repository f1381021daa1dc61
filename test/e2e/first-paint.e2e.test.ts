// A trace's first paint in Chromium against the real `vramscope serve`, on a real PyTorch snapshot
// (BERT training, default stacks): once the host has read the file, the toolbar names it with its
// event count and the timeline draws the program's requested bytes from the trace's summary, with a
// pane per map to come, while the trace's columns are still on their way (held back here by the
// test), and the first map's replay result is fetched meanwhile; when the columns arrive the full
// view replaces it. The screenshot goes to test/e2e/output (look at it).
import assert from 'node:assert/strict'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'

import type { Browser, Page, Route } from 'playwright-core'

import { browserSkipReason, launchBrowser, OUTPUT, serveSuiteSnapshot, waitForCount, type Served } from './helpers.ts'

const skip = browserSkipReason()
if (skip) console.log(`# e2e skipped: ${skip}`)

describe("a trace's first paint, before its columns arrive", { skip }, () => {
  let served: Served
  let browser: Browser
  let page: Page
  const pageErrors: string[] = []
  /** The held `trace:data` request, let go by the second test. */
  let held: Promise<Route>
  /** The first map's replay result, fetched while the columns are held. */
  let firstResult: Promise<unknown>

  before(async () => {
    mkdirSync(OUTPUT, { recursive: true })
    served = await serveSuiteSnapshot('bert_train__default.pickle')
    browser = await launchBrowser()
    page = await browser.newPage({ viewport: { width: 1500, height: 1000 } })
    page.on('pageerror', (e) => pageErrors.push(e.message))
    held = new Promise((resolve) => void page.route('**/api/trace%3Adata', (route) => resolve(route)))
    firstResult = page.waitForResponse((r) => r.url().includes('/api/replay%3Aresult'), { timeout: 60_000 })
    await page.goto(served.url)
  })
  after(async () => {
    await browser?.close()
    await served?.stop()
  })

  const requestedLine = () => page.locator('.timeline path.requested').getAttribute('d')

  it('names the trace and draws its requested bytes and the maps to come while its columns travel', async () => {
    await held
    await waitForCount(page.locator('.map-pending'), (n) => n >= 2, 30_000)
    const toolbar = await page.locator('header.toolbar .file').textContent()
    assert.match(toolbar ?? '', /^bert_train__default\.pickle · [\d,]+ events · 1 stream$/)
    const d = await requestedLine()
    assert.ok(d !== null && d.split('L').length > 100, `the requested bytes are drawn as a line of many points: ${d?.slice(0, 80)}`)
    // The first map's replay goes on meanwhile: its result is fetched and decoded, its pane says so.
    await firstResult
    await page
      .locator('.map-pending')
      .first()
      .getByText(/drawing · 100 %/)
      .waitFor({ timeout: 30_000 })
    // Nothing that needs the columns is there yet.
    assert.equal(await page.locator('.map canvas').count(), 0)
    assert.equal(await page.getByRole('region', { name: 'allocation timeline' }).count(), 0)
    await page.screenshot({ path: join(OUTPUT, 'first-paint-before-columns.png') })
  })

  it('draws the maps once the columns arrive, naming the same trace', async () => {
    const named = await page.locator('header.toolbar .file').textContent()
    await (await held).continue()
    await page.locator('.map canvas').first().waitFor({ timeout: 90_000 })
    await page.getByRole('region', { name: 'allocation timeline' }).waitFor()
    assert.equal(await page.locator('header.toolbar .file').textContent(), named)
    const d = await requestedLine()
    assert.ok(d !== null && d.split('L').length > 100, 'the requested bytes, now from the columns')
    assert.deepEqual(pageErrors, [])
  })
})
