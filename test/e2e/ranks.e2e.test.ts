// A job of many ranks in the served app, in Chromium against the real `vramscope serve`: the two
// ranks of a real torchrun job recorded on an H200 (test/fixtures/pytorch/field-gpu.tar.gz, default
// stacks) and a real run that ran out of memory, picked together as ranks 0, 1 and 2. The strip
// shows every rank with the worst marked and the failure named; the what-if lab ranks settings over
// every rank; a rank's maps open, another rank's beside them at the same moment; the OOM panel of the
// failed rank names it.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'

import type { Browser, Page } from 'playwright-core'

import { formatBytes } from '../../src-renderer/viz/format.ts'
import { browserSkipReason, launchBrowser, ROOT, serve, waitForCount, type Served } from './helpers.ts'

const skip = browserSkipReason()
if (skip) console.log(`# e2e skipped: ${skip}`)

describe('a job of many ranks in the served app', { skip }, () => {
  let served: Served
  let browser: Browser
  let page: Page
  let dir: string
  const pageErrors: string[] = []
  const peaks: number[] = []

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'vramscope-e2e-ranks-'))
    const names = ['field/ddp_rank0__default', 'field/ddp_rank1__default', 'field/oom__default'].flatMap((n) => [`${n}.pickle`, `${n}.stats.json`])
    execFileSync('tar', ['xzf', join(ROOT, 'test', 'fixtures', 'pytorch', 'field-gpu.tar.gz'), '-C', dir, ...names])
    mkdirSync(join(dir, 'job'))
    ;['ddp_rank0__default', 'ddp_rank1__default', 'oom__default'].forEach((n, r) => {
      copyFileSync(join(dir, 'field', `${n}.pickle`), join(dir, 'job', `rank${r}.pickle`))
      const stats = JSON.parse(readFileSync(join(dir, 'field', `${n}.stats.json`), 'utf8')) as { memory_stats: Record<string, number> }
      peaks.push(stats.memory_stats['reserved_bytes.all.peak']!)
    })
    served = await serve()
    browser = await launchBrowser()
    page = await browser.newPage({ viewport: { width: 1500, height: 1000 } })
    page.on('pageerror', (e) => pageErrors.push(e.message))
    await page.goto(served.url)
  })
  after(async () => {
    await browser?.close()
    await served?.stop()
    if (dir) rmSync(dir, { recursive: true, force: true })
  })

  it('picked together, the files open as one job (replacing the file open before): a row per rank, each at its recorded peak, the worst marked, the failure named', async () => {
    await page.setInputFiles('[data-testid=file-input]', join(dir, 'job', 'rank0.pickle'))
    await page.waitForSelector('.toolbar .file', { timeout: 120_000 })
    // Another file picked and, while it is still opening, the job: that open goes no further.
    await page.setInputFiles('[data-testid=file-input]', join(dir, 'job', 'rank1.pickle'))
    await page.setInputFiles(
      '[data-testid=file-input]',
      [0, 1, 2].map((r) => join(dir, 'job', `rank${r}.pickle`)),
    )
    await page.waitForSelector('[data-testid=job-strip]', { timeout: 120_000 })
    assert.equal(await page.locator('.toolbar .file').count(), 0, 'the file open before is closed')
    // Its open, had it gone on, would have landed by now.
    await page.waitForTimeout(4000)
    assert.equal(await page.locator('.toolbar .file').count(), 0, 'the file open before stays closed')
    assert.equal(await page.locator('section.map canvas').count(), 0, 'and none of its maps is drawn')
    assert.deepEqual(await page.locator('button[role=tab]').allTextContents(), ['Job: 3 ranks'])
    const rows = page.locator('[data-testid=job-strip] button.row')
    assert.equal(await rows.count(), 3)
    for (const r of [0, 1, 2])
      assert.match(
        (await rows.nth(r).locator('.peak').textContent()) ?? '',
        new RegExp(`^${formatBytes(peaks[r]!).replace('.', '\\.')}`),
        `rank ${r}'s recorded peak`,
      )
    const worst = peaks.indexOf(Math.max(...peaks))
    assert.equal(await page.locator('[data-testid=job-strip] button.row.worst').getAttribute('data-rank'), String(worst))
    assert.match((await page.locator('[data-testid=job-worst]').textContent()) ?? '', new RegExp(`rank ${worst}`))
    assert.match((await page.locator('[data-testid=job-oom]').textContent()) ?? '', /rank 2 ran out of memory/)
    assert.equal(await rows.nth(2).locator('line.oom-mark').count(), 1, "the failure marked on rank 2's row")
  })

  it('ranks the settings over every rank', async () => {
    await page.click('[data-testid=job-whatif-run]')
    await page.waitForSelector('[data-testid=job-whatif-table]', { timeout: 300_000 })
    const table = page.locator('[data-testid=job-whatif-table]')
    assert.deepEqual(await table.locator('thead th').allTextContents(), [
      '#',
      'configuration',
      'fits every rank',
      'smallest fitting (every rank)',
      'worst rank',
      'rank 0 peak',
      'rank 1 peak',
      'rank 2 peak',
    ])
    const recorded = table.locator('tbody tr', { hasText: 'recorded (defaults)' })
    assert.equal(await recorded.count(), 1)
    const cells = await recorded.locator('td').allTextContents()
    assert.deepEqual(cells.slice(5), peaks.map(formatBytes), "the recorded row's peaks are each rank's own")
    // Rank 2 failed when recorded: under its implied limit no setting fits every rank unless one fits it.
    assert.match((await page.locator('[data-testid=job-whatif-best]').textContent()) ?? '', /fits every rank|No configuration fits every rank/)
  })

  it("opens a rank's maps, and another rank's beside them at the same moment", async () => {
    await page.locator('[data-testid=job-strip] button.row[data-rank="1"]').click()
    await waitForCount(page.locator('section.map canvas'), (n) => n >= 2, 120_000)
    await page.waitForSelector('[data-testid=rank-bar]')
    await waitForCount(page.locator('[data-testid=beside-rank] option'), (n) => n === 3)
    await page.selectOption('[data-testid=beside-rank]', '0')
    await page.waitForSelector('[data-testid=beside-note]', { timeout: 120_000 })
    const mine = await page.locator('section.map:not([data-rank])').count()
    await waitForCount(page.locator('section.map[data-rank="0"]'), (n) => n === mine, 60_000)
    assert.match(
      (await page.locator('[data-testid=beside-note]').textContent()) ?? '',
      /Left, rank 1 at event [\d,]+; right, rank 0 at the same moment, its event\s+[\d,]+/,
    )
  })

  it('names the rank that ran out of memory', async () => {
    await page.locator('button[role=tab]', { hasText: 'Job:' }).click()
    await page.locator('[data-testid=job-strip] button.row[data-rank="2"]').click()
    await page.waitForSelector('[data-testid=oom-title]', { timeout: 120_000 })
    assert.equal((await page.locator('[data-testid=oom-title]').textContent())?.trim(), 'Rank 2 ran out of memory')
    assert.deepEqual(pageErrors, [])
  })
})

describe('`vramscope serve DIR`: the job the host was started with', { skip }, () => {
  it('opens at start as a job, the files read where they are and left there', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'vramscope-e2e-serve-job-'))
    const names = ['field/ddp_rank0__default', 'field/ddp_rank1__default'].flatMap((n) => [`${n}.pickle`, `${n}.stats.json`])
    execFileSync('tar', ['xzf', join(ROOT, 'test', 'fixtures', 'pytorch', 'field-gpu.tar.gz'), '-C', dir, ...names])
    const served = await serve([join(dir, 'field')])
    const browser = await launchBrowser()
    try {
      const page = await browser.newPage({ viewport: { width: 1500, height: 1000 } })
      await page.goto(served.url)
      await page.waitForSelector('[data-testid=job-strip]', { timeout: 120_000 })
      // Ranks from the stats beside each snapshot (rank 0 and 1), as the CLI takes them.
      assert.deepEqual(await page.locator('[data-testid=job-strip] button.row').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-rank'))), ['0', '1'])
      await browser.close()
      await served.stop()
      assert.ok(existsSync(join(dir, 'field', 'ddp_rank0__default.pickle')), "the user's files stay where they are")
    } finally {
      await browser.close().catch(() => {})
      await served.stop()
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
