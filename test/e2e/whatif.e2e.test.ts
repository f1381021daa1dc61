// The what-if panel in Chromium against the real `vramscope serve`, on a real PyTorch 2.11
// snapshot with default C++ and Python stacks (taken from the what-if suite's tarball): open the
// file, open the panel, run the grid and read the ranked table (the recorded row, the fidelity
// line), copy a row's line, see a configuration PyTorch would refuse named in the error, cancel a
// long run, open a row beside the recorded layout in the compare view, and read the limit a
// recorded out-of-memory implies (a small real snapshot of test/fixtures). Screenshots go to
// test/e2e/output (look at them).
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'

import type { Page } from 'playwright-core'

import { browserSkipReason, openApp, OUTPUT, ROOT, waitForCount, type OpenedApp } from './helpers.ts'

const skip = browserSkipReason()
if (skip) console.log(`# e2e skipped: ${skip}`)

const SUITE = join(ROOT, 'test', 'fixtures', 'pytorch', 'whatif-suite.tar.gz')
const SNAPSHOT = 'whatif/mlp_fragment__default.pickle'

describe('the what-if panel in the browser', { skip }, () => {
  let app: OpenedApp
  let page: Page
  let dir: string
  let gridRows = 0

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'vramscope-whatif-e2e-'))
    execFileSync('tar', ['xzf', SUITE, '-C', dir, SNAPSHOT])
    app = await openApp({ width: 1500, height: 1100 })
    page = app.page
    await page.context().grantPermissions(['clipboard-read', 'clipboard-write'], { origin: new URL(app.served.url).origin })
  })
  after(async () => {
    await app?.close()
    if (dir) rmSync(dir, { recursive: true, force: true })
  })

  it('opens a real snapshot and offers the what-if lab for it', async () => {
    await page.getByTestId('file-input').setInputFiles(join(dir, SNAPSHOT))
    await page.locator('.map canvas').first().waitFor({ timeout: 60_000 })
    const tab = page.getByRole('tab', { name: /What-if/ })
    assert.match((await tab.textContent()) ?? '', /PyTorch settings/, 'a snapshot names what the lab is for')
    assert.match((await tab.getAttribute('class')) ?? '', /suggested/)
    await tab.click()
    await page.getByRole('region', { name: 'what-if' }).waitFor()
  })

  it('runs the grid: 20 and more configurations ranked, the recorded row marked, the fidelity line', async () => {
    await page.getByRole('button', { name: 'Run' }).click()
    const rows = page.getByTestId('whatif-table').locator('tbody tr')
    gridRows = await waitForCount(rows, (n) => n >= 20, 120_000)
    const first = page.locator('tbody tr[data-rank="1"]')
    assert.equal(await first.count(), 1)
    assert.equal((await first.locator('td').nth(7).textContent())?.trim(), '0', 'rank 1 runs without failures')
    assert.match((await first.locator('td').nth(2).textContent()) ?? '', /^\d[\d.]* (MiB|GiB)$/, 'peak reserved in binary units')
    const recorded = page.locator('tbody tr[data-kind="recorded"]')
    assert.equal(await recorded.count(), 1, 'the recorded configuration is a row')
    assert.match((await recorded.textContent()) ?? '', /recorded/)
    const facts = (await page.getByTestId('whatif-facts').textContent()) ?? ''
    assert.match(facts, /recorded with/)
    assert.match((await page.getByTestId('whatif-fidelity').textContent()) ?? '', /peak reserved .* vs .* recorded .*segments \d+ vs \d+/s)
    const unranked = page.locator('tbody tr.unranked')
    assert.ok((await unranked.count()) > 0, 'strategies PyTorch cannot be told to use stand beside the ranking')
    assert.match((await unranked.first().textContent()) ?? '', /not ranked: /)
    await page.screenshot({ path: join(OUTPUT, 'whatif-panel.png'), fullPage: true })
  })

  it("copies a row's PYTORCH_ALLOC_CONF line", async () => {
    const first = page.locator('tbody tr[data-rank="1"]')
    const copy = first.getByRole('button', { name: 'Copy' })
    assert.match((await copy.getAttribute('title')) ?? '', /^copy (PYTORCH_ALLOC_CONF=|unset PYTORCH_ALLOC_CONF)/)
    await copy.click()
    await first.getByRole('button', { name: 'Copied' }).waitFor()
  })

  it('names a configuration PyTorch would refuse', async () => {
    const confs = page.locator('textarea[name="whatif-confs"]')
    await confs.fill('expandable_segments:True\nmax_split_size_mb:5')
    await page.getByRole('button', { name: 'Run' }).click()
    const error = page.getByTestId('whatif-error')
    await error.waitFor()
    const text = (await error.textContent()) ?? ''
    assert.match(text, /configuration 2 'max_split_size_mb:5'/, text)
    assert.match(text, /max_split_size_mb/)
    assert.equal(await page.getByTestId('whatif-table').locator('tbody tr').count(), gridRows, 'the last report stays')
    await confs.fill('')
  })

  it('cancels a long run and keeps the last report', async (t) => {
    // Many configurations: a run of some seconds, cancelled while it replays.
    const many = Array.from({ length: 256 }, (_, i) => `max_split_size_mb:${20 + i},roundup_power2_divisions:${[1, 2, 4, 8][i % 4]}`)
    const confs = page.locator('textarea[name="whatif-confs"]')
    await confs.fill(many.join('\n'))
    try {
      await page.getByRole('button', { name: 'Run' }).click()
      const progress = page.getByRole('progressbar', { name: 'what-if progress' })
      await progress.waitFor()
      // At once, without waiting for the button to settle: the run is short on a fast machine.
      await page.getByRole('button', { name: 'Cancel' }).dispatchEvent('click')
      await progress.waitFor({ state: 'detached', timeout: 30_000 })
      const rows = await page.getByTestId('whatif-table').locator('tbody tr').count()
      if (rows === many.length) return t.skip('the run ended before the cancel reached it')
      assert.equal(await page.getByTestId('whatif-error').count(), 0, 'a cancelled run is no error')
      assert.equal(rows, gridRows, 'the last report stays')
    } finally {
      await confs.fill('')
    }
  })

  it('opens a row beside the recorded layout in the compare view', async () => {
    const row = page.locator('tbody tr[data-rank="1"]')
    const conf = ((await row.locator('code.line').textContent()) ?? '').trim()
    await row.getByRole('button', { name: 'Compare' }).click()
    await waitForCount(page.locator('.map canvas'), (n) => n === 2)
    const names = await page.locator('.map h3').allTextContents()
    assert.match(names[0]!, /pytorch \(recorded\)/)
    assert.match(names[1]!, new RegExp(`what-if: ${conf.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`))
    const header = await page.locator('table.metrics thead th').allTextContents()
    assert.deepEqual(header.slice(1), ['pytorch (recorded)', `what-if: ${conf}`])
    assert.equal(await page.getByRole('tab', { name: 'Compare' }).getAttribute('aria-selected'), 'true')
    await page.screenshot({ path: join(OUTPUT, 'whatif-compare.png'), fullPage: true })
  })

  it('shows the limit a recorded out-of-memory implies, and the rows that fail there again', async () => {
    await page.getByTestId('file-input').setInputFiles(join(ROOT, 'test', 'fixtures', 'pytorch', 'real', 'oom_fraction__default.pickle'))
    await page.locator('.file', { hasText: 'oom_fraction__default.pickle' }).waitFor({ timeout: 60_000 })
    await page.locator('.map canvas').first().waitFor({ timeout: 60_000 })
    await page.getByRole('tab', { name: /What-if/ }).click()
    assert.equal(await page.getByTestId('whatif-table').count(), 0, 'a newly opened trace has no report yet')
    await page.getByRole('button', { name: 'Run' }).click()
    await waitForCount(page.getByTestId('whatif-table').locator('tbody tr'), (n) => n >= 20, 120_000)
    const facts = (await page.getByTestId('whatif-facts').textContent()) ?? ''
    assert.match(facts, /recorded out-of-memory\s*event \d+: [\d.]+ MiB on stream 0; implied limit at least [\d.]+ GiB and below [\d.]+ GiB/)
    assert.match((await page.getByTestId('whatif-limit').textContent()) ?? '', /GiB \(implied by the recorded out-of-memory\)/)
    const recorded = page.locator('tbody tr[data-kind="recorded"]')
    assert.match((await recorded.locator('td').nth(7).textContent()) ?? '', /1 \(recorded OOM\)/)
    // The CLI's words (src-shared/whatif-report.ts): every row fails under the implied limit, so no best, only more memory.
    assert.match(
      (await page.getByTestId('whatif-best').textContent()) ?? '',
      /^best: none: every configuration fails under the [\d.]+ GiB limit, so no setting helps, only more memory/,
    )
    assert.match(
      (await page.getByTestId('whatif-device').textContent()) ?? '',
      /^at least [\d.]+ GiB, the free memory plus reserved at the recorded out-of-memory/,
    )
    await page.screenshot({ path: join(OUTPUT, 'whatif-oom.png'), fullPage: true })
  })

  it('raised no errors in the page', () => {
    assert.deepEqual(app.pageErrors, [])
  })
})
