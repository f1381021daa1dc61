// Maps drawn before their histories arrive, in Chromium against the real `vramscope serve`, on a
// real PyTorch snapshot (BERT training, default stacks): the host cuts each replayed map to what it
// shows at the event the first map opened at (src-shared/wire.ts, layoutAt), the page draws those
// previews while the whole replays are held back (here by the test), each saying that its history
// is on its way and staying at its event when the playhead moves; when the whole replays arrive,
// each map reads the same figures at that event as its preview did. Screenshots go to
// test/e2e/output (look at them).
import assert from 'node:assert/strict'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'

import type { Browser, Page, Route } from 'playwright-core'

import { browserSkipReason, launchBrowser, OUTPUT, serveSuiteSnapshot, waitForCount, type Served } from './helpers.ts'

const skip = browserSkipReason()
if (skip) console.log(`# e2e skipped: ${skip}`)

interface App {
  event: number
  events: number
  strategies: unknown[]
  seek(event: number): void
}

describe('maps drawn before their histories arrive', { skip }, () => {
  let served: Served
  let browser: Browser
  let page: Page
  const pageErrors: string[] = []
  /** Whole replays (not previews) held back until the third test. */
  const held: Route[] = []
  let release = false
  /** The figures of each preview, by map name, at the event it was cut at. */
  const previewFigures = new Map<string, string>()
  let cutAt = -1

  before(async () => {
    mkdirSync(OUTPUT, { recursive: true })
    served = await serveSuiteSnapshot('bert_train__default.pickle')
    browser = await launchBrowser()
    page = await browser.newPage({ viewport: { width: 1500, height: 1100 } })
    page.on('pageerror', (e) => pageErrors.push(e.message))
    await page.route('**/api/replay%3Aresult', (route) => {
      const arg = JSON.parse(route.request().postData() ?? '{}') as { strategy?: number; preview?: boolean }
      // The recorded map (no replay) and every preview pass; the others' whole replays wait.
      if (release || arg.preview === true || arg.strategy === undefined) return void route.continue()
      held.push(route)
    })
    await page.goto(served.url)
  })
  after(async () => {
    await browser?.close()
    await served?.stop()
  })

  const app = () =>
    page.evaluate(() => {
      const a = (globalThis as unknown as { vramscopeApp: App }).vramscopeApp
      return { event: a.event, events: a.events, strategies: a.strategies.length }
    })
  const seek = (e: number) => page.evaluate((e) => (globalThis as unknown as { vramscopeApp: App }).vramscopeApp.seek(e), e)

  it('draws every replayed map as a preview at the opening event, each saying its history is on its way', async () => {
    await waitForCount(page.locator('.map .preview-note'), (n) => n === 5, 90_000)
    await waitForCount(page.locator('.map-pending'), (n) => n === 0, 10_000)
    // The previews may be drawn before the trace's columns arrive (their replays ended before the
    // page looked); the whole replays are asked for once the columns are in, and held.
    await waitForCount({ count: async () => held.length }, (n) => n >= 5, 60_000)
    const { event, events, strategies } = await app()
    cutAt = event
    assert.equal(strategies, 1, 'only the recorded map is whole')
    assert.ok(event > 0 && event < events - 1, `opened at the recorded map's peak, event ${event} of ${events}`)
    const maps = page.locator('.map')
    assert.equal(await maps.count(), 6)
    assert.equal(await maps.nth(0).locator('.preview-note').count(), 0, 'the recorded map is whole')
    for (let i = 1; i < 6; i++) {
      const map = maps.nth(i)
      const name = (await map.getAttribute('data-strategy'))!
      assert.match(
        (await map.locator('.preview-note').textContent()) ?? '',
        new RegExp(`^at event ${event.toLocaleString('en-US')}: its history is on its way$`),
      )
      const figures = (await map.locator('.figures').textContent())!.replace(/\s+/g, ' ').trim()
      assert.match(figures, /reserved [\d.]+ [KMG]iB .* in use /, name)
      previewFigures.set(name, figures)
    }
    await page.screenshot({ path: join(OUTPUT, 'preview-maps.png') })
  })

  it('keeps a preview at its event when the playhead moves, and says so', async () => {
    await seek(3)
    const note = page.locator('.map .preview-note').first()
    await note.filter({ hasText: /\(not the playhead\): its history is on its way$/ }).waitFor({ timeout: 10_000 })
    const name = (await page.locator('.map').nth(1).getAttribute('data-strategy'))!
    assert.equal((await page.locator('.map').nth(1).locator('.figures').textContent())!.replace(/\s+/g, ' ').trim(), previewFigures.get(name))
    await seek(cutAt)
  })

  it('replaces each preview with its whole map, which reads the same figures at that event', async () => {
    release = true
    for (const route of held.splice(0)) await route.continue()
    await waitForCount(page.locator('.map .preview-note'), (n) => n === 0, 90_000)
    const maps = page.locator('.map')
    assert.equal(await maps.count(), 6)
    assert.equal((await app()).event, cutAt)
    for (let i = 1; i < 6; i++) {
      const name = (await maps.nth(i).getAttribute('data-strategy'))!
      assert.equal((await maps.nth(i).locator('.figures').textContent())!.replace(/\s+/g, ' ').trim(), previewFigures.get(name), name)
    }
    await page.screenshot({ path: join(OUTPUT, 'preview-maps-whole.png') })
    assert.deepEqual(pageErrors, [])
  })
})
