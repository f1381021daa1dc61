// The README's screenshots, taken of real runs: the real `vramscope serve` driven by Playwright in
// Debian's Chromium (as the e2e tests do) on PyTorch 2.11 snapshots recorded with default C++ and
// Python stacks: GPT-2 with varying shapes for the main view, a program that ran out of memory
// under a 2 GiB memory fraction for the out-of-memory view, and an MLP with fragmenting sizes
// for the What-if panel (the what-if suite's tarball and test/fixtures/pytorch/real), and a job of
// three ranks for the Job view: the two ranks of a real torchrun job recorded on an H200 and a real
// run that ran out of memory (test/fixtures/pytorch/field-gpu.tar.gz), picked together.
//
//   node --import tsx scripts/dev/screenshots.ts [--out DIR]     (default docs/screenshots)
//
// Each PNG is a viewport, not a full page, so it stays small (under 300 KB); look at them.
import { execFileSync } from 'node:child_process'
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import type { Page } from 'playwright-core'

import { browserSkipReason, launchBrowser, ROOT, serve, waitForCount } from '../../test/e2e/helpers.ts'

const outIndex = process.argv.indexOf('--out')
const OUT = outIndex > 0 ? process.argv[outIndex + 1]! : join(ROOT, 'docs', 'screenshots')
const SUITE = join(ROOT, 'test', 'fixtures', 'pytorch', 'whatif-suite.tar.gz')
const GPT2 = 'whatif/gpt2_varshape__default.pickle'
const MLP = 'whatif/mlp_fragment__default.pickle'
const OOM = join(ROOT, 'test', 'fixtures', 'pytorch', 'real', 'oom_fraction__default.pickle')
const FIELD = join(ROOT, 'test', 'fixtures', 'pytorch', 'field-gpu.tar.gz')
const RANKS = ['field/ddp_rank0__default.pickle', 'field/ddp_rank1__default.pickle', 'field/oom__default.pickle']
const MAX_BYTES = 300 * 1024

const skip = browserSkipReason()
if (skip) {
  console.error(`screenshots: ${skip}`)
  process.exit(1)
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** Opens a file and waits until every map is drawn and no job runs, the glow of new blocks faded. */
async function open(page: Page, file: string): Promise<void> {
  await page.getByTestId('file-input').setInputFiles(file)
  await page.locator('.file', { hasText: file.split('/').at(-1)! }).waitFor({ timeout: 120_000 })
  await page.locator('.map canvas').first().waitFor({ timeout: 120_000 })
  await waitForCount(page.locator('.progress'), (n) => n === 0, 120_000)
  await waitForCount(page.locator('.map-pending'), (n) => n === 0, 120_000)
  await sleep(1500)
}

async function shoot(page: Page, name: string): Promise<void> {
  const path = join(OUT, name)
  await page.screenshot({ path })
  const bytes = statSync(path).size
  console.log(`${path}: ${(bytes / 1024).toFixed(0)} KB`)
  if (bytes > MAX_BYTES) throw new Error(`${name} is ${bytes} bytes, over ${MAX_BYTES}: take a smaller view`)
}

const dir = mkdtempSync(join(tmpdir(), 'vramscope-screenshots-'))
execFileSync('tar', ['xzf', SUITE, '-C', dir, GPT2, MLP])
execFileSync('tar', ['xzf', FIELD, '-C', dir, ...RANKS])
mkdirSync(join(dir, 'job'))
RANKS.forEach((f, r) => copyFileSync(join(dir, f), join(dir, 'job', `rank${r}.pickle`)))
mkdirSync(OUT, { recursive: true })
const served = await serve()
const browser = await launchBrowser()
try {
  const page = await browser.newPage({ viewport: { width: 1440, height: 1000 } })
  const errors: string[] = []
  page.on('pageerror', (e) => errors.push(e.message))
  await page.goto(served.url)

  // The main view: GPT-2's recorded layout beside three strategies, coloured by size class, at
  // PyTorch's peak, a block inspected.
  await open(page, join(dir, GPT2))
  const defaults = await page.locator('input[name="strategies"]').inputValue()
  await page.locator('input[name="strategies"]').fill('caching:preset=pytorch,slab,buddy')
  await page.getByRole('button', { name: 'Replay' }).click()
  await waitForCount(page.locator('.map canvas'), (n) => n === 4, 120_000)
  await waitForCount(page.locator('.progress'), (n) => n === 0, 120_000)
  await page.getByLabel('colour by').selectOption('size')
  await sleep(1500)
  await page.keyboard.press('p')
  await sleep(800)
  const map = page.locator('.map canvas').first()
  const box = (await map.boundingBox())!
  for (const [fx, fy] of [
    [0.3, 0.3],
    [0.5, 0.5],
    [0.2, 0.6],
    [0.7, 0.2],
  ]) {
    await page.mouse.click(box.x + box.width * fx!, box.y + box.height * fy!)
    await sleep(300)
    if ((await page.getByRole('complementary', { name: 'inspector' }).locator('text=stack').count()) > 0) break
  }
  await page.mouse.move(0, 0)
  await sleep(500)
  await shoot(page, 'compare-inspect.png')
  await page.getByLabel('colour by').selectOption('stream')
  await page.locator('input[name="strategies"]').fill(defaults)

  // The out-of-memory view, with what the what-if lab says would have fitted.
  await open(page, OOM)
  await page.getByRole('button', { name: 'What would have fitted?' }).click()
  await page.getByTestId('oom-smallest').waitFor({ timeout: 180_000 })
  await sleep(500)
  await shoot(page, 'oom.png')

  // The What-if panel on an MLP whose sizes fragment PyTorch's pools: the grid ranked.
  await open(page, join(dir, MLP))
  await page.getByRole('tab', { name: /What-if/ }).click()
  await page.getByRole('button', { name: 'Run', exact: true }).click()
  await waitForCount(page.getByTestId('whatif-table').locator('tbody tr'), (n) => n >= 20, 180_000)
  await sleep(500)
  await shoot(page, 'whatif.png')

  // A job of three ranks: the strip, the worst rank and the failure marked, the settings ranked over every rank.
  await page.getByTestId('file-input').setInputFiles([0, 1, 2].map((r) => join(dir, 'job', `rank${r}.pickle`)))
  await page.getByTestId('job-strip').waitFor({ timeout: 120_000 })
  await page.getByTestId('job-whatif-run').click()
  await page.getByTestId('job-whatif-table').waitFor({ timeout: 300_000 })
  await sleep(500)
  await shoot(page, 'job.png')

  if (errors.length > 0) throw new Error(`the page raised: ${errors.join('; ')}`)
} finally {
  await browser.close()
  await served.stop()
  rmSync(dir, { recursive: true, force: true })
}
