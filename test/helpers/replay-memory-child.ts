// Replays an N-event synthetic trace through every strategy (and preset) in this process, layout
// off, and prints one JSON line: resident memory after the trace was built and at the end (peak,
// from getrusage), and each strategy's time and summary. Run by replay-memory.test.ts in a child so
// that its peak RSS is this replay's alone.
//   node --import tsx replay-memory-child.ts EVENTS
import { listStrategies } from '../../src-main/services/replay/allocators.ts'
import { replayTrace, type ReplayTarget } from '../../src-main/services/replay/replay.ts'
import { allocateEvents, EventKind, type RequestTrace } from '../../src-main/services/trace/model.ts'
import { random } from './trace-samples.ts'

const n = Number(process.argv[2])
if (!Number.isSafeInteger(n) || n <= 0) throw new Error('usage: replay-memory-child.ts EVENTS')

/** Allocs and frees of at most 4000 live blocks (256 B to 4 MiB, log-uniform), 3 streams, a marker every 10 000 events. */
function bigTrace(count: number): RequestTrace {
  const rand = random(7)
  const events = allocateEvents(count)
  const live = new Uint32Array(4000)
  let liveCount = 0
  let nextId = 0
  let markers = 0
  for (let i = 0; i < count; i++) {
    events.time[i] = i * 100
    if (i % 10_000 === 9_999) {
      events.kind[i] = EventKind.marker
      events.id[i] = markers++
    } else if (liveCount === live.length || (liveCount > 0 && rand() < 0.5)) {
      const pick = Math.floor(rand() * liveCount)
      events.kind[i] = EventKind.free
      events.id[i] = live[pick]!
      events.stream[i] = live[pick]! % 3
      live[pick] = live[--liveCount]!
    } else {
      events.kind[i] = EventKind.alloc
      events.id[i] = nextId
      events.size[i] = Math.round(256 * 2 ** (rand() * 14))
      events.stream[i] = nextId % 3
      live[liveCount++] = nextId++
    }
  }
  return {
    meta: { source: 'synthetic', warnings: [], properties: {} },
    events,
    tables: { streams: ['0', '1', '2'], frames: [], stacks: [], tags: [], markers: Array.from({ length: markers }, (_, k) => `step ${k}`) },
  } as unknown as RequestTrace
}

const rssMiB = () => process.resourceUsage().maxRSS / 1024
const trace = bigTrace(n)
const afterTrace = rssMiB()
const targets: ReplayTarget[] = []
for (const info of listStrategies()) {
  targets.push({ strategy: info.name })
  if (info.name === 'caching') targets.push({ strategy: 'caching', params: { preset: 'pytorch' } })
}
const strategies = []
for (const target of targets) {
  const started = performance.now()
  const [result] = await replayTrace(trace, [target], { layout: false })
  const ms = performance.now() - started
  const s = result!.summary
  strategies.push({
    label: result!.label,
    ms: Math.round(ms),
    eventsPerSecond: Math.round(s.events / (ms / 1000)),
    events: s.events,
    allocs: s.allocs,
    failures: s.failures,
    peakReserved: s.peakReserved,
    rssMiB: Math.round(rssMiB()),
  })
}
process.stdout.write(`${JSON.stringify({ events: n, afterTraceMiB: Math.round(afterTrace), peakMiB: Math.round(rssMiB()), strategies })}\n`)
