// Benchmark: opening a 1 M-event trace file with readTrace (target: <= 300 ms, issue 3), beside two
// peers measured in the same run on the same events:
//   - raw columns: the eight event columns as one bare little-endian binary file, read and viewed
//     as typed arrays with no header, checksum or validation. The floor any format can reach.
//   - JSON: the same columns as a JSON object of arrays, read, JSON.parse'd and copied into typed
//     arrays. What a trace format without a binary encoding would cost.
// Also a recording written by TraceWriter (many small chunks, so its columns are concatenated).
//   npx tsx scripts/bench/trace-file.ts [--events N] [--runs R] [--json FILE]
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'

import { concatBytes } from '../../src-shared/bytes.ts'
import { TraceWriter, readTrace, writeTrace } from '../../src-main/services/trace/file.ts'
import { EventKind, allocateEvents, type RequestTrace, type TraceEvents } from '../../src-main/services/trace/model.ts'
import { FigureLog } from './figures.ts'

function option(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`)
  return i >= 0 ? Number(process.argv[i + 1]) : fallback
}

const EVENTS = option('events', 1_000_000)
const RUNS = option('runs', 7)

/** Allocs and frees of a working set of about 5000 blocks, as a training loop makes. */
function generate(n: number): RequestTrace {
  const events = allocateEvents(n)
  const live: number[] = []
  let next = 0
  let seed = 12345
  const rand = () => (seed = (seed * 1103515245 + 12345) >>> 0) / 4294967296
  for (let i = 0; i < n; i++) {
    events.time[i] = i * 850 + Math.floor(rand() * 800)
    events.stream[i] = i % 4
    if (live.length > 5000 || (live.length > 0 && rand() < 0.48)) {
      const k = Math.floor(rand() * live.length)
      events.kind[i] = EventKind.free
      events.id[i] = live[k]!
      live[k] = live[live.length - 1]!
      live.pop()
    } else {
      events.kind[i] = EventKind.alloc
      events.id[i] = next
      live.push(next++)
      events.size[i] = 512 * (1 + Math.floor(rand() * 200_000))
      events.stack[i] = Math.floor(rand() * 64)
    }
  }
  const frames = Array.from({ length: 128 }, (_, i) => ({ name: `layer_${i}.forward`, filename: 'model.py', line: 10 + i }))
  return {
    meta: { source: 'synthetic', warnings: [], properties: { generator: 'scripts/bench/trace-file.ts' } },
    events,
    tables: {
      streams: ['0', '0x1', '0x2', '0x3'],
      frames,
      stacks: Array.from({ length: 64 }, (_, i) => Uint32Array.from([i, i + 1, i + 2])),
      tags: [],
      markers: [],
    },
  }
}

const COLUMNS = ['kind', 'id', 'size', 'stream', 'device', 'time', 'stack', 'tag'] as const

function rawBytes(e: TraceEvents): Uint8Array {
  // Widest columns first keeps every column aligned for zero-copy views.
  const order = ['size', 'time', 'id', 'stream', 'stack', 'tag', 'device', 'kind'] as const
  return concatBytes(
    order.map((k) => new Uint8Array(e[k].buffer, e[k].byteOffset, e[k].byteLength)),
    true,
  )
}

async function readRaw(path: string, n: number): Promise<TraceEvents> {
  const b = await readFile(path)
  // A file this large gets its own (unpooled, aligned) buffer: view it in place, copy only if not.
  const aligned = b.byteOffset % 8 === 0 ? b : Buffer.from(b)
  const buffer = aligned.buffer as ArrayBuffer
  let at = aligned.byteOffset
  const take = <T>(make: (buffer: ArrayBuffer, offset: number, length: number) => T, bytes: number): T => {
    const view = make(buffer, at, n)
    at += n * bytes
    return view
  }
  const size = take((b, o, l) => new Float64Array(b, o, l), 8)
  const time = take((b, o, l) => new Float64Array(b, o, l), 8)
  const id = take((b, o, l) => new Uint32Array(b, o, l), 4)
  const stream = take((b, o, l) => new Uint32Array(b, o, l), 4)
  const stack = take((b, o, l) => new Int32Array(b, o, l), 4)
  const tag = take((b, o, l) => new Int32Array(b, o, l), 4)
  const device = take((b, o, l) => new Uint16Array(b, o, l), 2)
  const kind = take((b, o, l) => new Uint8Array(b, o, l), 1)
  return { kind, id, size, stream, device, time, stack, tag }
}

async function readJson(path: string): Promise<TraceEvents> {
  const parsed = JSON.parse(await readFile(path, 'utf8')) as Record<(typeof COLUMNS)[number], number[]>
  return {
    kind: Uint8Array.from(parsed.kind),
    id: Uint32Array.from(parsed.id),
    size: Float64Array.from(parsed.size),
    stream: Uint32Array.from(parsed.stream),
    device: Uint16Array.from(parsed.device),
    time: Float64Array.from(parsed.time),
    stack: Int32Array.from(parsed.stack),
    tag: Int32Array.from(parsed.tag),
  }
}

async function time(runs: number, fn: () => Promise<unknown>): Promise<{ median: number; min: number }> {
  await fn() // warm-up: JIT and page cache
  const samples: number[] = []
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now()
    await fn()
    samples.push(performance.now() - t0)
  }
  samples.sort((a, b) => a - b)
  return { median: samples[Math.floor(samples.length / 2)]!, min: samples[0]! }
}

function checkSame(a: TraceEvents, b: TraceEvents, what: string): void {
  for (const k of COLUMNS) {
    if (a[k].length !== b[k].length) throw new Error(`${what}: ${k} has ${b[k].length} rows, expected ${a[k].length}`)
    for (let i = 0; i < a[k].length; i += 9973) if (a[k][i] !== b[k][i]) throw new Error(`${what}: ${k}[${i}] differs`)
  }
}

async function main(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'vramscope-bench-'))
  try {
    const trace = generate(EVENTS)
    const vramscope = join(dir, 'trace.vramscope')
    const recording = join(dir, 'recording.vramscope')
    const raw = join(dir, 'trace.raw')
    const json = join(dir, 'trace.json')

    let t0 = performance.now()
    await writeTrace(vramscope, trace)
    const writeMs = performance.now() - t0
    const flushes = 64
    const writer = await TraceWriter.create(recording, trace.meta, { flushIntervalMs: 60_000, flushEvents: Math.ceil(EVENTS / flushes) })
    for (const s of trace.tables.streams) writer.stream(s)
    for (const s of trace.tables.stacks) writer.stack(Array.from(s, (f) => trace.tables.frames[f]!))
    writer.appendEvents(trace.events)
    await writer.close()
    await writeFile(raw, rawBytes(trace.events))
    await writeFile(json, JSON.stringify(Object.fromEntries(COLUMNS.map((k) => [k, Array.from(trace.events[k])]))))

    checkSame(trace.events, (await readTrace(vramscope)).trace.events, 'readTrace')
    checkSame(trace.events, (await readTrace(recording)).trace.events, 'readTrace (recording)')
    checkSame(trace.events, await readRaw(raw, EVENTS), 'raw columns')
    checkSame(trace.events, await readJson(json), 'JSON')

    const mib = async (p: string) => ((await stat(p)).size / 2 ** 20).toFixed(1)
    const rows: [string, string, { median: number; min: number }][] = []
    rows.push(['readTrace, written whole (vramscope)', await mib(vramscope), await time(RUNS, () => readTrace(vramscope))])
    rows.push([`readTrace, recording in ${flushes}+ chunks`, await mib(recording), await time(RUNS, () => readTrace(recording))])
    rows.push(['peer: raw columns, no checks', await mib(raw), await time(RUNS, () => readRaw(raw, EVENTS))])
    rows.push(['peer: JSON.parse of the columns', await mib(json), await time(Math.min(RUNS, 3), () => readJson(json))])

    const [l1, l5] = loadavg()
    console.log(`trace file open, ${EVENTS.toLocaleString('en')} events, median of ${RUNS} runs after a warm-up (page cache warm)`)
    console.log(`node ${process.version}, load average ${l1!.toFixed(2)} / ${l5!.toFixed(2)} (1 / 5 min)`)
    console.log('')
    console.log(`${'what'.padEnd(42)} ${'MiB'.padStart(6)} ${'median ms'.padStart(10)} ${'min ms'.padStart(8)}`)
    for (const [what, size, t] of rows)
      console.log(`${what.padEnd(42)} ${size.padStart(6)} ${t.median.toFixed(1).padStart(10)} ${t.min.toFixed(1).padStart(8)}`)
    const open = rows[0]![2].median
    console.log('')
    console.log(`writeTrace: ${writeMs.toFixed(0)} ms (one run)`)
    console.log(
      `target <= 300 ms: ${open <= 300 ? 'met' : 'NOT met'} (${open.toFixed(1)} ms); ${(open / rows[2]![2].median).toFixed(1)}x the raw floor, ${(rows[3]![2].median / open).toFixed(1)}x faster than JSON`,
    )
    const log = new FigureLog('scripts/bench/trace-file.ts')
    const peers = [
      { name: 'bare binary columns, only viewed (the floor)', value: rows[2]![2].median },
      { name: 'JSON.parse of the same columns', value: rows[3]![2].median },
    ]
    const events = `${(EVENTS / 1e6).toLocaleString('en')} M events`
    log.add({
      area: 'trace load',
      what: `open a trace file (readTrace), ${events}, ${rows[0]![1]} MiB`,
      value: open,
      unit: 'ms',
      peers,
      better: 'lower',
      target: '≤ 300 ms',
      met: open <= 300,
    })
    log.add({
      area: 'trace load',
      what: `open a recording written in ${flushes}+ flushes, ${events}`,
      value: rows[1]![2].median,
      unit: 'ms',
      peers,
      better: 'lower',
      target: '≤ 300 ms',
      met: rows[1]![2].median <= 300,
    })
    log.writeIfAsked()
  } finally {
    await rm(dir, { recursive: true, force: true })
  }
}

await main()
