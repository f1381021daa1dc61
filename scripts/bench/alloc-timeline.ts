// Benchmark: the allocation timeline (src-renderer/viz/alloc-timeline.ts) on a synthetic 1 M-event
// trace (500k allocs, 500k frees; lifetimes mostly short, some long, a few live to the end): the
// one-time layout (bands, x extents, colours), the whole-trace first draw, and pan/zoom frames
// at several zooms, each the rasterization into a pixel buffer of a 1600 × 320 canvas (what a
// frame costs in the renderer besides putImageData). Runs in Node; the browser runs the same code.
//   npx tsx scripts/bench/alloc-timeline.ts [--events N] [--width W] [--height H]
import { loadavg } from 'node:os'

import { allocBands, bandColors, bandXs, newBandScratch, rasterizeBands } from '../../src-renderer/viz/alloc-timeline.ts'
import { SERIES } from '../../src-renderer/viz/palette.ts'

function option(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`)
  return i >= 0 ? Number(process.argv[i + 1]) : fallback
}

const EVENTS = option('events', 1_000_000)
const W = option('width', 1600)
const H = option('height', 320)

/** A deterministic pseudo-random trace: allocs and frees interleaved, sizes 512 B to 64 MiB. */
function synthetic(n: number) {
  const kind = new Uint8Array(n)
  const id = new Uint32Array(n)
  const size = new Float64Array(n)
  const time = new Float64Array(n)
  const stack = new Int32Array(n)
  let seed = 12345
  const rand = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 4294967296
  const live: number[] = []
  let next = 0
  for (let i = 0; i < n; i++) {
    time[i] = i * 1000
    const wantFree = live.length > 0 && (live.length > 2000 || rand() < 0.5) && n - i > live.length * 0 - 1
    if (wantFree && i < n) {
      // Mostly recent allocations (activations), sometimes old ones.
      const j = rand() < 0.9 ? live.length - 1 - Math.floor(rand() * Math.min(live.length, 16)) : Math.floor(rand() * live.length)
      kind[i] = 1
      id[i] = live[j]!
      live[j] = live.at(-1)!
      live.pop()
    } else {
      kind[i] = 0
      id[i] = next
      live.push(next++)
      size[i] = 512 * Math.floor(1 + rand() ** 6 * 131072)
      stack[i] = Math.floor(rand() * 300)
    }
  }
  return { kind, id, size, time, stack }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.floor(s.length / 2)]!
}
function p95(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor(s.length * 0.95))]!
}

const t = synthetic(EVENTS)
let t0 = performance.now()
const bands = allocBands(t.kind, t.id, t.size)
const layoutMs = performance.now() - t0
t0 = performance.now()
const xs = bandXs(bands, 'event')
const palette = Uint32Array.from(SERIES.map((c) => 0xff000000 | Number.parseInt(c.slice(1), 16)))
const colors = bandColors(bands, t.stack, palette)
const extentsMs = performance.now() - t0

const pixels = new Uint32Array(W * H)
const owner = new Int32Array(W * H)
const scratch = newBandScratch(W * H)
const lane = bands.lanes[0]!
/** CPU milliseconds of each draw beside its wall time: the 2 cores of a developer machine are shared. */
const cpu: number[] = []
const draw = (x0: number, x1: number) => {
  const c = process.cpuUsage()
  const s = performance.now()
  rasterizeBands(
    bands,
    xs,
    { width: W, height: H, lane: 0, view: { x0, x1, yMax: lane.peak }, colors, background: 0xfff0f0f0, small: 0xff888888 },
    pixels,
    owner,
    scratch,
  )
  const ms = performance.now() - s
  const used = process.cpuUsage(c)
  cpu.push((used.user + used.system) / 1000)
  return ms
}
const first = draw(xs.min, xs.max)
const firstCpu = cpu.at(-1)!
const whole: number[] = []
for (let i = 0; i < 20; i++) whole.push(draw(xs.min, xs.max))
// Pan/zoom: views of 1/4, 1/64 and 1/4096 of the trace at 40 positions each, as a pan sweeps.
const zooms: Record<string, number[]> = {}
const cpuOf: Record<string, number[]> = { whole: cpu.slice(1) }
for (const frac of [1 / 4, 1 / 64, 1 / 4096]) {
  cpu.length = 0
  const span = (xs.max - xs.min) * frac
  const times: number[] = []
  for (let k = 0; k < 40; k++) {
    const start = xs.min + ((xs.max - xs.min - span) * k) / 39
    times.push(draw(start, start + span))
  }
  zooms[`1/${Math.round(1 / frac)}`] = times
  cpuOf[`1/${Math.round(1 / frac)}`] = [...cpu]
}

console.log(
  `allocation timeline, ${EVENTS.toLocaleString('en-US')} events (${bands.count.toLocaleString('en-US')} bands), canvas ${W}×${H}, load ${loadavg()[0]!.toFixed(1)}`,
)
console.log(`  layout (bands, first-fit offsets): ${layoutMs.toFixed(0)} ms; x extents + colours: ${extentsMs.toFixed(0)} ms`)
console.log(
  `  first draw of the whole trace: ${first.toFixed(1)} ms (cpu ${firstCpu.toFixed(1)}); whole-trace redraws: median ${median(whole).toFixed(1)} ms, p95 ${p95(whole).toFixed(1)} ms (cpu median ${median(cpuOf['whole']!).toFixed(1)})`,
)
for (const [z, times] of Object.entries(zooms))
  console.log(
    `  pan at zoom ${z} of the trace: median ${median(times).toFixed(1)} ms, p95 ${p95(times).toFixed(1)} ms (cpu median ${median(cpuOf[z]!).toFixed(1)}, p95 ${p95(cpuOf[z]!).toFixed(1)}; budget 16.7 ms)`,
  )
console.log(`  first paint (layout + extents + first draw): ${(layoutMs + extentsMs + first).toFixed(0)} ms (target 1000 ms)`)
