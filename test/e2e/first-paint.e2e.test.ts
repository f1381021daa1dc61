// A trace's first paint in Chromium against the real `vramscope serve`, on a real PyTorch snapshot
// (BERT training, default stacks): once the host has read the file, the toolbar names it with its
// event count and the timeline draws the program's requested bytes from the trace's summary, with a
// pane per map to come; the first map (here the recorded layout) is drawn as a preview cut at its
// peak, and every other map as a preview cut there once its replay ends, all before the trace's
// columns are asked for (held back here by the test); when they arrive the full view replaces it.
// The screenshots go to test/e2e/output (look at them).
import assert from 'node:assert/strict'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'

import type { Browser, Page, Route } from 'playwright-core'
import type { JobStatus } from '../../src-shared/contract.ts'

import { browserSkipReason, launchBrowser, OUTPUT, serveSuiteSnapshot, waitForCount, type Served } from './helpers.ts'

const skip = browserSkipReason()
if (skip) console.log(`# e2e skipped: ${skip}`)

/**
 * Holds the page's fetches of the other maps (the opening's `rest` job, which the open's status
 * names: TraceSummary.opening) while `running()` holds, as a replay still under way would. Returns
 * what it saw: that job and when the open that started it ended.
 */
async function holdOthersReplay(page: Page, running: () => boolean): Promise<{ jobId?: string; startedAt?: number }> {
  const seen: { jobId?: string; startedAt?: number } = {}
  await page.route('**/api/job%3Astatus', async (route) => {
    const response = await route.fetch()
    const status = ((await response.json()) as { result?: JobStatus }).result
    if (seen.jobId === undefined && status?.summary?.opening) {
      seen.jobId = status.summary.opening.rest
      seen.startedAt = Date.now()
    }
    await route.fulfill({ response })
  })
  await page.route('**/api/replay%3Aresult', async (route) => {
    const { jobId } = JSON.parse(route.request().postData() ?? '{}') as { jobId?: string }
    // Held until released, or until the page is gone (a hold that never ends must not keep the test's process alive).
    while (running() && !page.isClosed() && jobId !== undefined && jobId === seen.jobId) await new Promise((r) => setTimeout(r, 100))
    await route.continue().catch(() => {})
  })
  return seen
}

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

  it('names the trace and draws its requested bytes and every map before it asks for its columns', async () => {
    await held
    // Every map is drawn when the columns are asked for, each a preview cut at the first map's peak
    // (state/loader.svelte.ts open(): the columns wait for the others' replays).
    assert.equal(await page.locator('.map').count(), 6)
    assert.equal(await page.locator('.map-pending').count(), 0)
    const toolbar = await page.locator('header.toolbar .file').textContent()
    assert.match(toolbar ?? '', /^bert_train__default\.pickle · [\d,]+ events · 1 stream$/)
    const d = await requestedLine()
    assert.ok(d !== null && d.split('L').length > 100, `the requested bytes are drawn as a line of many points: ${d?.slice(0, 80)}`)
    await page.screenshot({ path: join(OUTPUT, 'first-paint-before-columns.png') })
  })

  it('draws the first map before the columns are in, cut at its peak, the others as previews cut there', async () => {
    await firstResult
    const map = page.locator('.map').first()
    await map.locator('canvas').waitFor({ timeout: 60_000 })
    assert.match((await map.locator('h3').textContent()) ?? '', /pytorch \(recorded\)/)
    // The playhead left the last event for the map's peak of reserved memory, and its header reads the figures there.
    const { event, events } = await page.evaluate(() => {
      const app = (globalThis as unknown as { vramscopeApp: { event: number; events: number } }).vramscopeApp
      return { event: app.event, events: app.events }
    })
    assert.ok(event < events - 1, `the playhead at the peak (event ${event} of ${events})`)
    assert.match((await map.locator('.figures').textContent()) ?? '', /reserved [\d.]+ [KMG]iB .* in use [\d.]+ [KMG]?i?B/)
    // The canvas has drawn blocks: more than one colour in its pixels.
    type Canvas = {
      width: number
      height: number
      getContext(kind: '2d'): { getImageData(x: number, y: number, w: number, h: number): { data: Uint8ClampedArray } }
    }
    const colours = await map.locator('canvas').evaluate((element) => {
      const c = element as unknown as Canvas
      const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data
      const seen = new Set<number>()
      for (let i = 0; i < d.length; i += 4 * 7) seen.add((d[i]! << 16) | (d[i + 1]! << 8) | d[i + 2]!)
      return seen.size
    })
    assert.ok(colours > 2, `the first map draws blocks (${colours} colours)`)
    await page
      .getByRole('status')
      .filter({ hasText: /Reading the trace's [\d,]+ events/ })
      .waitFor()
    // Every map, the recorded one too, is drawn as a preview at the first map's peak (the host
    // found that peak as the page does: src-shared/layout-accounting.ts); their histories follow the columns.
    assert.equal(await page.locator('.map .preview-note').count(), 6)
    for (const note of await page.locator('.map .preview-note').all())
      assert.match((await note.textContent()) ?? '', new RegExp(`^at event ${event.toLocaleString('en-US')}: its history is on its way$`))
    // Nothing else that needs the columns is there yet.
    assert.equal(await page.getByRole('region', { name: 'allocation timeline' }).count(), 0)
    await page.screenshot({ path: join(OUTPUT, 'first-map-before-columns.png') })
  })

  it('draws the maps once the columns arrive, naming the same trace', async () => {
    const named = await page.locator('header.toolbar .file').textContent()
    await (await held).continue()
    await page.locator('.map canvas').first().waitFor({ timeout: 90_000 })
    await page.getByRole('region', { name: 'allocation timeline' }).waitFor()
    // The previews, the recorded map's among them, give way to the whole maps.
    await waitForCount(page.locator('.map .preview-note'), (n) => n === 0, 90_000)
    assert.equal(await page.locator('.map').count(), 6)
    assert.equal(await page.locator('header.toolbar .file').textContent(), named)
    const d = await requestedLine()
    assert.ok(d !== null && d.split('L').length > 100, 'the requested bytes, now from the columns')
    assert.deepEqual(pageErrors, [])
  })
})

describe('the opening line while the other maps replay', { skip }, () => {
  let served: Served
  let browser: Browser
  let page: Page
  const heldPreviews: Route[] = []
  let release = false

  before(async () => {
    served = await serveSuiteSnapshot('bert_train__default.pickle')
    browser = await launchBrowser()
    page = await browser.newPage({ viewport: { width: 1500, height: 1000 } })
    // The other maps' previews (a strategy's, not the first map's) are held: the columns wait for them.
    await page.route('**/api/replay%3Aresult', (route) => {
      const arg = JSON.parse(route.request().postData() ?? '{}') as { strategy?: number; preview?: boolean }
      if (release || arg.preview !== true || arg.strategy === undefined) return void route.continue()
      heldPreviews.push(route)
    })
    await page.goto(served.url)
  })
  after(async () => {
    await browser?.close()
    await served?.stop()
  })

  it('says the columns come once every map is drawn, and they come then', async () => {
    await waitForCount({ count: async () => heldPreviews.length }, (n) => n >= 5, 60_000)
    const note = page.locator('.opening-note')
    await note.waitFor()
    assert.match(
      ((await note.textContent()) ?? '').replace(/\s+/g, ' ').trim(),
      /^The trace's [\d,]+ events are read once every map is drawn: playback, the allocation timeline and the event list come with them\.$/,
    )
    assert.equal(await page.locator('.map').count(), 1, 'the first map is drawn; the others wait')
    release = true
    for (const route of heldPreviews.splice(0)) await route.continue()
    await waitForCount(page.locator('.map'), (n) => n === 6, 60_000)
    await page.getByRole('region', { name: 'allocation timeline' }).waitFor({ timeout: 60_000 })
  })
})

describe('an open whose other maps replay longer than the page waits for them', { skip }, () => {
  let served: Served
  let browser: Browser
  let page: Page
  /** The others' replay job, which answers as running while `stillRunning`. */
  let others: { jobId?: string; startedAt?: number }
  let stillRunning = true
  let columnsAskedAt: number | undefined

  before(async () => {
    served = await serveSuiteSnapshot('bert_train__default.pickle')
    browser = await launchBrowser()
    page = await browser.newPage({ viewport: { width: 1500, height: 1000 } })
    others = await holdOthersReplay(page, () => stillRunning)
    await page.route('**/api/trace%3Adata', (route) => {
      columnsAskedAt ??= Date.now()
      void route.continue()
    })
    await page.goto(served.url)
  })
  after(async () => {
    await browser?.close()
    await served?.stop()
  })

  it('asks for the columns after a few seconds, the other maps still to come, and draws those when they end', async () => {
    await page.getByRole('region', { name: 'allocation timeline' }).waitFor({ timeout: 60_000 })
    assert.ok(others.startedAt !== undefined && columnsAskedAt !== undefined)
    const waited = columnsAskedAt - others.startedAt
    assert.ok(waited >= 3500 && waited < 20_000, `the columns were asked for ${waited} ms after the others' replay started`)
    assert.equal(await page.locator('.map').count(), 1, 'only the first map is drawn; the others still replay')
    assert.equal(await page.locator('.map-pending').count(), 5)
    stillRunning = false
    await waitForCount(page.locator('.map'), (n) => n === 6, 60_000)
    await waitForCount(page.locator('.map .preview-note'), (n) => n === 0, 60_000)
  })
})

describe('a file opened while the one before still waits for its other maps', { skip }, () => {
  let served: Served
  let browser: Browser
  let page: Page
  let others: { jobId?: string }
  let firstColumns = false

  before(async () => {
    served = await serveSuiteSnapshot('bert_train__default.pickle')
    browser = await launchBrowser()
    page = await browser.newPage({ viewport: { width: 1500, height: 1000 } })
    // The BERT snapshot's other maps answer as still replaying (the first open waits on them).
    others = await holdOthersReplay(page, () => true)
    await page.goto(served.url)
  })
  after(async () => {
    await browser?.close()
    await served?.stop()
  })

  it('ends the earlier open: its columns are never asked for, and the later file stays open', async () => {
    await waitForCount({ count: async () => (others.jobId === undefined ? 0 : 1) }, (n) => n === 1, 60_000)
    const bert = await page.evaluate(() => (globalThis as unknown as { vramscopeApp: { opening: { traceId: string } | null } }).vramscopeApp.opening?.traceId)
    assert.ok(bert !== undefined, 'the BERT snapshot is opening')
    await page.route('**/api/trace%3Adata', (route) => {
      const { traceId } = JSON.parse(route.request().postData() ?? '{}') as { traceId?: string }
      if (traceId === bert) firstColumns = true
      void route.continue()
    })
    await page.evaluate(() =>
      (globalThis as unknown as { vramscopeApp: { openSample(name: string): Promise<void> } }).vramscopeApp.openSample('transformer_varseq.pickle'),
    )
    const file = page.locator('header.toolbar .file')
    await file.filter({ hasText: /^transformer_varseq\.pickle · / }).waitFor({ timeout: 60_000 })
    await page.getByRole('region', { name: 'allocation timeline' }).waitFor({ timeout: 60_000 })
    // Past the earlier open's wait for its other maps (4 s): it asked for nothing more.
    await new Promise((r) => setTimeout(r, 5000))
    assert.match((await file.textContent()) ?? '', /^transformer_varseq\.pickle · /)
    assert.equal(firstColumns, false, "the earlier file's columns were not asked for")
  })
})
