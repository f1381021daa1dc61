// A page opened after the host has opened its file, in Chromium against the real `vramscope serve`, on a real
// PyTorch snapshot that ends in an out-of-memory (recorded on an H100 with default stacks): the host
// opens the file, and the open replays its maps (AppSession.startOpening), as it starts, so a page opened a few
// seconds later draws every map, each cut at the failure, before the trace's columns have arrived
// (held back here by the test); then the columns and the whole maps replace the previews.
// Screenshots go to test/e2e/output (look at them).
import assert from 'node:assert/strict'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'

import type { Browser, Page, Route } from 'playwright-core'

import { browserSkipReason, launchBrowser, OUTPUT, serveSuiteSnapshot, waitForCount, type Served } from './helpers.ts'

const skip = browserSkipReason()
if (skip) console.log(`# e2e skipped: ${skip}`)

/**
 * How long after the host starts the page is opened: the host opens this 32-event snapshot and
 * replays its six maps in well under a second alone; the margin is for a loaded machine.
 */
const OPENED_AFTER_MS = 6000

describe('a page opened after the host has replayed its file', { skip }, () => {
  let served: Served
  let browser: Browser
  let page: Page
  const pageErrors: string[] = []
  const heldColumns: Route[] = []
  let release = false

  before(async () => {
    mkdirSync(OUTPUT, { recursive: true })
    const started = Date.now()
    served = await serveSuiteSnapshot('oom_fraction__default.pickle')
    browser = await launchBrowser()
    page = await browser.newPage({ viewport: { width: 1500, height: 1100 } })
    page.on('pageerror', (e) => pageErrors.push(e.message))
    await page.route('**/api/trace%3Adata', (route) => {
      if (release) return void route.continue()
      heldColumns.push(route)
    })
    await new Promise((r) => setTimeout(r, Math.max(0, OPENED_AFTER_MS - (Date.now() - started))))
    await page.goto(served.url)
  })
  after(async () => {
    await browser?.close()
    await served?.stop()
  })

  it("draws every map, cut at the out-of-memory, while the trace's columns are still on their way", async () => {
    await waitForCount(page.locator('.map'), (n) => n === 6, 60_000)
    await waitForCount(page.locator('.map-pending'), (n) => n === 0, 10_000)
    assert.equal(heldColumns.length, 1, 'the page asked for the columns, which the test holds')
    const state = await page.evaluate(() => {
      const a = (globalThis as unknown as { vramscopeApp: { event: number; trace: unknown; previews: { previewAt?: number }[] } }).vramscopeApp
      return { event: a.event, trace: a.trace !== null, cuts: a.previews.map((p) => p.previewAt ?? null) }
    })
    assert.equal(state.trace, false, 'no columns yet')
    assert.equal(state.cuts.length, 6)
    assert.ok(
      state.cuts.every((c) => c === state.event),
      `every map cut at the playhead's event, the failure (${state.event}): ${state.cuts.join(', ')}`,
    )
    await page.locator('.oom').first().waitFor({ timeout: 10_000 })
    await page.screenshot({ path: join(OUTPUT, 'replay-ahead-previews.png') })
  })

  it('then draws the whole maps once the columns arrive', async () => {
    release = true
    for (const route of heldColumns.splice(0)) await route.continue()
    await waitForCount(page.locator('.map .preview-note'), (n) => n === 0, 60_000)
    assert.equal(await page.locator('.map').count(), 6)
    const strategies = await page.evaluate(() => (globalThis as unknown as { vramscopeApp: { strategies: unknown[] } }).vramscopeApp.strategies.length)
    assert.equal(strategies, 6)
    await page.screenshot({ path: join(OUTPUT, 'replay-ahead-whole.png') })
    assert.deepEqual(pageErrors, [])
  })
})
