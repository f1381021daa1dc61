// Benchmark: the what-if lab's grid (src-main/services/whatif/whatif.ts) on a 1 M-event PyTorch
// trace, every configuration with its smallest-limit search, beside its peer measured in the same
// run: one replay of the same events through the PyTorch model with the recorded settings (what
// each of the grid's replays costs at most). Issue 16's target: the grid (at least 20
// configurations) in at most 30 s on the 2-core development machine; events per second per core
// reported. The trace is a real snapshot's request events (default: the what-if data set's
// gpt2_varshape__default, GPT-2 training at changing shapes on an H100) repeated until it holds
// 1 M events, each repeat a training run of its own: the blocks it left live are freed at its end.
//   npx tsx scripts/bench/whatif.ts [--file F.pickle] [--events N] [--runs R] [--json FILE]
import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { availableParallelism, tmpdir } from 'node:os'
import { join } from 'node:path'

import { openInput } from '../../src-main/services/import/open-input.ts'
import { replayTrace } from '../../src-main/services/replay/replay.ts'
import { EventKind, type RequestTrace } from '../../src-main/services/trace/model.ts'
import { runWhatif } from '../../src-main/services/whatif/whatif.ts'
import { FigureLog } from './figures.ts'

const arg = (name: string): string | undefined => {
  const i = process.argv.indexOf(`--${name}`)
  return i < 0 ? undefined : process.argv[i + 1]
}
const ROOT = join(import.meta.dirname, '..', '..')
const target = Number(arg('events') ?? 1_000_000)
const runs = Number(arg('runs') ?? 3)

/** `trace`'s events repeated until there are `n`, ids renumbered, each repeat's leftovers freed at its end. */
function tile(trace: RequestTrace, n: number): RequestTrace {
  const e = trace.events
  const m = e.kind.length
  const out = { kind: [] as number[], id: [] as number[], size: [] as number[], stream: [] as number[], time: [] as number[] }
  let base = 0
  let t0 = 0
  while (out.kind.length < n) {
    const live = new Map<number, number>()
    let maxId = 0
    for (let i = 0; i < m && out.kind.length < n; i++) {
      const k = e.kind[i]!
      if (k !== EventKind.alloc && k !== EventKind.free) continue
      const id = e.id[i]!
      if (k === EventKind.alloc) live.set(id, e.stream[i]!)
      else if (!live.delete(id)) continue
      if (id + 1 > maxId) maxId = id + 1
      out.kind.push(k)
      out.id.push(base + id)
      out.size.push(e.size[i]!)
      out.stream.push(e.stream[i]!)
      out.time.push(t0 + e.time[i]!)
    }
    const end = t0 + e.time[m - 1]!
    for (const [id, stream] of live) {
      if (out.kind.length >= n) break
      out.kind.push(EventKind.free)
      out.id.push(base + id)
      out.size.push(0)
      out.stream.push(stream)
      out.time.push(end)
    }
    base += maxId
    t0 = end + 1
  }
  const count = out.kind.length
  return {
    meta: trace.meta,
    tables: trace.tables,
    events: {
      kind: Uint8Array.from(out.kind),
      id: Uint32Array.from(out.id),
      size: Float64Array.from(out.size),
      stream: Uint32Array.from(out.stream),
      device: new Uint16Array(count),
      time: Float64Array.from(out.time),
      stack: new Int32Array(count).fill(-1),
      tag: new Int32Array(count).fill(-1),
    },
  }
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1]!

let file = arg('file')
let dir: string | undefined
if (file === undefined) {
  dir = mkdtempSync(join(tmpdir(), 'vramscope-whatif-bench-'))
  execFileSync('tar', ['xzf', join(ROOT, 'test/fixtures/pytorch/whatif-suite.tar.gz'), '-C', dir, 'whatif/gpt2_varshape__default.pickle'])
  file = join(dir, 'whatif', 'gpt2_varshape__default.pickle')
}
try {
  const input = await openInput(file)
  const trace = tile(input.trace, target)
  const events = trace.events.kind.length
  // The recorded layout's addresses belong to the original run only: the tiled trace replays without them.
  const tiled = { trace, strategies: [] }
  const cores = availableParallelism()
  const gridSeconds: number[] = []
  const peerRates: number[] = []
  let configs = 0
  let replays = 0
  let perCore = 0
  for (let r = 0; r < runs; r++) {
    const [peer] = await replayTrace(trace, [{ strategy: 'caching', params: { preset: 'pytorch' } }], { layout: false, fragmentation: false, buckets: 256 })
    peerRates.push(peer!.summary.eventsPerSecond)
    const result = await runWhatif(tiled, {})
    gridSeconds.push(result.elapsedMs / 1000)
    configs = result.rows.length
    replays = result.replays
    perCore = result.eventsPerSecondPerCore
    console.log(
      `run ${r + 1}: grid of ${configs} configurations, ${replays} replays of ${events.toLocaleString('en-US')} events in ${(result.elapsedMs / 1000).toFixed(1)} s ` +
        `(${(result.eventsPerSecondPerCore / 1e6).toFixed(2)} M events/s per core on ${cores} cores); one replay alone: ${(peer!.summary.eventsPerSecond / 1e6).toFixed(2)} M events/s`,
    )
  }
  const seconds = median(gridSeconds)
  console.log(`median: ${seconds.toFixed(1)} s for the grid (target ≤ 30 s), one replay ${(median(peerRates) / 1e6).toFixed(2)} M events/s`)
  const log = new FigureLog('whatif')
  log.add({
    area: 'what-if lab',
    what: `grid of ${configs} configurations with the smallest-limit search (${replays} replays) on a ${events.toLocaleString('en-US')}-event PyTorch trace, ${cores} cores`,
    value: seconds,
    unit: 's',
    peers: [{ name: 'one replay of the same events, PyTorch model, figures only (s)', value: events / median(peerRates) }],
    better: 'lower',
    target: '≤ 30 s',
    met: seconds <= 30,
    note: `${(perCore / 1e6).toFixed(2)} M events/s per core`,
  })
  log.writeIfAsked()
} finally {
  if (dir) rmSync(dir, { recursive: true, force: true })
}
