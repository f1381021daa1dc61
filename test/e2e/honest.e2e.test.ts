// An honest comparison in the browser against the real `vramscope serve`, on a real PyTorch
// snapshot (a GPT-2 run recorded with PyTorch's default settings): the app opens at the peak of
// reserved memory; with the default strategies no pool strategy fails; under a cap the strategies
// that fail are not ranked, the table says why, and the timeline names each one's failures in its
// own lane and colour; its scales are binary-round and labelled. Screenshots go to
// test/e2e/output (look at them).
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'

import type { Page } from 'playwright-core'

import { browserSkipReason, eventPosition, launchBrowser, OUTPUT, ROOT, serve, serveSuiteSnapshot, waitForCount, type Served } from './helpers.ts'

const skip = browserSkipReason()
if (skip) console.log(`# e2e skipped: ${skip}`)

describe('honest comparison in the browser', { skip }, () => {
  let served: Served
  let browser: Awaited<ReturnType<typeof launchBrowser>>
  let page: Page

  before(async () => {
    served = await serveSuiteSnapshot('gpt2_varshape__default.pickle')
    browser = await launchBrowser()
    page = await browser.newPage({ viewport: { width: 1500, height: 1100 } })
    await page.goto(served.url)
  })
  after(async () => {
    await browser?.close()
    await served?.stop()
  })

  it('opens at the peak of reserved memory, with the default strategies all serving every request', async () => {
    await waitForCount(page.locator('.map'), (n) => n >= 6, 120_000)
    await page.locator('[data-testid="ranked-row"]').waitFor()
    const ranked = await page.locator('[data-testid="ranked-row"] td').allTextContents()
    assert.equal(ranked[0], 'reference')
    for (const r of ranked.slice(1)) assert.equal(r, 'yes', `every default strategy is ranked: ${ranked.join(' | ')}`)
    const at = await eventPosition(page)
    const last = Number(((await page.getByTestId('event-position').textContent()) ?? '').match(/\/ ([\d,]+)/)?.[1]?.replaceAll(',', '') ?? 'NaN')
    assert.ok(!(at >= last - 1), `the playhead is at the peak (event ${at}), not at the end (${last})`)
    await page.locator('table.metrics').screenshot({ path: join(OUTPUT, 'metrics-default-strategies.png') })
  })

  it('under a cap, strategies that fail are not ranked, say why, and have their own named lane on the timeline', async () => {
    await page
      .locator('input[name="strategies"]')
      .fill('caching:preset=pytorch,buddy:pool_size=512MiB,block_pool,slab,arena,async_pool,vmm_growable,cuda_malloc')
    await page.locator('input[name="cap"]').fill('900MiB')
    await page.getByRole('button', { name: 'Replay' }).click()
    await waitForCount(page.locator('.map'), (n) => n === 9, 120_000)
    const ranked = await page.locator('[data-testid="ranked-row"] td').allTextContents()
    assert.ok(
      ranked.some((r) => /^no: [\d,]+ failures?/.test(r)),
      ranked.join(' | '),
    )
    assert.ok(
      ranked.some((r) => /dropped [\d,]+ live blocks? at resets/.test(r)),
      ranked.join(' | '),
    )
    // No unranked column holds a star.
    const columns: boolean[][] = []
    for (const row of await page.locator('table.metrics tbody tr').all())
      columns.push(await row.locator('td').evaluateAll((cells) => cells.map((td) => (td as unknown as { className: string }).className.includes('best'))))
    ranked.forEach((r, i) => {
      if (r.startsWith('no:')) for (const row of columns) assert.ok(!row[i], `column ${i} (${r}) is not starred`)
    })
    const lanes = await page.getByTestId('failure-lane').locator('text').allTextContents()
    assert.ok(lanes.length >= 2, lanes.join(' | '))
    assert.ok(lanes.some((l) => /^buddy \(pool_size=512MiB\): [\d,]+ failed requests?/.test(l)))
    assert.ok(lanes.some((l) => /^arena: dropped [\d,]+ live blocks? at [\d,]+ resets?/.test(l)))
    const ticks = await page.locator('.timeline .tick text').allTextContents()
    for (const t of ticks.filter((t) => /B$/.test(t))) assert.match(t, /^(0 B|(\d+|\d+\.5|\d+\.25|\d+\.75) (KiB|MiB|GiB|TiB))$/, `binary-round tick ${t}`)
    assert.ok(ticks.includes('100 %'), 'the fragmentation strip has its scale')
    assert.ok(await page.getByText('request event (time since the first)').isVisible())
    await page.locator('.timeline').screenshot({ path: join(OUTPUT, 'timeline-failures.png') })
    await page.locator('table.metrics').screenshot({ path: join(OUTPUT, 'metrics-capped.png') })
    await page.screenshot({ path: join(OUTPUT, 'honest-capped.png'), fullPage: true })
  })

  it("the inspector tells apart the times of a block's alloc and free, to the microsecond", async () => {
    await page
      .locator('.map canvas')
      .first()
      .click({ position: { x: 40, y: 20 } })
    const inspector = page.locator('dl').filter({ hasText: 'allocated' }).first()
    await inspector.waitFor({ timeout: 10_000 })
    const text = (await inspector.textContent()) ?? ''
    assert.match(text, /allocated\s*event [\d,]+ · [\d.]+ (s|ms|µs|ns)/)
    assert.match(text, /\d+\.\d{6} s|\d+\.\d{3} ms|µs|ns|still live/, text)
  })

  it('a diff ends when another file is opened', async () => {
    await page.getByRole('button', { name: 'with convnet_varimg.pickle' }).click()
    await page.getByTestId('diff-table').waitFor({ timeout: 60_000 })
    await page.getByTestId('file-input').setInputFiles(join(ROOT, 'resources', 'samples', 'transformer_varseq.pickle'))
    await waitForCount(page.getByTestId('diff-table'), (n) => n === 0, 60_000)
  })
})

describe('trace warnings in the app', { skip }, () => {
  it('shows what the importer warned about, as vramscope info does', async () => {
    const served = await serve([join(ROOT, 'test', 'fixtures', 'pytorch', 'mlp_varbatch_overflowed.pickle')])
    const browser = await launchBrowser()
    try {
      const page = await browser.newPage({ viewport: { width: 1400, height: 900 } })
      await page.goto(served.url)
      const warnings = page.getByTestId('trace-warnings')
      await warnings.waitFor({ timeout: 60_000 })
      assert.match(
        (await warnings.textContent()) ?? '',
        /memory was already in use when recording started: [\d,]+ blocks and [\d,]+ segments existed before the first recorded event/,
      )
      await page.screenshot({ path: join(OUTPUT, 'trace-warnings.png') })
    } finally {
      await browser.close()
      await served.stop()
    }
  })
})
