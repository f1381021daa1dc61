// The app in Chromium against the real `vramscope serve`: the empty state, opening a bundled
// sample (a real H100 PyTorch snapshot), playing and scrubbing, comparing three strategies,
// inspecting a block and reading its stack frames, and opening a bad file without losing what
// was open. Screenshots go to test/e2e/output (look at them).
import assert from 'node:assert/strict'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'

import type { Browser, Page } from 'playwright-core'

import { browserSkipReason, launchBrowser, ROOT, serve, waitForCount, type Served } from './helpers.ts'

const OUTPUT = join(ROOT, 'test', 'e2e', 'output')
const skip = browserSkipReason()
if (skip) console.log(`# e2e skipped: ${skip}`)

async function eventPosition(page: Page): Promise<number> {
  const text = await page.getByTestId('event-position').textContent()
  return Number(/event ([\d,]+)/.exec(text ?? '')![1]!.replaceAll(',', ''))
}

describe('vramscope in the browser', { skip }, () => {
  let served: Served
  let browser: Browser
  let page: Page
  const pageErrors: string[] = []

  before(async () => {
    mkdirSync(OUTPUT, { recursive: true })
    served = await serve()
    browser = await launchBrowser()
    page = await browser.newPage({ viewport: { width: 1500, height: 1000 } })
    page.on('pageerror', (e) => pageErrors.push(e.message))
    await page.goto(served.url)
  })
  after(async () => {
    await browser?.close()
    await served?.stop()
  })

  it('shows the samples and says that nothing leaves the machine', async () => {
    await page.getByText('Samples').waitFor()
    assert.ok(await page.locator('[data-sample="transformer_varseq.pickle"]').isVisible())
    assert.ok(await page.getByText('Nothing leaves this machine').first().isVisible())
    assert.ok(!page.url().includes('token='), 'the token is taken out of the address bar')
  })

  it('opens a sample and draws a map per strategy with the recorded layout first', async () => {
    await page.locator('[data-sample="transformer_varseq.pickle"]').click()
    await page.locator('.map canvas').first().waitFor({ timeout: 60_000 })
    await waitForCount(page.locator('.map'), (n) => n >= 6)
    const names = await page.locator('.map h3').allTextContents()
    assert.match(names[0]!, /pytorch \(recorded\)/)
    assert.ok(names.some((n) => n.startsWith('caching (pytorch)')))
    await page.screenshot({ path: join(OUTPUT, 'opened-sample.png'), fullPage: true })
  })

  it('compares three strategies chosen in the UI, with a winner marked per metric', async () => {
    await page.locator('input[name="strategies"]').fill('caching:preset=pytorch,slab,buddy')
    await page.getByRole('button', { name: 'Replay' }).click()
    await waitForCount(page.locator('.map'), (n) => n === 4)
    const header = await page.locator('table.metrics thead th').allTextContents()
    assert.deepEqual(header.slice(1), ['pytorch (recorded)', 'caching (pytorch)', 'slab', 'buddy'])
    assert.ok((await page.locator('table.metrics td.best').count()) > 0, 'some metric has a winner')
  })

  it('plays, steps and scrubs', async () => {
    await page.keyboard.press('Home')
    assert.equal(await eventPosition(page), 0)
    await page.keyboard.press('ArrowRight')
    assert.equal(await eventPosition(page), 1)
    await page.keyboard.press('Space')
    await page.waitForTimeout(600)
    await page.keyboard.press('Space')
    const played = await eventPosition(page)
    assert.ok(played > 1, `playback moved the playhead (to ${played})`)
    await page.locator('input[aria-label="event"]').fill('5000')
    assert.equal(await eventPosition(page), 5000)
    await page.keyboard.press('p')
    assert.ok((await eventPosition(page)) > 0)
  })

  it('inspects a block and reads the stack that allocated it', async () => {
    const canvas = page.locator('.map[data-strategy="caching (pytorch)"] canvas')
    const box = (await canvas.boundingBox())!
    let found = false
    for (let y = 2; y < box.height && !found; y += 6) {
      for (let x = 3; x < box.width && !found; x += 40) {
        await canvas.click({ position: { x, y } })
        found = (await page.getByTestId('inspected-id').count()) > 0
      }
    }
    assert.ok(found, 'a click on the map selected a block')
    const frames = await page.getByTestId('frames').locator('li').allTextContents()
    assert.ok(frames.length > 0, 'the PyTorch snapshot recorded frames for this block')
    assert.ok(frames.some((f) => /\.py:\d+/.test(f)), `frames name Python files: ${frames.slice(0, 3).join(' | ')}`)
    await page.screenshot({ path: join(OUTPUT, 'inspected-block.png'), fullPage: true })
  })

  it('reports a file that is not a trace and keeps what was open', async () => {
    await page.getByTestId('file-input').setInputFiles({ name: 'notes.txt', mimeType: 'text/plain', buffer: Buffer.from('these are not allocations\n') })
    const alert = page.getByRole('alert')
    await alert.waitFor({ timeout: 30_000 })
    const text = (await alert.textContent()) ?? ''
    assert.match(text, /notes\.txt/)
    assert.equal(await page.locator('.map').count(), 4, 'the open trace is still shown')
    await page.screenshot({ path: join(OUTPUT, 'bad-file.png') })
  })

  it('raised no uncaught errors in the page', () => {
    assert.deepEqual(pageErrors, [])
  })
})
