// The out-of-memory view in Chromium against the real `vramscope serve`, on a real PyTorch 2.11
// snapshot of a program that ran out of memory under a 2 GiB per-process memory fraction
// (test/fixtures/pytorch/real/oom_fraction__default.pickle): the panel says what failed from the
// open's summary, before the trace's columns arrive; the app opens at the failure, the panel names
// the request, says it was a true shortage and the limit the recording implies, "next
// failure" comes back to it, and one click runs the what-if lab for the smallest fitting memory.
// Screenshots go to test/e2e/output (look at them).
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'

import type { Page } from 'playwright-core'

import { browserSkipReason, eventPosition, openApp, OUTPUT, ROOT, type OpenedApp } from './helpers.ts'

const skip = browserSkipReason()
if (skip) console.log(`# e2e skipped: ${skip}`)

const SNAPSHOT = join(ROOT, 'test', 'fixtures', 'pytorch', 'real', 'oom_fraction__default.pickle')
/** The out-of-memory's request event in that snapshot (32 events). */
const OOM_EVENT = 26

describe('the out-of-memory view in the browser', { skip }, () => {
  let app: OpenedApp
  let page: Page

  before(async () => {
    app = await openApp({ width: 1500, height: 1100 })
    page = app.page
  })
  after(async () => {
    await app?.close()
  })

  it('says what failed as soon as the file is read, before its columns arrive', async () => {
    // The trace's columns are held back: what the panel says comes from the open's summary.
    let release = () => {}
    let continued: Promise<void> = Promise.resolve()
    const held = new Promise<void>((resolve) => {
      void page.route('**/api/trace%3Adata', (route) => {
        continued = new Promise<void>((r) => (release = r)).then(() => route.continue())
        resolve()
      })
    })
    await page.getByTestId('file-input').setInputFiles(SNAPSHOT)
    await held
    await page.getByTestId('oom-panel').waitFor({ timeout: 60_000 })
    assert.match((await page.getByTestId('oom-headline').textContent()) ?? '', /event 26: 484 MiB on stream 0/)
    assert.match((await page.getByTestId('oom-verdict').textContent()) ?? '', /a true shortage/)
    const panel = (await page.getByTestId('oom-panel').textContent()) ?? ''
    assert.match(panel, /Live at the failure( in pytorch \(recorded\))?: 1\.69 GiB/)
    assert.match(panel, /Grouped by frame once the trace's events are in/)
    // The what-if lab needs the trace: offered once it is in.
    assert.equal(await page.getByTestId('oom-whatif').count(), 0)
    await page.screenshot({ path: join(OUTPUT, 'oom-before-columns.png') })
    release()
    await continued
    await page.unroute('**/api/trace%3Adata')
  })

  it('opens a snapshot with an out-of-memory at the failure, and says what failed', async () => {
    await page.locator('.map canvas').first().waitFor({ timeout: 60_000 })
    await page.getByTestId('oom-whatif').waitFor({ timeout: 60_000 })
    assert.equal(await eventPosition(page), OOM_EVENT, 'the playhead is at the failure, not at the end')
    const panel = page.getByTestId('oom-panel')
    await panel.waitFor()
    assert.match(
      (await page.getByTestId('oom-headline').textContent()) ?? '',
      /event 26: 484 MiB on stream 0, from prog_oom_fraction record_whatif_suite\.py:338/,
    )
    const verdict = (await page.getByTestId('oom-verdict').textContent()) ?? ''
    assert.match(verdict, /1\.70 GiB reserved, 8\.84 MiB of it free, largest free block 1\.66 MiB: a true shortage/)
    assert.match(verdict, /shortage/)
    assert.match((await page.getByTestId('oom-limit').textContent()) ?? '', /at least 1\.70 GiB and below 2\.18 GiB/)
    await page.getByTestId('oom-live').locator('tr').first().waitFor()
    assert.ok((await page.getByTestId('oom-live').locator('tr').count()) >= 1, 'what was live, by frame')
    await page.screenshot({ path: join(OUTPUT, 'oom-view.png'), fullPage: true })
  })

  it('"next failure" comes back to the out-of-memory', async () => {
    await page.keyboard.press('Home')
    assert.equal(await eventPosition(page), 0)
    // The strategies replayed beside the recording may fail elsewhere first: the failure is among the stops.
    const stops: number[] = []
    for (let i = 0; i < 12 && !stops.includes(OOM_EVENT); i++) {
      await page.getByRole('button', { name: 'next failure' }).click()
      stops.push(await eventPosition(page))
    }
    assert.ok(stops.includes(OOM_EVENT), `next failure stopped at ${stops.join(', ')}`)
  })

  it('one click runs the what-if lab: the smallest fitting memory and the configurations that fit', async () => {
    await page.getByRole('button', { name: 'What would have fitted?' }).click()
    const smallest = page.getByTestId('oom-smallest')
    await smallest.waitFor({ timeout: 120_000 })
    assert.match((await smallest.textContent()) ?? '', /Smallest fitting memory: [\d.]+ GiB, with /)
    // A true shortage: under the implied limit no setting fits (the program failed under expandable segments too).
    assert.match(
      (await page.getByTestId('oom-none-fits').textContent()) ?? '',
      /No configuration of the lab runs under [\d.]+ GiB \(the implied limit\) without a failure/,
    )
    await page.screenshot({ path: join(OUTPUT, 'oom-whatif.png'), fullPage: true })
    await page.getByRole('button', { name: 'open the What-if panel' }).click()
    await page.getByRole('region', { name: 'what-if' }).waitFor()
    assert.ok((await page.getByTestId('whatif-table').locator('tbody tr').count()) >= 20, "the panel shows the lab's report")
  })

  it('raised no errors in the page', () => {
    assert.deepEqual(app.pageErrors, [])
  })
})
