// Benchmark: the replays the app runs when it opens the renderer benchmark's 1 M-event trace
// (scripts/bench/renderer-inputs.ts), through the real addon with layout as the app asks for it (no splits or merges):
// each default strategy alone (sized from the trace as the app sizes it), then the app's second
// job (every default strategy after the first) side by side, beside the same strategies one after
// another in the same run.
//   npx tsx scripts/bench/app-replay.ts [--runs N] [--also cuda_malloc,...]
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'

import { DEFAULT_STRATEGIES } from '../../src-main/services/app-session.ts'
import { sizedUnlessRecorded } from '../../src-main/services/replay/replay-input.ts'
import { replayTrace, type ReplayTarget } from '../../src-main/services/replay/replay.ts'
import { parseStrategySpecs } from '../../src-main/services/replay/strategy-spec.ts'
import { readTrace } from '../../src-main/services/trace/file.ts'
import { writeRendererInputs } from './renderer-inputs.ts'

function option(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`)
  return i >= 0 ? process.argv[i + 1] : undefined
}

const RUNS = Number(option('runs') ?? 3)
/** What the app's replay jobs ask for (AppSession.startReplay): layouts without splits and merges. */
const APP_OPTIONS = { layout: true, structureEvents: false } as const
const ALSO = option('also') ?? 'cuda_malloc'

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!
const ms = (v: number) => `${v.toFixed(0)} ms`

async function timed(run: () => Promise<unknown>): Promise<number[]> {
  const times: number[] = []
  for (let i = 0; i < RUNS; i++) {
    const t0 = performance.now()
    await run()
    times.push(performance.now() - t0)
  }
  return times
}

const inputs = await writeRendererInputs(join(tmpdir(), 'vramscope-bench-ui'))
const { trace } = await readTrace(inputs.millionEvents)
const input = { trace, strategies: [] }
const target = (spec: ReturnType<typeof parseStrategySpecs>[number]): ReplayTarget => {
  const sized = sizedUnlessRecorded(spec, input).spec
  return { label: sized.label, strategy: sized.strategy, params: sized.params }
}
const defaults = parseStrategySpecs([DEFAULT_STRATEGIES], 'strategies').map(target)
const also = ALSO === '' ? [] : parseStrategySpecs([ALSO], 'strategies').map(target)

console.log(`App replays (with layout) of ${inputs.millionEvents}: ${trace.events.kind.length} events, median of ${RUNS}`)
console.log(
  `load average ${loadavg()
    .map((v) => v.toFixed(2))
    .join(' ')}`,
)
const alone = new Map<string, number[]>()
for (const t of [...defaults, ...also]) {
  const times = await timed(() => replayTrace(trace, [t], APP_OPTIONS))
  alone.set(t.label, times)
  console.log(`  ${t.label.padEnd(40)} ${ms(median(times)).padStart(9)}   (runs ${times.map(ms).join(', ')})`)
}
const rest = defaults.slice(1)
const sideBySide = await timed(() => replayTrace(trace, rest, APP_OPTIONS))
const oneAfterAnother = await timed(async () => {
  for (const t of rest) await replayTrace(trace, [t], APP_OPTIONS)
})
console.log(
  `  the app's second job (${rest.map((t) => t.label).join(', ')}): side by side ${ms(median(sideBySide))}` +
    ` | peer, one after another in the same run: ${ms(median(oneAfterAnother))} (${(median(oneAfterAnother) / median(sideBySide)).toFixed(2)}×)`,
)
console.log(
  `load average after ${loadavg()
    .map((v) => v.toFixed(2))
    .join(' ')}`,
)
