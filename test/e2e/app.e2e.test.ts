// The app in Chromium against the real `vramscope serve`: the empty state, opening a bundled
// sample (a real H100 PyTorch snapshot), playing and scrubbing, comparing three strategies,
// inspecting a block and reading its stack frames, searching by frame text, the peak view, the
// keyboard shortcuts and their list, exporting PNG and SVG, opening a bad file without losing what
// was open, and opening a file whose first replay fails. Screenshots go to test/e2e/output (look at
// them).
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { inflateSync } from 'node:zlib'
import { after, before, describe, it } from 'node:test'

import type { Page } from 'playwright-core'

import { browserSkipReason, eventPosition, openApp, OUTPUT, waitForCount, type OpenedApp } from './helpers.ts'

const skip = browserSkipReason()
if (skip) console.log(`# e2e skipped: ${skip}`)

describe('vramscope in the browser', { skip }, () => {
  let app: OpenedApp
  let browser: OpenedApp['browser']
  let page: Page

  before(async () => {
    app = await openApp()
    ;({ browser, page } = app)
  })
  after(() => app?.close())

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
    // The opening's replays done first: the toolbar's fields are the page's until then.
    await waitForCount(page.locator('.progress'), (n) => n === 0, 60_000)
    await page.locator('input[name="strategies"]').fill('caching:preset=pytorch,slab,buddy')
    await page.getByRole('button', { name: 'Replay' }).click()
    await waitForCount(page.locator('.map'), (n) => n === 4)
    // The maps stand as their replays start; the table has a column once a strategy's result is in.
    await waitForCount(page.locator('table.metrics thead th'), (n) => n === 5)
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
        // Blocks allocated before the snapshot's recording began have no stack: look on.
        found = (await page.getByTestId('inspected-id').count()) > 0 && (await page.getByTestId('frames').count()) > 0
      }
    }
    assert.ok(found, 'a click on the map selected a block with frames')
    const frames = await page.getByTestId('frames').locator('li').allTextContents()
    assert.ok(frames.length > 0, 'the PyTorch snapshot recorded frames for this block')
    assert.ok(
      frames.some((f) => /\.py:\d+/.test(f)),
      `frames name Python files: ${frames.slice(0, 3).join(' | ')}`,
    )
    await page.screenshot({ path: join(OUTPUT, 'inspected-block.png'), fullPage: true })
  })

  it('searches blocks by frame text and steps through the matches with Enter and Shift+Enter', async () => {
    const frameText = 'multi_head_attention_forward'
    await page.locator('h1').click()
    // From the first event, Enter goes to the first match (later, to the first after the playhead).
    await page.keyboard.press('Home')
    await page.keyboard.press('/')
    await page.keyboard.type(frameText)
    assert.equal(await page.getByTestId('search-input').inputValue(), frameText, '/ focused the search box')
    const count = page.getByTestId('search-count')
    assert.match((await count.textContent()) ?? '', /^\s*[\d,]+ blocks · frames containing/)
    await page.keyboard.press('Enter')
    const first = /^\s*1 \/ ([\d,]+) blocks/.exec((await count.textContent()) ?? '')
    assert.ok(first, `the count shows the first match: ${await count.textContent()}`)
    const total = Number(first[1]!.replaceAll(',', ''))
    assert.ok(total >= 2, `${total} matches`)
    const firstEvent = await eventPosition(page)
    assert.match((await page.getByTestId('event-position').textContent()) ?? '', /alloc #/, 'the playhead is on the alloc')
    const frames = await page.getByTestId('frames').locator('li').allTextContents()
    assert.ok(
      frames.some((f) => f.includes(frameText)),
      `the inspector shows a matching frame: ${frames.slice(0, 4).join(' | ')}`,
    )
    await page.keyboard.press('Enter')
    assert.match((await count.textContent()) ?? '', /^\s*2 \/ /)
    const secondEvent = await eventPosition(page)
    assert.ok(secondEvent > firstEvent, `the next match is allocated later (${secondEvent} > ${firstEvent})`)
    await page.screenshot({ path: join(OUTPUT, 'search.png'), fullPage: true })
    await page.keyboard.press('Shift+Enter')
    assert.match((await count.textContent()) ?? '', /^\s*1 \/ /)
    assert.equal(await eventPosition(page), firstEvent)
    await page.getByRole('button', { name: 'previous match' }).click()
    assert.match((await count.textContent()) ?? '', new RegExp(`^\\s*${total.toLocaleString('en-US')} / `), 'previous from the first wraps to the last')
  })

  it("lists what was held at each strategy's peak, grouped by frame or stream, and inspects a group", async () => {
    const peak = page.getByRole('region', { name: 'peak view' })
    await peak.scrollIntoViewIfNeeded()
    await peak.getByLabel('peak view strategy').selectOption({ label: 'caching (pytorch)' })
    const rows = peak.getByTestId('peak-groups').locator('tbody tr')
    assert.ok((await rows.count()) >= 2, 'several frames held memory at the peak')
    const sizes = await rows.locator('td:nth-child(4)').allTextContents()
    assert.ok(
      sizes.every((s) => /\d/.test(s)),
      `rounded bytes shown: ${sizes.slice(0, 3).join(', ')}`,
    )
    const peakEvent = Number(/event ([\d,]+)/.exec((await peak.locator('header').textContent()) ?? '')![1]!.replaceAll(',', ''))
    // The largest group with a stack (allocations made before the recording began have none).
    const labels = (await rows.locator('td.name').allTextContents()).map((l) => l.trim())
    const withStack = labels.findIndex((l) => !l.startsWith('no frames') && !l.startsWith('pending'))
    assert.ok(withStack >= 0, `a group with frames: ${labels.slice(0, 4).join(' | ')}`)
    const label = labels[withStack]!
    await rows.nth(withStack).locator('td.name button').click()
    assert.equal(await eventPosition(page), peakEvent, 'a click on a group jumps to the peak')
    const headline = (await page.getByTestId('headline').textContent()) ?? ''
    assert.ok(headline.includes(label), `the inspected block is allocated at the group's frame (${label}): ${headline}`)
    await page.screenshot({ path: join(OUTPUT, 'peak-view.png'), fullPage: true })
    await peak.getByLabel('stream').check()
    const streams = await peak.getByTestId('peak-groups').locator('tbody td.name').allTextContents()
    assert.ok(streams.length >= 1 && streams.every((s) => /^\s*(stream |pending frees)/.test(s)), `grouped by stream: ${streams.join(' | ')}`)
    await peak.getByLabel('frame', { exact: true }).check()
  })

  it('lists the keyboard shortcuts (?), switches views (w, c) and themes (t) by key, and Esc closes the list', async () => {
    // The search field keeps its keys: the shortcuts are pressed on the page.
    await page.locator('h1').click()
    await page.keyboard.press('?')
    const help = page.getByRole('dialog', { name: 'keyboard shortcuts' })
    await help.waitFor()
    const keys = (await help.locator('kbd').allTextContents()).map((k) => k.trim())
    assert.deepEqual(keys.slice(0, 3), ['space', '← / →', 'Home / End'], `the list starts with playback: ${keys.join(' | ')}`)
    assert.ok(keys.includes('?') && keys.includes('Esc'), `it names itself and Esc: ${keys.join(' | ')}`)
    await page.screenshot({ path: join(OUTPUT, 'shortcuts.png') })
    await page.keyboard.press('Escape')
    await help.waitFor({ state: 'detached' })
    await page.keyboard.press('w')
    await page.getByRole('tab', { name: /What-if/, selected: true }).waitFor()
    await page.keyboard.press('c')
    await page.getByRole('tab', { name: 'Compare', selected: true }).waitFor()
    const theme = () => page.locator('html').getAttribute('data-theme')
    const before = await theme()
    await page.keyboard.press('t')
    assert.notEqual(await theme(), before, 't switches the theme')
    await page.keyboard.press('t')
    assert.equal(await theme(), before)
  })

  it('exports the view as a PNG that decodes and an SVG of rects that parses', async () => {
    await page.locator('h1').click()
    const canvases = await page
      .locator('.map canvas')
      .evaluateAll((nodes) => nodes.map((n) => [(n as { width: number }).width, (n as { height: number }).height]))
    const [png] = await Promise.all([page.waitForEvent('download'), page.keyboard.press('e')])
    assert.match(png.suggestedFilename(), /^vramscope-transformer_varseq-event\d+\.png$/)
    const pngPath = join(OUTPUT, 'export.png')
    await png.saveAs(pngPath)
    const bytes = readFileSync(pngPath)
    assert.deepEqual([...bytes.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], 'PNG signature')
    assert.equal(bytes.toString('latin1', 12, 16), 'IHDR')
    const width = bytes.readUInt32BE(16)
    const height = bytes.readUInt32BE(20)
    const widest = Math.max(...canvases.map((c) => c[0]!))
    assert.ok(width > widest, `${width} px wide holds a ${widest} px map`)
    assert.ok(height > canvases.reduce((h, c) => h + c[1]!, 0) / 2, `${height} px high holds the maps`)
    // Decodes: the image data inflates to one filter byte and width RGBA pixels per row.
    assert.equal(bytes[24], 8, 'bit depth')
    assert.equal(bytes[25], 6, 'RGBA')
    const idat: Buffer[] = []
    for (let at = 8; at < bytes.length;) {
      const length = bytes.readUInt32BE(at)
      if (bytes.toString('latin1', at + 4, at + 8) === 'IDAT') idat.push(bytes.subarray(at + 8, at + 8 + length))
      at += 12 + length
    }
    assert.equal(inflateSync(Buffer.concat(idat)).length, height * (1 + width * 4))

    const [svg] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'SVG' }).click()])
    assert.match(svg.suggestedFilename(), /\.svg$/)
    const svgPath = join(OUTPUT, 'export.svg')
    await svg.saveAs(svgPath)
    // Chromium parses it as an XML document; a malformed file would show a parsererror.
    const viewer = await browser.newPage({ viewport: { width: 1500, height: 1000 } })
    await viewer.goto(pathToFileURL(svgPath).href)
    assert.equal(await viewer.locator('parsererror').count(), 0)
    const rects = await viewer.locator('rect').count()
    assert.ok(rects > canvases.length * 2, `${rects} rects`)
    const titles = await viewer.locator('text').allTextContents()
    assert.ok(titles.includes('caching (pytorch)') && titles.includes('pytorch (recorded)'), 'the map titles are text')
    // A page in the background is not painted: bring it forward to take its picture.
    await viewer.bringToFront()
    await viewer.screenshot({ path: join(OUTPUT, 'export-svg-rendered.png') })
    await viewer.close()
    await page.bringToFront()
  })

  it('reports a file that is not a trace and keeps what was open', async () => {
    await page.getByTestId('file-input').setInputFiles({ name: 'notes.txt', mimeType: 'text/plain', buffer: Buffer.from('these are not allocations\n') })
    const alert = page.getByRole('alert')
    await alert.waitFor({ timeout: 30_000 })
    const text = (await alert.textContent()) ?? ''
    assert.match(text, /notes\.txt/)
    assert.doesNotMatch(text, /vramscope-upload-/, 'the message names the file, not where the host kept it')
    assert.equal(await page.locator('.map').count(), 4, 'the open trace is still shown')
    await page.screenshot({ path: join(OUTPUT, 'bad-file.png') })
  })

  it('offers to record a PyTorch program and a GPU workload, and says why it cannot where the host runs no programs or has no GPU', async () => {
    await page.getByRole('button', { name: 'Record…' }).click()
    const panel = page.getByRole('dialog', { name: 'record on this host' })
    await panel.waitFor()
    // `vramscope serve` without --allow-record-commands runs no program for its pages, and says how to allow it.
    assert.match((await panel.getByTestId('record-program-unavailable').textContent()) ?? '', /--allow-record-commands/)
    assert.ok(await panel.getByRole('button', { name: 'Record program' }).isDisabled())
    const options = await panel.locator('select[name="workload"] option').allTextContents()
    assert.ok(options.includes('training'), `workloads listed: ${options.join(', ')}`)
    const unavailable = panel.getByTestId('record-unavailable')
    if ((await unavailable.count()) > 0) {
      assert.match((await unavailable.textContent()) ?? '', /recording needs an NVIDIA GPU and driver; import and replay work without one/)
      assert.ok(await panel.getByRole('button', { name: 'Record', exact: true }).isDisabled())
    }
    await page.screenshot({ path: join(OUTPUT, 'record-panel.png') })
    await page.keyboard.press('Escape')
    assert.equal(await panel.count(), 0)
  })

  it('opens a file whose first replay fails (a cap that is not a size), shows the trace and says why', async () => {
    await page.locator('input[name="cap"]').fill('three gigs')
    await page.getByTestId('file-input').setInputFiles(fileURLToPath(new URL('../../resources/samples/convnet_varimg.pickle', import.meta.url)))
    const alert = page.getByRole('alert')
    await alert.filter({ hasText: /cap/ }).waitFor({ timeout: 60_000 })
    assert.match((await alert.textContent()) ?? '', /three gigs/)
    // The trace opened all the same: its columns came, and with them the allocation timeline.
    await page.getByRole('region', { name: 'allocation timeline' }).waitFor({ timeout: 60_000 })
    assert.match((await page.locator('header.toolbar .file').textContent()) ?? '', /^convnet_varimg\.pickle · /)
    assert.equal(await page.locator('.map-pending').count(), 0, 'no pane waits for a map that will not come')
    await page.screenshot({ path: join(OUTPUT, 'first-replay-failed.png') })
    // With a cap that reads, the maps come.
    await page.locator('input[name="cap"]').fill('')
    await page.getByRole('button', { name: 'Replay' }).click()
    await page.locator('.map canvas').first().waitFor({ timeout: 60_000 })
  })

  it('raised no uncaught errors in the page', () => {
    assert.deepEqual(app.pageErrors, [])
  })
})
