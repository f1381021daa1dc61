// Benchmark: the allocation timeline in Debian Chromium against the real `vramscope serve`, on the
// renderer bench's 1 M-event trace: navigation to the timeline's first draw of the whole trace
// (`vramscope:alloc-timeline`, beside the trace's own first paint), and the draw time of each
// frame while zooming with the wheel and panning by dragging (the view's rasterization and
// putImageData), median and p95 beside the 16.7 ms budget: once while the strategies still replay
// and decode beside it, once after every map is in.
//   npx tsx scripts/bench/alloc-timeline-browser.ts
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'

import { browserSkipReason, launchBrowser, serve } from '../../test/e2e/helpers.ts'
import { writeRendererInputs } from './renderer-inputs.ts'

const skip = browserSkipReason()
if (skip) {
  console.log(`skipped: ${skip}`)
  process.exit(0)
}

const inputs = await writeRendererInputs(join(tmpdir(), 'vramscope-bench-ui'))
const served = await serve([inputs.millionEvents])
const browser = await launchBrowser()
try {
  const page = await browser.newPage({ viewport: { width: 1500, height: 1000 } })
  await page.addInitScript('globalThis.__name ??= (f) => f; globalThis.vramscopeAllocDrawLog = []')
  await page.goto(served.url)
  const poll = async <T>(probe: () => T): Promise<NonNullable<T>> => {
    const deadline = Date.now() + 180_000
    for (;;) {
      const v = await page.evaluate(probe)
      if (v !== null && v !== undefined) return v as NonNullable<T>
      if (Date.now() > deadline) throw new Error('timed out')
      await new Promise((r) => setTimeout(r, 25))
    }
  }
  const drawnAt = await poll(() => performance.getEntriesByName('vramscope:alloc-timeline')[0]?.startTime)
  const paintAt = await poll(() => performance.getEntriesByName('vramscope:first-paint')[0]?.startTime)
  const firstDraw = await page.evaluate(() => (globalThis as unknown as { vramscopeAllocDrawLog: number[] }).vramscopeAllocDrawLog[0])
  const canvas = page.getByLabel('allocation bands')
  await canvas.scrollIntoViewIfNeeded()
  const box = (await canvas.boundingBox())!
  const cx = box.x + box.width * 0.6
  const cy = box.y + box.height / 2
  /** Zooms in step by step (to about 1/4000 of the trace), pans across, zooms out again: each draw's time. */
  const zoomAndPan = async (): Promise<number[]> => {
    await page.evaluate(() => ((globalThis as unknown as { vramscopeAllocDrawLog: number[] }).vramscopeAllocDrawLog.length = 0))
    await page.mouse.move(cx, cy)
    for (let i = 0; i < 40; i++) {
      await page.mouse.wheel(0, -100)
      await page.waitForTimeout(20)
    }
    await page.mouse.down()
    for (let i = 0; i < 40; i++) await page.mouse.move(cx - i * 15, cy, { steps: 1 })
    await page.mouse.up()
    for (let i = 0; i < 40; i++) {
      await page.mouse.wheel(0, 100)
      await page.waitForTimeout(20)
    }
    return page.evaluate(() => [...(globalThis as unknown as { vramscopeAllocDrawLog: number[] }).vramscopeAllocDrawLog])
  }
  const summary = (frames: number[]) => {
    const sorted = [...frames].sort((a, b) => a - b)
    const q = (p: number) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!
    return `${frames.length} zoom/pan draws: median ${q(0.5).toFixed(1)} ms, p95 ${q(0.95).toFixed(1)} ms, max ${sorted.at(-1)!.toFixed(1)} ms (budget 16.7 ms)`
  }
  // At once, while the strategies still replay and their maps decode beside it; then again once
  // every map is in and the page is idle.
  const loading = await zoomAndPan()
  await poll(() => {
    const app = (globalThis as unknown as { vramscopeApp: { job: unknown; pendingMaps: number; previews: unknown[]; strategies: unknown[] } }).vramscopeApp
    return app.job === null && app.pendingMaps === 0 && app.previews.length === 0 && app.strategies.length > 0 ? true : null
  })
  const settled = await zoomAndPan()
  console.log(`allocation timeline in Chromium, ${inputs.millionEvents}, load ${loadavg()[0]!.toFixed(1)}`)
  console.log(
    `  navigation → trace first paint ${paintAt.toFixed(0)} ms; → timeline drawn whole ${drawnAt.toFixed(0)} ms (its first draw ${firstDraw.toFixed(1)} ms)`,
  )
  console.log(`  while the maps load: ${summary(loading)}`)
  console.log(`  every map in: ${summary(settled)}`)
} finally {
  await browser.close()
  await served.stop()
}
