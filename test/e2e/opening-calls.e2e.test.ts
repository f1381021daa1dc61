// What a page asks the host when it opens a real snapshot (BERT training on an H100, default stacks)
// in the served app, in Chromium against the real `vramscope serve`: the host runs the opening
// (TraceSummary.opening), so the page makes its few control calls (app:info, the open, the open's
// job:status, which carries the summary, and trace:recent once the maps are drawn) and otherwise
// only fetches bundles, each answered once its job has ended. A replay job's progress is asked for
// only while it runs past a second (a loaded machine may take that long): those polls are counted
// apart. No replay is started by the page, and no job's result is asked for separately.
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'

import type { Browser, Page } from 'playwright-core'

import { floorOf } from '../../src-main/services/analysis/floor.ts'
import { openInput } from '../../src-main/services/import/open-input.ts'
import { formatBytes } from '../../src-renderer/viz/format.ts'
import { browserSkipReason, launchBrowser, serveSuiteSnapshot, waitForCount, type Served } from './helpers.ts'

const skip = browserSkipReason()
if (skip) console.log(`# e2e skipped: ${skip}`)

/** The channels whose answers are bundles: the fetches of what the page draws. */
const BUNDLES = new Set(['replay:result', 'trace:data'])

describe('opening a real snapshot in the served app', { skip }, () => {
  let served: Served
  let browser: Browser
  let page: Page
  const calls: { channel: string; arg: Record<string, unknown> }[] = []
  let openJobId: string | undefined

  before(async () => {
    served = await serveSuiteSnapshot('bert_train__default.pickle')
    browser = await launchBrowser()
    page = await browser.newPage({ viewport: { width: 1500, height: 1000 } })
    page.on('request', (request) => {
      const url = new URL(request.url())
      if (!url.pathname.startsWith('/api/')) return
      calls.push({ channel: decodeURIComponent(url.pathname.slice('/api/'.length)), arg: JSON.parse(request.postData() || '{}') as Record<string, unknown> })
    })
    page.on('response', (response) => {
      if (!response.url().endsWith(`/api/${encodeURIComponent('trace:openRecent')}`)) return
      void response.json().then((body: { result?: { jobId?: string } }) => (openJobId = body.result?.jobId))
    })
    await page.goto(served.url)
  })
  after(async () => {
    await browser?.close()
    await served?.stop()
  })

  it('asks for app:info, the open, its status and the recent files; the rest are bundles and slow jobs’ progress', async () => {
    await waitForCount(page.locator('.map'), (n) => n === 6, 60_000)
    await waitForCount(page.locator('.map .preview-note'), (n) => n === 0, 60_000)
    await page.getByRole('region', { name: 'allocation timeline' }).waitFor({ timeout: 60_000 })
    // The recent list is asked for once the maps are in.
    await waitForCount({ count: async () => calls.filter((c) => c.channel === 'trace:recent').length }, (n) => n === 1, 10_000)
    const control = calls.filter((c) => !BUNDLES.has(c.channel))
    assert.ok(openJobId, 'the page opened the file the host was started with')
    // Progress polls: every job:status of a replay job, and those of the open after its first
    // (an open that took longer than the first status waits).
    const statuses = control.filter((c) => c.channel === 'job:status')
    const progress = statuses.length - (statuses.some((c) => c.arg['jobId'] === openJobId) ? 1 : 0)
    const counts = new Map<string, number>()
    for (const c of control) counts.set(c.channel, (counts.get(c.channel) ?? 0) + 1)
    console.log(
      `# control calls: ${control.length} (${[...counts].map(([k, v]) => `${k} ×${v}`).join(', ')}); of them progress polls of running jobs: ${progress}; bundles: ${calls.length - control.length}`,
    )
    assert.equal(counts.get('app:info'), 1)
    assert.equal(counts.get('trace:openRecent'), 1)
    assert.equal(counts.get('trace:recent'), 1)
    assert.equal(counts.get('replay:start') ?? 0, 0, 'the host started the replays')
    assert.equal(counts.get('job:result') ?? 0, 0, "the open's status carried its summary")
    assert.equal(counts.get('job:cancel') ?? 0, 0)
    assert.equal(control.length - progress, 4, 'four control calls beside progress polls')
    // Every bundle fetch of a replay waits for its job.
    for (const c of calls.filter((c) => c.channel === 'replay:result')) assert.equal(c.arg['wait'], true)
  })

  it("names the floor over the metrics and each map's distance to it in its header", async () => {
    const floor = floorOf((await openInput(served.file!)).trace)
    const line = ((await page.getByTestId('metrics-floor').textContent()) ?? '').replace(/\s+/g, ' ').trim()
    assert.equal(
      line,
      `The floor: ${formatBytes(floor.peakLiveBytes)} live at the peak (${formatBytes(floor.peakLiveRoundedBytes)} rounded as PyTorch rounds each block to 512 B): no allocator reserves less for this trace.`,
    )
    const headers = await page.getByTestId('map-floor').allTextContents()
    assert.equal(headers.length, 6, 'every map says how far its peak is from the floor')
    for (const h of headers) assert.match(h.replace(/\s+/g, ' '), /^· peak [\d.]+ [KMG]?i?B: [\d.]+ [KMG]?i?B above the floor$/)
  })
})
