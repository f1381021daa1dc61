// The diff view in Chromium against the real `vramscope serve`: open one bundled H100 snapshot,
// diff it with the other, and read B − A per strategy in the table.
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'

import type { Page } from 'playwright-core'

import { browserSkipReason, openApp, OUTPUT, waitForCount, type OpenedApp } from './helpers.ts'

const skip = browserSkipReason()
if (skip) console.log(`# e2e skipped: ${skip}`)

describe('diff of two traces in the browser', { skip }, () => {
  let app: OpenedApp
  let page: Page

  before(async () => {
    app = await openApp({ width: 1400, height: 1400 })
    page = app.page
  })
  after(() => app?.close())

  it('diffs the transformer snapshot with the convnet one, strategy by strategy', async () => {
    await page.locator('[data-sample="transformer_varseq.pickle"]').click()
    await page.locator('input[name="strategies"]').waitFor({ timeout: 60_000 })
    await page.locator('input[name="strategies"]').fill('caching:preset=pytorch,buddy')
    await page.getByRole('button', { name: 'Replay' }).click()
    await waitForCount(page.locator('.map'), (n) => n === 3)
    await page.getByRole('button', { name: 'with convnet_varimg.pickle' }).click()
    const table = page.getByTestId('diff-table')
    await table.waitFor({ timeout: 60_000 })
    const groups = await table.locator('th[scope="rowgroup"]').allTextContents()
    assert.deepEqual(
      groups.map((g) => g.trim()),
      ['pytorch (recorded)', 'caching (pytorch)', 'buddy'],
    )
    const text = (await table.textContent()) ?? ''
    assert.match(text, /peak reserved/)
    assert.match(text, /[+-]\d/, 'differences are signed')
    await table.scrollIntoViewIfNeeded()
    await page.screenshot({ path: join(OUTPUT, 'diff.png'), fullPage: true })
  })
})
