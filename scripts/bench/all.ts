// `npm run bench`: every benchmark of vramscope in one command, and one table in which every figure
// stands beside its peer measured in the same run (issue 7). It runs, one after the other:
//   pairs    native/scripts/bench.sh: ns per warm alloc+free pair of each strategy (tracing off and
//            on), beside cudaMalloc+cudaFree and cudaMallocAsync+cudaFreeAsync on a GPU; --runs times,
//            and the median of the runs' medians is what the table shows
//   torch    scripts/gpu/torch_caching_pair.py: PyTorch's C++ caching allocator in the same cells
//            (where PyTorch with CUDA is installed)
//   replay   vramscope_bench replay: events/s through each strategy, beside the strategy alone and a
//            bare loop over the same events
//   load     scripts/bench/trace-file.ts: opening a 1 M-event trace file, beside bare binary columns
//            and JSON
//   import   scripts/bench/import-pytorch.ts: PyTorch snapshot import, beside memory_viz's unpickler
//   whatif   scripts/bench/whatif.ts: the what-if lab's grid on a 1 M-event PyTorch trace, beside
//            one replay of the same events
//   ui       scripts/bench/renderer.ts: frame time and first paint in Chromium, beside a plain
//            canvas drawing and memory_viz's page (where /usr/bin/chromium or CHROMIUM exists)
// A part that cannot run here says why, in the table. memory_viz (PyTorch's code, never in this
// repository) is found by --memory-viz PATH, MEMORY_VIZ_JS, or the installed torch package.
//   npm run bench [-- --quick] [--only pairs,replay,...] [--runs N] [--clock wall|cpu]
//                  [--memory-viz PATH] [--out DIR] [--markdown FILE]
//   npm run bench -- --from DIR [--from DIR2]   the table again from runs' JSON, nothing measured:
//                                   say, a GPU machine's run and this machine's renderer run; a
//                                   part one run could not measure is not listed as missing when
//                                   another run has it
// The table goes to stdout (and to --markdown FILE); each part's own output, to stderr as it runs;
// every part's JSON stays in --out DIR (default: a new directory under the system's temp dir).
import { spawn, spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { cpus, loadavg, tmpdir } from 'node:os'
import { join, resolve } from 'node:path'

import type { Figure, FigureFile } from './figures.ts'

const ROOT = resolve(import.meta.dirname, '..', '..')
const PARTS = ['pairs', 'torch', 'replay', 'load', 'import', 'whatif', 'ui'] as const
type Part = (typeof PARTS)[number]

interface Options {
  quick: boolean
  only: Set<Part>
  runs: number
  clock: 'wall' | 'cpu'
  memoryViz: string | undefined
  out: string
  from: string[]
  markdown: string | undefined
}

function parseOptions(argv: string[]): Options {
  const o: Options = {
    quick: false,
    only: new Set(PARTS),
    runs: 3,
    clock: 'wall',
    memoryViz: process.env['MEMORY_VIZ_JS'],
    out: '',
    from: [],
    markdown: undefined,
  }
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    const value = (): string => {
      const v = argv[++i]
      if (v === undefined) fail(`${arg} needs a value`)
      return v
    }
    if (arg === '--quick') o.quick = true
    else if (arg === '--only') {
      const names = value().split(',').filter(Boolean)
      for (const n of names) if (!PARTS.includes(n as Part)) fail(`--only: unknown part "${n}" (parts: ${PARTS.join(', ')})`)
      o.only = new Set(names as Part[])
    } else if (arg === '--runs') {
      o.runs = Number(value())
      if (!Number.isInteger(o.runs) || o.runs < 1 || o.runs > 50) fail('--runs takes a whole number from 1 to 50')
    } else if (arg === '--clock') {
      const c = value()
      if (c !== 'wall' && c !== 'cpu') fail('--clock takes wall or cpu')
      o.clock = c
    } else if (arg === '--memory-viz') o.memoryViz = value()
    else if (arg === '--out') o.out = value()
    else if (arg === '--from') o.from.push(value())
    else if (arg === '--markdown') o.markdown = value()
    else if (arg === '--help' || arg === '-h') {
      console.log(
        readFileSync(import.meta.filename, 'utf8')
          .split('\nimport ')[0]!
          .replace(/^\/\/ ?/gm, ''),
      )
      process.exit(0)
    } else fail(`unknown option ${arg}`)
  }
  if (o.quick && !argv.includes('--runs')) o.runs = 1
  return o
}

function fail(why: string): never {
  process.stderr.write(`npm run bench: ${why}\n`)
  process.exit(2)
}

/** Runs a command with its output on our stderr; resolves to its exit code. */
function run(command: string, args: string[], env: NodeJS.ProcessEnv = {}): Promise<number> {
  return new Promise((done) => {
    const child = spawn(command, args, { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] })
    child.stdout.pipe(process.stderr, { end: false })
    child.on('error', (e) => {
      process.stderr.write(`${command}: ${e.message}\n`)
      done(127)
    })
    child.on('close', (code) => done(code ?? 1))
  })
}

/** A TypeScript script run by this Node with tsx's loader (no npx or node_modules/.bin needed). */
const tsx = (script: string, args: string[], env: NodeJS.ProcessEnv = {}): Promise<number> =>
  run(process.execPath, ['--import', 'tsx', join(ROOT, 'scripts', 'bench', script), ...args], env)

// --- native JSON (vramscope_bench) --------------------------------------------------------------

interface NativeFigure {
  subject: string
  kind: 'strategy' | 'peer' | 'device'
  backing: string
  size: number
  live_blocks: number
  tracing: boolean
  measured: boolean
  median_ns: number
  note?: string
}
interface NativeRun {
  machine: { cpu: string; cores: number; gpu: { name: string; driver_version: string } | null; no_gpu_reason?: string }
  figures: NativeFigure[]
  targets: { target: string; measured: string; met: string }[]
}
interface TorchPairs {
  device: string
  torch: string
  cells: { size: number; live: number; median_ns: number }[]
}
interface ReplayRun {
  events: number
  bare_loop_ns_per_event: number
  rows: {
    label: string
    parameters: string
    replay_ns_per_event: number
    strategy_alone_ns_per_event: number
    target_events_per_second: number | null
    failures: number
  }[]
}

function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b)
  const m = s.length >> 1
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2
}

function bytes(n: number): string {
  if (n >= 2 ** 30 && n % 2 ** 30 === 0) return `${n / 2 ** 30} GiB`
  if (n >= 2 ** 20 && n % 2 ** 20 === 0) return `${n / 2 ** 20} MiB`
  if (n >= 2 ** 10 && n % 2 ** 10 === 0) return `${n / 2 ** 10} KiB`
  return `${n} B`
}

const cellName = (size: number, live: number): string => `${bytes(size)}${live ? ` · ${live} live` : ''}`

/** The runs' figures keyed by what they measured; the value is the median of the runs' medians. */
function combine(runs: NativeRun[]): Map<string, NativeFigure> {
  const groups = new Map<string, NativeFigure[]>()
  for (const r of runs)
    for (const f of r.figures) {
      if (!f.measured) continue
      const key = `${f.kind}|${f.subject}|${f.backing}|${f.size}|${f.live_blocks}|${f.tracing}`
      let g = groups.get(key)
      if (!g) groups.set(key, (g = []))
      g.push(f)
    }
  return new Map([...groups].map(([k, g]) => [k, { ...g[0]!, median_ns: median(g.map((f) => f.median_ns)) }]))
}

/** Tracing on ÷ off for one cell: each run's own ratio (the two alternate within a run), the median over runs. */
function tracingRatio(runs: NativeRun[], label: string, cell: NativeFigure): number {
  const ratios: number[] = []
  for (const r of runs) {
    const find = (tracing: boolean): NativeFigure | undefined =>
      r.figures.find(
        (f) =>
          f.measured &&
          f.kind === 'strategy' &&
          f.subject === label &&
          f.backing === cell.backing &&
          f.size === cell.size &&
          f.live_blocks === cell.live_blocks &&
          f.tracing === tracing,
      )
    const on = find(true)
    const off = find(false)
    if (on && off) ratios.push(on.median_ns / off.median_ns)
  }
  return median(ratios)
}

function pairFigures(runs: NativeRun[], torch: TorchPairs | string): Figure[] {
  const all = combine(runs)
  const figures: Figure[] = []
  const peer = (subject: string, size: number, live: number): number | undefined => all.get(`peer|${subject}|CUDA runtime|${size}|${live}|false`)?.median_ns
  const strategies = [...all.values()].filter((f) => f.kind === 'strategy' && !f.tracing)
  const labels = [...new Set(strategies.map((f) => f.subject))]
  const gpu = runs[0]!.machine.gpu !== null
  const targets = runs[runs.length - 1]!.targets
  for (const label of labels) {
    // On a GPU the strategies run on their real backings; the simulated rows (--simulated) are not
    // what the peers are compared with.
    const cells = strategies.filter((f) => f.subject === label && (!gpu || f.backing !== 'simulated'))
    if (cells.length === 0) continue
    const worst = cells.reduce((a, b) => (b.median_ns > a.median_ns ? b : a))
    const peers: Figure['peers'] = []
    for (const subject of ['cudaMalloc+cudaFree', 'cudaMallocAsync+cudaFreeAsync']) {
      const v = peer(subject, worst.size, worst.live_blocks)
      if (v !== undefined) peers.push({ name: subject, value: v })
    }
    if (typeof torch !== 'string') {
      const t = torch.cells.find((c) => c.size === worst.size && c.live === worst.live_blocks)
      if (t) peers.push({ name: `PyTorch ${torch.torch} CUDACachingAllocator (C++)`, value: t.median_ns })
    }
    // The targets are vramscope_bench's (its text names them); they are judged again here on the
    // runs' combined medians, every cell: the latency ceiling on the worst cell, a ratio on the cell
    // where it is lowest.
    const judged: { text: string; met: boolean }[] = []
    for (const t of targets) {
      if (!t.target.startsWith(`${label} `)) continue
      const ceiling = /warm pair ≤ ([\d.]+) ns/.exec(t.target)
      const ratio = /≥ ([\d.]+)× faster than (\S+)/.exec(t.target)
      if (ceiling) judged.push({ text: `≤ ${ceiling[1]} ns`, met: worst.median_ns <= Number(ceiling[1]) })
      else if (ratio) {
        let lowest: { ratio: number; cell: NativeFigure } | undefined
        for (const c of cells) {
          const p = peer(ratio[2]!, c.size, c.live_blocks)
          if (p !== undefined && (!lowest || p / c.median_ns < lowest.ratio)) lowest = { ratio: p / c.median_ns, cell: c }
        }
        if (lowest)
          judged.push({
            text: `≥ ${ratio[1]}× faster than ${ratio[2]} (lowest ${lowest.ratio.toFixed(lowest.ratio >= 100 ? 0 : 1)}×, ${cellName(lowest.cell.size, lowest.cell.live_blocks)})`,
            met: lowest.ratio >= Number(ratio[1]),
          })
      }
    }
    figures.push({
      area: 'pair latency',
      what: `${label}: warm alloc+free pair, worst of ${cells.length} cells (${cellName(worst.size, worst.live_blocks)}, ${worst.backing})`,
      value: worst.median_ns,
      unit: 'ns',
      peers,
      better: 'lower',
      target: judged.length ? judged.map((j) => `${j.text}${judged.length > 1 ? `: ${j.met ? 'yes' : 'no'}` : ''}`).join('; ') : undefined,
      met: judged.length ? judged.every((j) => j.met) : undefined,
      note: gpu ? undefined : 'no GPU here (see the last rows)',
    })
    // Tracing: the cell where it costs most, against the same allocator with tracing off. On and
    // off alternate within a run so that the machine's state weighs on both alike (the H100 host
    // switches between a fast and a slow state, 9 and 16 ns for the same pair): the ratio is each
    // run's own, and its median over runs is what the target is judged on.
    let traced: { on: NativeFigure; off: NativeFigure; ratio: number } | undefined
    for (const off of cells) {
      const on = all.get(`strategy|${label}|${off.backing}|${off.size}|${off.live_blocks}|true`)
      if (!on) continue
      const ratio = tracingRatio(runs, label, off)
      if (!traced || ratio > traced.ratio) traced = { on, off, ratio }
    }
    if (traced)
      figures.push({
        area: 'pair latency',
        what: `${label}: tracing on (events into a ring), worst of ${cells.length} cells (${cellName(traced.on.size, traced.on.live_blocks)}); on ÷ off ${traced.ratio.toFixed(2)}×${runs.length > 1 ? `, the median of each run's own ratio over ${runs.length} runs` : ''}`,
        value: traced.on.median_ns,
        unit: 'ns',
        peers: [{ name: 'tracing off, same cell', value: traced.off.median_ns }],
        better: 'lower',
        target: '≤ 1.3× tracing off',
        met: traced.ratio <= 1.3,
      })
  }
  // In-kernel allocation (GPU only): device_bump beside one atomicAdd per allocation and device malloc.
  const device = [...all.values()].filter((f) => f.kind === 'device')
  const bump = device.find((f) => f.subject.startsWith('device_bump_alloc (warp'))
  if (bump)
    figures.push({
      area: 'pair latency',
      what: `device_bump in a kernel: ns per allocation, ${bump.note ?? ''}`,
      value: bump.median_ns,
      unit: 'ns',
      peers: device.filter((f) => f.subject.includes('(peer)')).map((f) => ({ name: f.subject.replace(' (peer)', ''), value: f.median_ns })),
      better: 'lower',
    })
  return figures
}

function replayFigures(r: ReplayRun): Figure[] {
  return r.rows.map((row) => {
    const rate = 1e3 / row.replay_ns_per_event
    return {
      area: 'replay',
      what: `${row.label}: replay of ${(r.events / 1e6).toLocaleString('en')} M events, layout and metrics recorded (${row.parameters})`,
      value: rate,
      unit: 'M events/s',
      peers: [
        { name: 'the strategy alone, nothing recorded', value: 1e3 / row.strategy_alone_ns_per_event },
        { name: 'bare loop over the events, no allocator', value: 1e3 / r.bare_loop_ns_per_event },
      ],
      better: 'higher',
      target: row.target_events_per_second ? `≥ ${row.target_events_per_second / 1e6} M events/s` : undefined,
      met: row.target_events_per_second ? rate * 1e6 >= row.target_events_per_second : undefined,
      note: row.failures ? `${row.failures} failures` : undefined,
    }
  })
}

// --- the table ----------------------------------------------------------------------------------

function number(v: number, unit: string): string {
  if (unit === 'ns' && v >= 1e6) return `${(v / 1e6).toPrecision(3)} ms`
  if (unit === 'ns' && v >= 1000) return `${(v / 1000).toPrecision(3)} µs`
  if (unit === 'ms' && v >= 1000) return `${(v / 1000).toPrecision(3)} s`
  const digits = v >= 100 ? 0 : v >= 10 ? 1 : 2
  return `${v.toFixed(digits)} ${unit}`
}

function versus(f: Figure, peer: number): string {
  const ratio = f.better === 'lower' ? peer / f.value : f.value / peer
  if (!Number.isFinite(ratio) || ratio <= 0) return '—'
  const r = ratio >= 1 ? ratio : 1 / ratio
  return `${r >= 100 ? r.toFixed(0) : r.toFixed(r >= 10 ? 1 : 2)}× ${ratio >= 1 ? 'better' : 'worse'}`
}

function table(figures: Figure[], skipped: string[]): string {
  const cell = (s: string) => s.replace(/\|/g, '\\|')
  const lines = ['| area | figure | vramscope | peer, same run | vramscope vs peer | target | met |', '|---|---|---:|---|---|---|---|']
  for (const f of figures) {
    const peers = f.peers.length ? f.peers.map((p) => `${p.name}: ${number(p.value, f.unit)}`).join('<br>') : (f.note ?? '—')
    const ratios = f.peers.length ? f.peers.map((p) => versus(f, p.value)).join('<br>') : '—'
    const met = f.met === undefined ? '—' : f.met ? 'yes' : '**no**'
    lines.push(`| ${f.area} | ${cell(f.what)} | ${number(f.value, f.unit)} | ${cell(peers)} | ${ratios} | ${cell(f.target ?? '—')} | ${met} |`)
  }
  for (const s of skipped) lines.push(`| ${cell(s.split(': ')[0]!)} | not measured | — | ${cell(s.split(': ').slice(1).join(': '))} | — | — | — |`)
  return lines.join('\n')
}

// --- the parts ----------------------------------------------------------------------------------

/** memory_viz's file, or why there is none. */
function findMemoryViz(o: Options): { path: string } | { why: string } {
  if (o.memoryViz) return existsSync(o.memoryViz) ? { path: o.memoryViz } : { why: `no file ${o.memoryViz}` }
  const found = spawnSync('python3', ['-c', 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "utils", "viz", "MemoryViz.js"))'], {
    encoding: 'utf8',
  })
  const path = found.status === 0 ? found.stdout.trim() : ''
  if (path && existsSync(path)) return { path }
  return { why: "no MemoryViz.js: give --memory-viz PATH (PyTorch's public torch/utils/viz/MemoryViz.js) or install torch" }
}

function chromium(): string | undefined {
  for (const p of [process.env['CHROMIUM'], '/usr/bin/chromium', '/usr/bin/chromium-browser']) if (p && existsSync(p)) return p
  return undefined
}

/** Runs the selected parts; each leaves its JSON in `out` (what `collect` reads) or a reason it did not. */
async function measure(o: Options, out: string): Promise<string[]> {
  const skipped: string[] = []
  const selected = PARTS.filter((p) => o.only.has(p))
  const announce = (part: Part, what: string) => process.stderr.write(`\n=== [${selected.indexOf(part) + 1}/${selected.length}] ${what}\n`)
  if (o.only.has('pairs')) {
    for (let r = 1; r <= o.runs; r++) {
      announce('pairs', `allocator pair latency, run ${r} of ${o.runs} (native/scripts/bench.sh)`)
      const file = join(out, `pairs-${r}.json`)
      const args = [join(ROOT, 'native', 'scripts', 'bench.sh'), '--json', file, '--clock', o.clock]
      if (o.quick) args.push('--quick')
      const code = await run('bash', args)
      if (code !== 0 || !existsSync(file)) {
        skipped.push(`pair latency: native/scripts/bench.sh exited ${code}`)
        break
      }
    }
  }
  if (o.only.has('torch')) {
    announce('torch', "PyTorch's C++ caching allocator, the same cells (scripts/gpu/torch_caching_pair.py)")
    const probe = spawnSync('python3', ['-c', 'import torch; print(torch.cuda.is_available())'], { encoding: 'utf8' })
    const why = probe.status !== 0 ? 'PyTorch is not installed here' : probe.stdout.trim() !== 'True' ? 'PyTorch has no CUDA device here' : undefined
    if (why) skipped.push(`pair latency: PyTorch's allocator as a peer: ${why}`)
    else {
      const code = await run('python3', [join(ROOT, 'scripts', 'gpu', 'torch_caching_pair.py'), join(out, 'torch-pairs.json')])
      if (code !== 0) skipped.push(`pair latency: PyTorch's allocator as a peer: torch_caching_pair.py exited ${code}`)
    }
  }
  if (o.only.has('replay')) {
    announce('replay', 'replay throughput (vramscope_bench replay)')
    const args = [join(ROOT, 'native', 'scripts', 'bench.sh'), 'replay', '--json', join(out, 'replay.json'), '--clock', o.clock]
    if (o.quick) args.push('--quick')
    const code = await run('bash', args)
    if (code !== 0) skipped.push(`replay: vramscope_bench replay exited ${code}`)
  }
  if (o.only.has('load')) {
    announce('load', 'opening a trace file (scripts/bench/trace-file.ts)')
    const code = await tsx('trace-file.ts', ['--json', join(out, 'trace-load.json'), ...(o.quick ? ['--events', '200000', '--runs', '3'] : [])])
    if (code !== 0) skipped.push(`trace load: trace-file.ts exited ${code}`)
  }
  const viz = findMemoryViz(o)
  if (o.only.has('import')) {
    announce('import', "PyTorch snapshot import vs memory_viz's unpickler (scripts/bench/import-pytorch.ts)")
    const args = ['--clock', o.clock, '--runs', o.quick ? '11' : '61', '--json', join(out, 'import.json')]
    if ('path' in viz) args.push('--peer', viz.path)
    else skipped.push(`import: memory_viz's unpickler as a peer: ${viz.why}`)
    const code = await tsx('import-pytorch.ts', args)
    if (code !== 0) skipped.push(`import: import-pytorch.ts exited ${code}`)
  }
  if (o.only.has('whatif')) {
    announce('whatif', "the what-if lab's grid on a 1 M-event trace (scripts/bench/whatif.ts)")
    const code = await tsx('whatif.ts', ['--json', join(out, 'whatif.json'), '--runs', o.quick ? '1' : '3'])
    if (code !== 0) skipped.push(`what-if lab: whatif.ts exited ${code}`)
  }
  if (o.only.has('ui')) {
    const browser = chromium()
    if (!browser) skipped.push('renderer: no Chromium here (/usr/bin/chromium, or CHROMIUM=PATH)')
    else {
      announce('ui', 'renderer in Chromium: frames, first paint, snapshots (scripts/bench/renderer.ts)')
      const args = ['--json', join(out, 'renderer.json')]
      if (o.quick) args.push('--runs', '1', '--only', 'frames,million')
      if ('path' in viz) {
        const peerDir = join(out, 'memviz-peer')
        mkdirSync(peerDir, { recursive: true })
        writeFileSync(join(peerDir, 'MemoryViz.js'), readFileSync(viz.path))
        args.push('--peer-dir', peerDir)
      } else skipped.push(`renderer: memory_viz's page as a peer: ${viz.why}`)
      const code = await tsx('renderer.ts', args, { CHROMIUM: browser })
      if (code !== 0) skipped.push(`renderer: renderer.ts exited ${code}`)
    }
  }
  writeFileSync(join(out, 'skipped.json'), JSON.stringify(skipped, null, 1))
  return skipped
}

/** The one table from whatever JSON the parts left in `dir`. */
function collect(dir: string): { header: string[]; figures: Figure[]; skipped: string[] } {
  const figures: Figure[] = []
  const header: string[] = []
  const read = <T>(name: string): T | undefined => (existsSync(join(dir, name)) ? (JSON.parse(readFileSync(join(dir, name), 'utf8')) as T) : undefined)
  const skipped = read<string[]>('skipped.json') ?? []
  const nativeRuns: NativeRun[] = []
  for (let r = 1; existsSync(join(dir, `pairs-${r}.json`)); r++) nativeRuns.push(read<NativeRun>(`pairs-${r}.json`)!)
  const torch = read<TorchPairs>('torch-pairs.json')
  if (nativeRuns.length) {
    figures.push(...pairFigures(nativeRuns, torch ?? 'not measured'))
    const m = nativeRuns[0]!.machine
    if (!m.gpu)
      skipped.push(`pair latency: the GPU peers (cudaMalloc, cudaMallocAsync, PyTorch's allocator) and the real backings: ${m.no_gpu_reason ?? 'no GPU'}`)
    header.push(
      `pair latency: ${m.cpu}, ${m.cores} cores${m.gpu ? `, ${m.gpu.name} (driver ${m.gpu.driver_version})` : ', no GPU'}; the median of ${nativeRuns.length} run${nativeRuns.length > 1 ? 's' : ''}, each the median of its repetitions${torch ? `; PyTorch ${torch.torch} on ${torch.device}` : ''}`,
    )
  }
  const replay = read<ReplayRun & { reps: number; clock: string }>('replay.json')
  if (replay) {
    figures.push(...replayFigures(replay))
    header.push(
      `replay (vramscope_bench replay): ${replay.events.toLocaleString('en')} events, the median of ${replay.reps} runs, ${replay.clock.includes('cpu') ? "the thread's CPU time" : 'wall time'}, on the machine of the run in ${dir}`,
    )
  }
  for (const name of ['trace-load.json', 'import.json', 'whatif.json', 'renderer.json']) {
    const f = read<FigureFile>(name)
    if (!f) continue
    figures.push(...f.figures)
    header.push(`${f.script}: ${f.cpu}, ${f.cores} cores, Node ${f.node}, load average ${f.loadAverage[0].toFixed(1)} at its start`)
  }
  return { header, figures, skipped }
}

/** Several runs' tables as one: a part's "not measured" line goes when another run measured it. */
function collectAll(dirs: string[]): { header: string[]; figures: Figure[]; skipped: string[] } {
  const runs = dirs.map(collect)
  const area = (skip: string) => skip.split(': ')[0]
  return {
    header: runs.flatMap((r) => r.header),
    figures: runs.flatMap((r) => r.figures),
    skipped: runs.flatMap((r, i) => r.skipped.filter((s) => !runs.some((other, j) => j !== i && other.figures.some((f) => f.area === area(s))))),
  }
}

async function main(): Promise<void> {
  const o = parseOptions(process.argv.slice(2))
  const out = o.from.length ? o.from.join(', ') : o.out || mkdtempSync(join(tmpdir(), 'vramscope-bench-'))
  if (!o.from.length) {
    mkdirSync(out, { recursive: true })
    await measure(o, out)
  }
  const { header, figures, skipped } = collectAll(o.from.length ? o.from : [out])
  const text = [
    `vramscope benchmarks${o.quick ? ' (--quick: rough figures)' : ''}, table made ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC on ${cpus()[0]?.model.trim() ?? 'an unknown CPU'} (${cpus().length} cores, load average ${loadavg()[0]!.toFixed(1)})`,
    ...header.map((h) => `- ${h}`),
    `- command: npm run bench${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}; each part's JSON in ${out}`,
    '',
    table(figures, skipped),
    '',
  ].join('\n')
  process.stdout.write(`\n${text}`)
  if (o.markdown) writeFileSync(o.markdown, text)
  if (!o.from.length) writeFileSync(join(out, 'table.md'), text)
}

await main()
