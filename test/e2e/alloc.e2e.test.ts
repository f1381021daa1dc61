// "What is using my GPU memory" in Chromium against the real `vramscope serve`, on a real PyTorch
// snapshot with PyTorch's default stacks (GPT-2 training): the allocation timeline draws a band
// per allocation, hovering one tells its size, lifetime and frame, clicking it moves the playhead
// and inspects its block; the event list moves the playhead; following the block marks its alloc
// and free (and its address's events) and steps through them. Screenshots go to test/e2e/output.
import assert from 'node:assert/strict'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'

import type { Browser, Page } from 'playwright-core'

import { browserSkipReason, eventPosition, launchBrowser, OUTPUT, ROOT, serve, serveSuiteSnapshot, type Served } from './helpers.ts'

const skip = browserSkipReason()
if (skip) console.log(`# e2e skipped: ${skip}`)

describe('allocation timeline, event list and follow', { skip }, () => {
  let served: Served
  let browser: Browser
  let page: Page
  const pageErrors: string[] = []
  /** Where the hover test found a band with a frame. */
  let hovered = { x: 0, y: 0 }

  before(async () => {
    mkdirSync(OUTPUT, { recursive: true })
    served = await serveSuiteSnapshot('gpt2_varshape__default.pickle')
    browser = await launchBrowser()
    page = await browser.newPage({ viewport: { width: 1500, height: 1100 } })
    page.on('pageerror', (e) => pageErrors.push(e.message))
    await page.goto(served.url)
  })
  after(async () => {
    await browser?.close()
    await served?.stop()
  })

  const timeline = () => page.getByRole('region', { name: 'allocation timeline' })

  it('draws a band per allocation and tells its size, lifetime and frame on hover', async () => {
    await page.locator('.map canvas').first().waitFor({ timeout: 90_000 })
    // The bands are laid out just after the trace's first paint.
    await timeline()
      .locator('header')
      .getByText(/[\d,]+ allocations/)
      .waitFor()
    const header = await timeline().locator('header').textContent()
    const count = Number(/([\d,]+) allocations/.exec(header ?? '')![1]!.replaceAll(',', ''))
    assert.ok(count > 1000, `${count} allocations`)
    const canvas = timeline().getByLabel('allocation bands')
    const box = (await canvas.boundingBox())!
    let text = ''
    // Near the bottom of the stack, across the trace: long-lived and short-lived bands.
    for (let y = box.height - 4; y > 4 && !/\.py:\d+/.test(text); y -= 12) {
      for (let x = 20; x < box.width && !/\.py:\d+/.test(text); x += 60) {
        await canvas.hover({ position: { x, y } })
        const tip = timeline().getByRole('tooltip')
        text = (await tip.count()) > 0 ? ((await tip.textContent()) ?? '') : ''
        if (/\.py:\d+/.test(text)) hovered = { x, y }
      }
    }
    assert.match(text, /\d+(\.\d+)? (B|KiB|MiB|GiB) \(\d+ B\)/, `the tooltip tells the size: ${text}`)
    assert.match(text, /alloc event \d+ \([\d.]+ (ns|µs|ms|s)\) → (free event \d+|still live)/, `and the lifetime: ${text}`)
    assert.match(text, /\.py:\d+/, `and the frame: ${text}`)
    await page.screenshot({ path: join(OUTPUT, 'alloc-timeline-hover.png'), fullPage: false })
  })

  it('a click moves the playhead there and inspects the block', async () => {
    const before = await eventPosition(page)
    const canvas = timeline().getByLabel('allocation bands')
    await canvas.click({ position: hovered })
    const after = await eventPosition(page)
    assert.notEqual(after, before, 'the playhead moved')
    await page.getByTestId('inspected-id').waitFor({ timeout: 5_000 })
    assert.ok((await page.getByTestId('frames').locator('li').count()) > 0, 'the inspected block has frames')
    assert.ok(await timeline().locator('rect.selected').count(), 'the inspected band is outlined')
  })

  it('the event list moves the playhead and follows it', async () => {
    const list = page.getByRole('region', { name: 'event list' })
    await list.scrollIntoViewIfNeeded()
    const current = list.locator('.row.current')
    assert.equal(Number(await current.getAttribute('data-event')), await eventPosition(page), 'the list shows the playhead row')
    const rows = list.locator('.list .row:not(.segment)')
    const target = rows.nth(3)
    const event = Number(await target.getAttribute('data-event'))
    await target.click()
    assert.equal(await eventPosition(page), event)
    assert.equal(Number(await list.locator('.row.current').getAttribute('data-event')), event)
    await page.screenshot({ path: join(OUTPUT, 'event-list.png'), fullPage: true })
  })

  it('follows the inspected block: its alloc and free, its address, next and previous', async () => {
    // Inspect a block from the timeline again (the list click above may have picked a marker).
    await timeline().scrollIntoViewIfNeeded()
    await timeline().getByLabel('allocation bands').click({ position: hovered })
    await page.getByRole('button', { name: 'follow', exact: true }).click()
    const list = page.getByRole('region', { name: 'event list' })
    const status = await list.getByTestId('follow-status').textContent()
    const m = /: (\d+) events, (\d+) blocks there/.exec(status ?? '')
    assert.ok(m, `follow status: ${status}`)
    assert.ok(Number(m[1]) >= 1)
    await page.keyboard.press('Home')
    await list.getByRole('button', { name: 'next followed event' }).click()
    const first = await eventPosition(page)
    assert.ok(await list.locator(`.row.followed[data-event="${first}"]`).count(), 'the followed event is marked in the list')
    await list.getByRole('button', { name: 'next followed event' }).click()
    const second = await eventPosition(page)
    if (Number(m[1]) > 1) assert.ok(second > first, `next goes on (${first} → ${second})`)
    await list.getByRole('button', { name: 'previous followed event' }).click()
    assert.equal(await eventPosition(page), first)
    assert.ok(await timeline().locator('rect.followed').count(), 'the followed band is outlined on the timeline')
    await list.getByLabel('only these').check()
    const shown = await list.locator('.list .row').evaluateAll((rows) => rows.map((r) => Number(r.getAttribute('data-event'))))
    assert.equal(shown.length, Number(m[1]), 'only the followed events are listed')
    await list.getByLabel('only these').uncheck()
    await page.screenshot({ path: join(OUTPUT, 'follow.png'), fullPage: true })
  })

  it('draws the bands over time as well as over events', async () => {
    // Its byte scale at binary-round values (512 MiB, 1 GiB), never decimal steps in binary units (954 MiB).
    const bytes = (await timeline().locator('svg .tick text').allTextContents()).filter((t) => /B$/.test(t))
    assert.ok(bytes.length >= 2, `byte ticks: ${bytes.join(', ')}`)
    for (const t of bytes) assert.match(t, /^(0 B|(\d+|\d+\.5|\d+\.25|\d+\.75) (KiB|MiB|GiB|TiB))$/, `binary-round tick ${t}`)
    await timeline().getByLabel('x axis').selectOption('time')
    const labels = await timeline().locator('svg .tick text').allTextContents()
    assert.ok(
      labels.some((l) => /\d (µs|ms|s)$/.test(l)),
      `time labels: ${labels.join(', ')}`,
    )
    await timeline().screenshot({ path: join(OUTPUT, 'alloc-timeline-time.png') })
    await timeline().getByLabel('x axis').selectOption('event')
  })

  it('outlines the segments on the maps', async () => {
    await page.keyboard.press('End')
    const map = page.locator('.map').first()
    await map.scrollIntoViewIfNeeded()
    await timeline().screenshot({ path: join(OUTPUT, 'alloc-timeline.png') })
    await map.screenshot({ path: join(OUTPUT, 'map-segments.png') })
    // Zoomed in, so that 2 MiB segments span rows of their own.
    const canvas = map.locator('canvas')
    for (let i = 0; i < 6; i++) await canvas.dispatchEvent('wheel', { deltaY: -200, clientX: 0, clientY: 0 })
    const box = (await canvas.boundingBox())!
    for (let i = 0; i < 6; i++) {
      await page.mouse.move(box.x + box.width / 3, box.y + box.height / 3)
      await page.mouse.wheel(0, -250)
    }
    await page.waitForTimeout(200)
    await map.screenshot({ path: join(OUTPUT, 'map-segments-zoomed.png') })
  })

  it('raised no page errors', () => {
    assert.deepEqual(pageErrors, [])
  })
})

describe('out-of-memory errors on the allocation timeline and in the event list', { skip }, () => {
  let served: Served
  let browser: Browser
  let page: Page

  before(async () => {
    served = await serve([join(ROOT, 'test', 'fixtures', 'pytorch', 'real', 'oom_fraction__default.pickle')])
    browser = await launchBrowser()
    page = await browser.newPage({ viewport: { width: 1500, height: 1100 } })
    await page.goto(served.url)
  })
  after(async () => {
    await browser?.close()
    await served?.stop()
  })

  it('ticks each out-of-memory error the program saw, and lists it', async () => {
    const timeline = page.getByRole('region', { name: 'allocation timeline' })
    await timeline
      .locator('header')
      .getByText(/[\d,]+ allocations/)
      .waitFor({ timeout: 90_000 })
    const ticks = timeline.locator('line.oom')
    assert.ok((await ticks.count()) > 0, 'an out-of-memory tick')
    const event = Number(/at event (\d+)/.exec((await ticks.first().locator('title').textContent()) ?? '')![1])
    await page.locator('input[aria-label="event"]').fill(String(event))
    const row = page.getByRole('region', { name: 'event list' }).locator('.row.current')
    assert.match((await row.textContent()) ?? '', /out of memory/)
    await timeline.screenshot({ path: join(OUTPUT, 'alloc-timeline-oom.png') })
  })
})
