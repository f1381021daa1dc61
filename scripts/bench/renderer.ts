// Benchmark: the renderer's targets (issue 4), in Debian Chromium driven by Playwright against the
// real `vramscope serve`, each figure printed beside its peer measured in the same run:
//   - frames while playing a map with ~100k live blocks: the interval between animation frames
//     and each frame's script time (playhead, figures, every map's rasterization), median and
//     p95, beside the 16.7 ms budget and a plain-canvas fillRect drawing of the same live blocks
//     at the same events on a canvas of the same size;
//   - a 1 M-event trace: first paint (navigation to the trace's first meaningful content: its
//     timeline of requested bytes and event count, the renderer's `vramscope:first-paint` mark),
//     first map drawn (`vramscope:first-map`), and scrubbing to random events (seek to every map
//     redrawn, and to the next animation frame), beside the 1 s and 50 ms targets;
//   - a PyTorch snapshot: first paint and first map beside PyTorch's memory_viz page (torch/utils/
//     viz/MemoryViz.js, run from /tmp/memviz-peer with d3 served locally) showing the same file in
//     the same browser: navigation to its first drawn polygon (its timeline of active memory).
//     And whether a 1 GB snapshot opens.
// Figures are medians over runs; the machine's load average is printed, since the 2 cores of a
// developer machine are shared.
//   npx tsx scripts/bench/renderer.ts [--runs N] [--only frames,million,pytorch,big]
//       [--snapshot FILE] [--big FILE] [--peer-dir DIR] [--json FILE]
import { execFileSync } from 'node:child_process'
import { createReadStream, existsSync } from 'node:fs'
import { stat } from 'node:fs/promises'
import { createServer, type Server } from 'node:http'
import { loadavg, tmpdir } from 'node:os'
import { basename, join } from 'node:path'

import type { Browser, Page } from 'playwright-core'

import { browserSkipReason, CHROMIUM, launchBrowser, ROOT, serve, type Served } from '../../test/e2e/helpers.ts'
import { FigureLog } from './figures.ts'
import { writeRendererInputs } from './renderer-inputs.ts'
import { MEMORY_VIZ_PEER_PAGE, memoryVizSkipReason, writeMemoryVizPeer } from './memory-viz-peer.ts'

function option(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`)
  return i >= 0 ? process.argv[i + 1] : undefined
}

const RUNS = Number(option('runs') ?? 3)
const ONLY = new Set((option('only') ?? 'frames,million,pytorch,big').split(','))
const SNAPSHOT = option('snapshot') ?? firstExisting(['/tmp/pv/big100.pickle', join(ROOT, 'resources', 'samples', 'transformer_varseq.pickle')])
const BIG_SNAPSHOT = option('big') ?? firstExisting(['/tmp/pv/big1g.pickle'])
const PEER_DIR = option('peer-dir') ?? join(tmpdir(), 'memviz-peer')
const INPUT_DIR = join(tmpdir(), 'vramscope-bench-ui')
const VIEWPORT = { width: 1500, height: 1000 }
const FRAME_BUDGET_MS = 1000 / 60

function firstExisting(paths: string[]): string | undefined {
  return paths.find((p) => existsSync(p))
}

function quantile(values: number[], q: number): number {
  if (values.length === 0) return Number.NaN
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(q * (sorted.length - 1) + 0.5))]!
}
const median = (values: number[]) => quantile(values, 0.5)
const ms = (v: number) => (Number.isFinite(v) ? `${v >= 100 ? v.toFixed(0) : v.toFixed(1)} ms` : '—')
const verdict = (ok: boolean) => (ok ? 'met' : 'MISSED')

const figures = new FigureLog('scripts/bench/renderer.ts')
const within = (v: number, limit: number) => v <= limit + 0.5 // a frame interval is vsync's, give or take timer noise

function line(label: string, figure: string, peer: string): void {
  console.log(`  ${label.padEnd(46)} ${figure.padEnd(26)} ${peer}`)
}

/**
 * A fresh page, in a browser that has finished starting. tsx compiles this file with esbuild's
 * keepNames, which wraps named functions inside the callbacks given to page.evaluate in a `__name`
 * helper that the page lacks.
 */
async function newPage(browser: Browser): Promise<Page> {
  const page = await browser.newPage({ viewport: VIEWPORT })
  await page.addInitScript('globalThis.__name ??= (f) => f')
  await browserSettled(browser)
  return page
}

/**
 * Waits (at most 10 s) until the browser's processes use under 10 % of a core, over 300 ms. A
 * freshly launched Chromium's first page starts its own browser UI in a renderer of its own (the
 * omnibox popup, chrome://omnibox-popup.top-chrome/): about 1.4 s of CPU in the 1.5 s after
 * newPage on two cores, which fell on the measured page's load. A user's browser has done that
 * long before they open vramscope; every page here, vramscope's and memory_viz's, waits for it.
 */
async function browserSettled(browser: Browser): Promise<void> {
  const cdp = await browser.newBrowserCDPSession()
  try {
    const cpu = async () => {
      const { processInfo } = (await cdp.send('SystemInfo.getProcessInfo')) as { processInfo: { cpuTime: number }[] }
      return processInfo.reduce((sum, p) => sum + p.cpuTime, 0)
    }
    const deadline = Date.now() + 10_000
    let before = await cpu()
    while (Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 300))
      const now = await cpu()
      if (now - before < 0.03) return
      before = now
    }
  } finally {
    await cdp.detach()
  }
}

/** Polls the page (the app's CSP forbids the eval that waitForFunction needs). */
async function until<T>(page: Page, probe: () => T | Promise<T>, timeoutMs: number, what: string): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await page.evaluate(probe)
    if (value !== null && value !== undefined && value !== false) return value as NonNullable<T>
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 25))
  }
}

interface Opened {
  page: Page
  served: Served
  /** Navigation start to the trace's first meaningful content (timeline and event count). */
  firstPaintMs: number
  /** Navigation start to the first map drawn. */
  firstMapMs: number
  /** Navigation start to every map drawn, whole or as a preview at the opening event (`vramscope:every-map`). */
  everyMapMs: number
  /** Navigation start to every strategy's whole history in and drawn (polled: within about 30 ms). */
  allMapsMs: number
  timings: { openMs: number; replayMs: number; decodeMs: number }
  maps: number
}

/** `vramscope serve FILE`, a fresh page, and the times to its first paint and first drawn map. */
async function openInVramscope(browser: Browser, file: string, timeoutMs = 120_000, openedAfterMs = 0): Promise<Opened> {
  const started = Date.now()
  const served = await serve([file])
  const page = await newPage(browser)
  // A user opens the printed URL some seconds after starting the host, which works meanwhile.
  await new Promise((r) => setTimeout(r, Math.max(0, openedAfterMs - (Date.now() - started))))
  try {
    return await firstPaint(page, served, timeoutMs)
  } catch (e) {
    await page.close()
    await served.stop()
    throw e
  }
}

async function firstPaint(page: Page, served: Served, timeoutMs: number): Promise<Opened> {
  page.on('pageerror', (e) => console.error(`  page error: ${e.message}`))
  await page.goto(served.url)
  const firstMapMs = await until(page, () => performance.getEntriesByName('vramscope:first-map')[0]?.startTime, timeoutMs, 'the first map')
  const firstPaintMs = await until(page, () => performance.getEntriesByName('vramscope:first-paint')[0]?.startTime, timeoutMs, 'the first paint')
  // Settled: every strategy has its map (they draw in one flush) and the open job is over.
  const state = await until(
    page,
    () => {
      const app = (
        globalThis as unknown as {
          vramscopeApp: { strategies: unknown[]; previews: unknown[]; job: unknown; pendingMaps: number; trace: unknown; timings: Opened['timings'] }
        }
      ).vramscopeApp
      // (A map drawn as a preview is drawn, not pending: its history is in once no preview is left.)
      return app.job === null && app.pendingMaps === 0 && app.previews.length === 0 && app.trace !== null && app.strategies.length > 0
        ? { timings: { ...app.timings }, maps: app.strategies.length, allMapsMs: performance.now() }
        : null
    },
    timeoutMs,
    'the replay',
  )
  const everyMapMs = await until(page, () => performance.getEntriesByName('vramscope:every-map')[0]?.startTime, timeoutMs, 'every map')
  return { page, served, firstPaintMs, firstMapMs, everyMapMs, ...state }
}

async function close(opened: Opened): Promise<void> {
  await opened.page.close()
  await opened.served.stop()
}

/** Replays the open trace with `strategies` (CLI syntax) and waits for the maps. */
async function replayWith(page: Page, strategies: string): Promise<void> {
  await page.evaluate(async (spec) => {
    const app = (globalThis as unknown as { vramscopeApp: { strategySpec: string; replay(): Promise<void> } }).vramscopeApp
    app.strategySpec = spec
    await app.replay()
  }, strategies)
}

interface Playback {
  /** Intervals between animation frames. */
  intervals: number[]
  /** Each frame's script time: frame start to after the app's update and every map's draw. */
  frameWork: number[]
  /** Each map's own rasterize + putImageData time. */
  mapDraws: number[]
  /** The event drawn in each frame. */
  events: number[]
  liveBlocks: number
  canvas: { width: number; height: number }
}

/** Plays from `fromEvent` at `speed` events a second for `seconds`, recording every frame. */
async function measurePlayback(page: Page, fromEvent: number, speed: number, seconds: number): Promise<Playback> {
  return page.evaluate(
    async ({ fromEvent, speed, seconds }) => {
      type App = {
        event: number
        playing: boolean
        strategies: { model: { blocks: { count: number; from: Uint32Array; to: Uint32Array } } }[]
        pause(): void
        play(): void
        seek(e: number): void
        setSpeed(s: number): void
      }
      const g = globalThis as unknown as { vramscopeApp: App; vramscopeDrawLog?: { at: number; ms: number }[] }
      const app = g.vramscopeApp
      app.pause()
      app.seek(fromEvent)
      app.setSpeed(speed)
      await new Promise((r) => setTimeout(r, 300))
      const log: { at: number; ms: number }[] = []
      g.vramscopeDrawLog = log
      const intervals: number[] = []
      const frameWork: number[] = []
      const events: number[] = []
      app.play()
      const end = performance.now() + seconds * 1000
      // Registered after play(): within a frame this runs after the app's tick and the effects it
      // flushed (the maps' draws), so `now` here minus the frame's start is the frame's script work.
      await new Promise<void>((resolve) => {
        let last = 0
        const frame = (start: number) => {
          const now = performance.now()
          if (last > 0) {
            intervals.push(start - last)
            frameWork.push(now - start)
            events.push(app.event)
          }
          last = start
          if (now < end && app.playing) requestAnimationFrame(frame)
          else resolve()
        }
        requestAnimationFrame(frame)
      })
      app.pause()
      g.vramscopeDrawLog = undefined
      const b = app.strategies[0]!.model.blocks
      const e = events[events.length >> 1] ?? fromEvent
      let liveBlocks = 0
      for (let k = 0; k < b.count; k++) if (b.from[k]! <= e && e < b.to[k]!) liveBlocks++
      const canvas = document.querySelector('.map canvas') as HTMLCanvasElement
      return { intervals, frameWork, mapDraws: log.map((d) => d.ms), events, liveBlocks, canvas: { width: canvas.width, height: canvas.height } }
    },
    { fromEvent, speed, seconds },
  )
}

/**
 * The peer: the same live blocks of strategy 0 at the same events, drawn the plain way, one
 * fillRect per block and row it covers on a 2D canvas of the map's size, flushed with a 1-pixel
 * getImageData. The live set of each event is collected before the clock starts (the peer is
 * timed on drawing alone).
 */
async function measureFillRectPeer(page: Page, events: number[], canvas: { width: number; height: number }): Promise<number[]> {
  return page.evaluate(
    ({ events, canvas }) => {
      type Model = { blocks: { count: number; from: Uint32Array; to: Uint32Array; size: Float64Array; stream: Uint32Array } }
      const app = (
        globalThis as unknown as { vramscopeApp: { strategies: { model: Model; placed: { blockLinear: Float64Array; spans: { total: number } } }[] } }
      ).vramscopeApp
      const { model, placed } = app.strategies[0]!
      const b = model.blocks
      const c = document.createElement('canvas')
      c.width = canvas.width
      c.height = canvas.height
      document.body.appendChild(c)
      const ctx = c.getContext('2d')!
      const w = canvas.width
      const count = canvas.width * canvas.height
      const bpp = placed.spans.total / count
      const colors = ['#4e79a7', '#f28e2c', '#e15759', '#76b7b2']
      const times: number[] = []
      for (const e of events) {
        const live: number[] = []
        for (let k = 0; k < b.count; k++) if (b.from[k]! <= e && e < b.to[k]!) live.push(k)
        const t0 = performance.now()
        ctx.fillStyle = '#ffffff'
        ctx.fillRect(0, 0, c.width, c.height)
        for (const k of live) {
          let p0 = Math.floor(placed.blockLinear[k]! / bpp)
          const p1 = Math.max(p0 + 1, Math.ceil((placed.blockLinear[k]! + b.size[k]!) / bpp))
          ctx.fillStyle = colors[b.stream[k]! % colors.length]!
          while (p0 < p1) {
            const x = p0 % w
            const run = Math.min(p1 - p0, w - x)
            ctx.fillRect(x, Math.floor(p0 / w), run, 1)
            p0 += run
          }
        }
        ctx.getImageData(0, 0, 1, 1)
        times.push(performance.now() - t0)
      }
      c.remove()
      return times
    },
    { events, canvas },
  )
}

interface Scrub {
  /** Seek to every map redrawn (all the work the seek set off). */
  drawn: number[]
  /** Seek to the next animation frame after it. */
  presented: number[]
  mapsPerSeek: number
}

async function measureScrub(page: Page, seeks: number): Promise<Scrub> {
  return page.evaluate(async (seeks) => {
    type App = { lastEvent: number; pause(): void; seek(e: number): void; strategies: unknown[] }
    const g = globalThis as unknown as { vramscopeApp: App; vramscopeDrawLog?: { at: number; ms: number }[] }
    const app = g.vramscopeApp
    app.pause()
    let seed = 99
    const rand = () => (seed = (seed * 1103515245 + 12345) >>> 0) / 4294967296
    const drawn: number[] = []
    const presented: number[] = []
    let maps = 0
    for (let i = 0; i < seeks; i++) {
      const target = Math.floor(rand() * app.lastEvent)
      await new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)))
      const log: { at: number; ms: number }[] = []
      g.vramscopeDrawLog = log
      const t0 = performance.now()
      app.seek(target)
      // Effects flush in microtasks: a task queued now runs after all of them.
      await new Promise((r) => setTimeout(r, 0))
      drawn.push((log.at(-1)?.at ?? performance.now()) - t0)
      const settled = performance.now() - t0
      await new Promise((r) => requestAnimationFrame(() => r(null)))
      presented.push(Math.max(settled, performance.now() - t0))
      maps = Math.max(maps, log.length)
    }
    g.vramscopeDrawLog = undefined
    return { drawn, presented, mapsPerSeek: maps }
  }, seeks)
}

async function framesBench(browser: Browser, file: string, fromEvent: number): Promise<void> {
  console.log(`\nFrames while playing, ~100k live blocks (${basename(file)}), speed 2000 events/s, 4 s a run`)
  const opened = await openInVramscope(browser, file)
  try {
    for (const [label, spec] of [
      ['one map, caching (pytorch)', 'caching:preset=pytorch'],
      ['five maps (the default strategies)', ''],
    ] as const) {
      if (spec !== '') await replayWith(opened.page, spec)
      else
        await replayWith(
          opened.page,
          await opened.page.evaluate(
            () => (globalThis as unknown as { vramscopeApp: { info: { defaultStrategies: string } } }).vramscopeApp.info.defaultStrategies,
          ),
        )
      const all: Playback = { intervals: [], frameWork: [], mapDraws: [], events: [], liveBlocks: 0, canvas: { width: 0, height: 0 } }
      for (let run = 0; run < RUNS; run++) {
        const p = await measurePlayback(opened.page, fromEvent + 2000 * run, 2000, 4)
        all.intervals.push(...p.intervals)
        all.frameWork.push(...p.frameWork)
        all.mapDraws.push(...p.mapDraws)
        all.events.push(...p.events)
        all.liveBlocks = p.liveBlocks
        all.canvas = p.canvas
      }
      const peer = await measureFillRectPeer(
        opened.page,
        all.events.filter((_, i) => i % 4 === 0),
        all.canvas,
      )
      console.log(` ${label}: ${all.liveBlocks} live blocks in the first map, canvas ${all.canvas.width}×${all.canvas.height}, ${all.intervals.length} frames`)
      line(
        'frame interval, median / p95',
        `${ms(median(all.intervals))} / ${ms(quantile(all.intervals, 0.95))}`,
        `budget ${ms(FRAME_BUDGET_MS)}: ${verdict(median(all.intervals) <= FRAME_BUDGET_MS + 0.5 && quantile(all.intervals, 0.95) <= FRAME_BUDGET_MS + 0.5)}`,
      )
      line('frame script work, median / p95', `${ms(median(all.frameWork))} / ${ms(quantile(all.frameWork, 0.95))}`, `budget ${ms(FRAME_BUDGET_MS)}`)
      line(
        'one map drawn (rasterize + put), median / p95',
        `${ms(median(all.mapDraws))} / ${ms(quantile(all.mapDraws, 0.95))}`,
        `fillRect peer ${ms(median(peer))} / ${ms(quantile(peer, 0.95))}`,
      )
      const p95 = quantile(all.intervals, 0.95)
      figures.add({
        area: 'renderer',
        what: `frame interval while playing, ${label}, ${all.liveBlocks} live blocks, median (p95 ${ms(p95)})`,
        value: median(all.intervals),
        unit: 'ms',
        peers: [],
        better: 'lower',
        target: label.startsWith('one map') ? `≤ ${ms(FRAME_BUDGET_MS)}, median and p95` : undefined,
        met: label.startsWith('one map') ? within(median(all.intervals), FRAME_BUDGET_MS) && within(p95, FRAME_BUDGET_MS) : undefined,
        note: 'no peer draws this; the budget is one display frame',
      })
      figures.add({
        area: 'renderer',
        what: `one map drawn (rasterize + put), ${label}, median`,
        value: median(all.mapDraws),
        unit: 'ms',
        peers: [{ name: 'the same live blocks drawn with one fillRect each', value: median(peer) }],
        better: 'lower',
      })
    }
  } finally {
    await close(opened)
  }
}

/** When the second set of 1 M-event runs opens its page: after `vramscope serve` started, as a user who copies the printed URL. */
const OPENED_LATER_MS = 8000

async function millionBench(browser: Browser, file: string): Promise<void> {
  console.log(`\nA 1 M-event trace (${basename(file)}), the default strategies`)
  const paints: number[] = []
  const firstMaps: number[] = []
  const allMaps: number[] = []
  const everyMap: number[] = []
  const opens: number[] = []
  const replays: number[] = []
  let scrub: Scrub | undefined
  let maps = 0
  for (let run = 0; run < RUNS; run++) {
    const opened = await openInVramscope(browser, file)
    paints.push(opened.firstPaintMs)
    firstMaps.push(opened.firstMapMs)
    allMaps.push(opened.allMapsMs)
    everyMap.push(opened.everyMapMs)
    opens.push(opened.timings.openMs)
    replays.push(opened.timings.replayMs)
    maps = opened.maps
    if (run === RUNS - 1) scrub = await measureScrub(opened.page, 60)
    await close(opened)
  }
  const runs = (v: number[]) => v.map((x) => x.toFixed(0)).join(', ')
  console.log(`  (runs: first paint ${runs(paints)}; first map ${runs(firstMaps)}; every map ${runs(everyMap)}; every history ${runs(allMaps)} ms)`)
  line(`first paint (timeline, event count), median of ${RUNS}`, ms(median(paints)), `target 1000 ms: ${verdict(median(paints) <= 1000)}`)
  line(`first map drawn, median of ${RUNS}`, ms(median(firstMaps)), `target 1000 ms: ${verdict(median(firstMaps) <= 1000)}`)
  const million = `a 1 M-event trace (${maps} strategies)`
  const noPeer = 'no peer opens this trace (memory_viz reads only PyTorch snapshots)'
  figures.add({
    area: 'renderer',
    what: `${million}: first paint (timeline and event count), median of ${RUNS}`,
    value: median(paints),
    unit: 'ms',
    peers: [],
    better: 'lower',
    target: '≤ 1000 ms',
    met: median(paints) <= 1000,
    note: noPeer,
  })
  figures.add({
    area: 'renderer',
    what: `${million}: first memory map drawn, median of ${RUNS}`,
    value: median(firstMaps),
    unit: 'ms',
    peers: [],
    better: 'lower',
    target: '≤ 1000 ms',
    met: median(firstMaps) <= 1000,
    note: noPeer,
  })
  line(`all ${maps} maps drawn (at the opening event)`, ms(median(everyMap)), `target 3000 ms: ${verdict(median(everyMap) <= 3000)}`)
  figures.add({
    area: 'renderer',
    what: `${million}: every map drawn (each at the opening event, its history on its way), median of ${RUNS}`,
    value: median(everyMap),
    unit: 'ms',
    peers: [],
    better: 'lower',
    target: '≤ 3000 ms',
    met: median(everyMap) <= 3000,
    note: noPeer,
  })
  line(`all ${maps} maps' histories in (scrubbable)`, ms(median(allMaps)), '')
  // The same page opened once the host has had its head start (replays of the initial file
  // started as it starts: docs/architecture.md, "Replays started ahead of the page").
  const laterFirst: number[] = []
  const laterEvery: number[] = []
  for (let run = 0; run < RUNS; run++) {
    const opened = await openInVramscope(browser, file, 120_000, OPENED_LATER_MS)
    laterFirst.push(opened.firstMapMs)
    laterEvery.push(opened.everyMapMs)
    await close(opened)
  }
  console.log(`  (opened ${OPENED_LATER_MS / 1000} s after the host started, runs: first map ${runs(laterFirst)}; every map ${runs(laterEvery)} ms)`)
  line(
    `  opened ${OPENED_LATER_MS / 1000} s after the host started: first map`,
    ms(median(laterFirst)),
    `target 1000 ms: ${verdict(median(laterFirst) <= 1000)}`,
  )
  line(
    `  opened ${OPENED_LATER_MS / 1000} s after the host started: every map`,
    ms(median(laterEvery)),
    `target 3000 ms: ${verdict(median(laterEvery) <= 3000)}`,
  )
  for (const [what, values, target] of [
    ['first memory map drawn', laterFirst, 1000],
    [`every map drawn (each at the opening event)`, laterEvery, 3000],
  ] as const)
    figures.add({
      area: 'renderer',
      what: `${million}, the page opened ${OPENED_LATER_MS / 1000} s after vramscope serve started: ${what}, median of ${RUNS}`,
      value: median([...values]),
      unit: 'ms',
      peers: [],
      better: 'lower',
      target: `≤ ${target} ms`,
      met: median([...values]) <= target,
      note: noPeer,
    })
  line('  trace opened, sent and decoded', ms(median(opens)), '')
  line('  then every strategy replayed, sent, decoded', ms(median(replays)), '')
  if (scrub) {
    line(
      `scrub to a random event (${scrub.mapsPerSeek} maps), median / p95`,
      `${ms(median(scrub.drawn))} / ${ms(quantile(scrub.drawn, 0.95))}`,
      `target 50 ms: ${verdict(quantile(scrub.drawn, 0.95) <= 50)}`,
    )
    line(
      'scrub to the next frame, median / p95',
      `${ms(median(scrub.presented))} / ${ms(quantile(scrub.presented, 0.95))}`,
      `frame budget ${ms(FRAME_BUDGET_MS)}`,
    )
    figures.add({
      area: 'renderer',
      what: `${million}: scrub to a random event, every map redrawn, p95 (median ${ms(median(scrub.drawn))})`,
      value: quantile(scrub.drawn, 0.95),
      unit: 'ms',
      peers: [],
      better: 'lower',
      target: '≤ 50 ms',
      met: quantile(scrub.drawn, 0.95) <= 50,
      note: noPeer,
    })
  }
}

/** Serves the peer's page, MemoryViz.js, d3 and the snapshot on 127.0.0.1. */
async function servePeer(dir: string, snapshot: string): Promise<{ url: string; server: Server }> {
  const types: Record<string, string> = { '.html': 'text/html', '.js': 'text/javascript' }
  const server = createServer((req, res) => {
    const name = (req.url ?? '/').split('?')[0]!.slice(1) || MEMORY_VIZ_PEER_PAGE
    const path = name === 'snapshot.pickle' ? snapshot : join(dir, basename(name))
    if (!existsSync(path)) {
      res.writeHead(404).end()
      return
    }
    const ext = name.slice(name.lastIndexOf('.'))
    res.writeHead(200, { 'content-type': types[ext] ?? 'application/octet-stream', 'cache-control': 'no-store' })
    createReadStream(path).pipe(res)
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const address = server.address() as { port: number }
  return { url: `http://127.0.0.1:${address.port}/${MEMORY_VIZ_PEER_PAGE}`, server }
}

/** memory_viz showing `snapshot`: navigation to its first polygon in the DOM, or NaN. */
async function memoryVizFirstPaint(browser: Browser, dir: string, snapshot: string, timeoutMs: number): Promise<{ ms: number; why?: string }> {
  const { url, server } = await servePeer(dir, snapshot)
  const page = await newPage(browser)
  let crashed = ''
  page.on('crash', () => (crashed = 'the page crashed'))
  page.on('pageerror', (e) => (crashed ||= `page error: ${e.message}`))
  try {
    await page.addInitScript(() => {
      new MutationObserver((_, observer) => {
        if (document.querySelector('svg polygon')) {
          performance.mark('memviz:first-content')
          observer.disconnect()
        }
      }).observe(document, { childList: true, subtree: true })
    })
    await page.goto(url)
    const deadline = Date.now() + timeoutMs
    for (;;) {
      if (crashed) return { ms: Number.NaN, why: crashed }
      const t = await page.evaluate(() => performance.getEntriesByName('memviz:first-content')[0]?.startTime).catch(() => undefined)
      if (t !== undefined) return { ms: t }
      if (Date.now() > deadline) return { ms: Number.NaN, why: `nothing drawn within ${timeoutMs / 1000} s` }
      await new Promise((r) => setTimeout(r, 50))
    }
  } finally {
    await page.close().catch(() => {})
    server.close()
  }
}

async function pytorchBench(browser: Browser, snapshot: string): Promise<void> {
  const mb = (await stat(snapshot)).size / 1e6
  console.log(`\nA PyTorch snapshot (${basename(snapshot)}, ${mb.toFixed(0)} MB), the default strategies`)
  const skipPeer = memoryVizSkipReason(PEER_DIR)
  if (!skipPeer) await writeMemoryVizPeer(PEER_DIR)
  const ours: number[] = []
  const oursMap: number[] = []
  const peer: number[] = []
  let why = ''
  let maps = 0
  for (let run = 0; run < RUNS; run++) {
    const opened = await openInVramscope(browser, snapshot, 600_000)
    ours.push(opened.firstPaintMs)
    oursMap.push(opened.firstMapMs)
    maps = opened.maps
    await close(opened)
    const p = skipPeer ? { ms: Number.NaN, why: `not measured: ${skipPeer}` } : await memoryVizFirstPaint(browser, PEER_DIR, snapshot, 600_000)
    peer.push(p.ms)
    if (p.why) why = p.why
  }
  const versus = (ours: number[]) => {
    const ratio = median(peer) / median(ours)
    return `memory_viz ${why ? why : ms(median(peer))}: ${Number.isFinite(ratio) ? `${ratio.toFixed(1)}× faster, target 3×: ${verdict(ratio >= 3)}` : ''}`
  }
  console.log(
    `  (runs: first paint ${ours.map((v) => v.toFixed(0)).join(', ')}; first map ${oursMap.map((v) => v.toFixed(0)).join(', ')}; memory_viz ${peer.map((v) => v.toFixed(0)).join(', ')} ms)`,
  )
  line(`first paint (timeline, event count), median of ${RUNS}`, ms(median(ours)), versus(ours))
  line(`first map drawn (of ${maps}), median of ${RUNS}`, ms(median(oursMap)), versus(oursMap))
  const peers = why ? [] : [{ name: "memory_viz's page, first polygon", value: median(peer) }]
  const snapshotName = `PyTorch snapshot ${basename(snapshot)} (${mb.toFixed(0)} MB)`
  figures.add({
    area: 'renderer',
    what: `${snapshotName}: first paint, median of ${RUNS}`,
    value: median(ours),
    unit: 'ms',
    peers,
    better: 'lower',
    target: '≥ 3× faster than memory_viz',
    met: why ? undefined : median(peer) / median(ours) >= 3,
    note: why || undefined,
  })
  figures.add({
    area: 'renderer',
    what: `${snapshotName}: first memory map drawn, median of ${RUNS}`,
    value: median(oursMap),
    unit: 'ms',
    peers,
    better: 'lower',
    note: why || undefined,
  })
}

async function bigBench(browser: Browser, snapshot: string): Promise<void> {
  const mb = (await stat(snapshot)).size / 1e6
  let bigOpened: number | undefined
  console.log(`\nA large PyTorch snapshot (${basename(snapshot)}, ${mb.toFixed(0)} MB): does it open`)
  try {
    const opened = await openInVramscope(browser, snapshot, 900_000)
    line('first paint (timeline, event count)', ms(opened.firstPaintMs), 'target: opens')
    line(`first map drawn (of ${opened.maps})`, ms(opened.firstMapMs), '')
    bigOpened = opened.firstPaintMs
    await close(opened)
  } catch (e) {
    line('first paint', 'did not open', (e as Error).message)
  }
  const skipPeer = memoryVizSkipReason(PEER_DIR)
  if (skipPeer) return line('memory_viz first paint', 'not measured', skipPeer)
  await writeMemoryVizPeer(PEER_DIR)
  const p = await memoryVizFirstPaint(browser, PEER_DIR, snapshot, 300_000)
  line('memory_viz first paint', p.why ?? ms(p.ms), '')
  if (bigOpened !== undefined)
    figures.add({
      area: 'renderer',
      what: `large PyTorch snapshot ${basename(snapshot)} (${mb.toFixed(0)} MB) opens: first paint, one run`,
      value: bigOpened,
      unit: 'ms',
      peers: p.why ? [] : [{ name: "memory_viz's page, first polygon", value: p.ms }],
      better: 'lower',
      target: 'opens',
      met: true,
      note: p.why,
    })
}

async function main(): Promise<void> {
  const skip = browserSkipReason()
  if (skip) {
    console.log(`renderer benchmark skipped: ${skip}`)
    return
  }
  const inputs = await writeRendererInputs(INPUT_DIR)
  const version = execFileSync(CHROMIUM, ['--version'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim()
  console.log(`Renderer benchmark (issue 4): ${version}, software rendering (--disable-gpu), viewport ${VIEWPORT.width}×${VIEWPORT.height}, ${RUNS} runs`)
  console.log(
    `load average ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}; inputs in ${INPUT_DIR}`,
  )
  const browser = await launchBrowser()
  try {
    if (ONLY.has('frames')) await framesBench(browser, inputs.hundredThousandLive, inputs.manyLiveFrom + 1000)
    if (ONLY.has('million')) await millionBench(browser, inputs.millionEvents)
    if (ONLY.has('pytorch')) {
      if (SNAPSHOT) await pytorchBench(browser, SNAPSHOT)
      else console.log('\nPyTorch snapshot: skipped, no snapshot (--snapshot FILE)')
    }
    if (ONLY.has('big')) {
      if (BIG_SNAPSHOT) await bigBench(browser, BIG_SNAPSHOT)
      else console.log('\n1 GB snapshot: skipped, none found (scripts/fixtures/make_large_snapshot.py writes one; --big FILE)')
    }
  } finally {
    await browser.close()
  }
  console.log(
    `\nload average after: ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  )
  figures.writeIfAsked()
}

await main()
