// A large torch.profiler trace (issue 33's target: a 1 GB trace opens in at most 15 s, in bounded
// memory): writes a Chrome trace of the shape export_chrome_trace gives with profile_memory=True
// and with_stack=True (three cpu_ops with their call stacks for each [memory] alloc and free, the
// Total Allocated and Total Reserved kept consistent), then opens it with `vramscope info --json`
// and, as the peer in the same run, with Python's json.load (what a script over such a trace does),
// each under /usr/bin/time for its wall time and peak resident memory. Alternating, medians.
//   npm run bench:kineto -- [--gb 1] [--runs 3] [--keep]
import { execFileSync } from 'node:child_process'
import { createWriteStream, existsSync, mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

const ROOT = join(import.meta.dirname, '..', '..')
const BIN = join(ROOT, 'bin', 'vramscope.mjs')
const option = (name: string): string | undefined => {
  const i = process.argv.indexOf(`--${name}`)
  return i < 0 ? undefined : process.argv[i + 1]
}
const GB = Number(option('gb') ?? 1)
const RUNS = Number(option('runs') ?? 3)
const TIMER = '/usr/bin/time'

const STACK = Array.from({ length: 6 }, (_, i) => `torch/nn/modules/module.py(${1700 + i}): _call_impl;train.py(${40 + i}): forward`).join(';')

/** Writes the trace; returns its bytes and how many CUDA memory events and the peak reserved it holds. */
async function writeTrace(path: string, bytes: number): Promise<{ bytes: number; memoryEvents: number; peakReserved: number }> {
  const out = createWriteStream(path, { highWaterMark: 1 << 22 })
  let written = 0
  let pending: string[] = []
  let pendingBytes = 0
  const flush = async () => {
    const text = pending.join('')
    pending = []
    pendingBytes = 0
    written += Buffer.byteLength(text)
    if (!out.write(text)) await new Promise<void>((r) => out.once('drain', () => r()))
  }
  const put = async (s: string) => {
    pending.push(s)
    pendingBytes += s.length
    if (pendingBytes > 1 << 22) await flush()
  }
  await put('{\n  "schemaVersion": 1,\n  "deviceProperties": [{"id": 0, "name": "NVIDIA H200", "totalGlobalMem": 150754820096}],\n  "traceEvents": [\n')
  const SEG = 2 << 20
  const live: { addr: number; size: number }[] = []
  let allocated = 0
  let reserved = 0
  let peakReserved = 0
  let memoryEvents = 0
  let ts = 1_700_000_000_000
  let next = 0x7f0000000000
  let first = true
  const memory = (addr: number, delta: number) => {
    memoryEvents++
    allocated += delta
    // Reserved grows in 2 MiB segments as allocated needs, and stays: a caching allocator's curve.
    while (reserved < allocated) reserved += SEG
    if (reserved > peakReserved) peakReserved = reserved
    return `  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": ${ts}, "args": {"Total Reserved": ${reserved}, "Total Allocated": ${allocated}, "Bytes": ${delta}, "Device Id": 0, "Device Type": 1, "Addr": ${addr}}}`
  }
  for (let i = 0; written + pendingBytes < bytes; i++) {
    ts += 3
    const kind = i % 5
    let event: string
    if (kind < 3) {
      event = `  {"ph": "X", "cat": "cpu_op", "name": "aten::op_${i % 97}", "pid": 1, "tid": 1, "ts": ${ts}, "dur": 5, "args": {"External id": ${i}, "Input Dims": [[2048, 8000], [2048]], "Input type": ["float", "long int"], "Ev Idx": 0, "Call stack": "${STACK}"}}`
    } else if (kind === 3 || live.length === 0) {
      const size = 512 * (1 + ((i * 7919) % 4096))
      live.push({ addr: next, size })
      event = memory(next, size)
      next += size
    } else {
      // Frees lag the allocs (about a thousand live at a time), in an order other than the allocs'.
      if (live.length < 1000 && (i & 8) === 0) continue
      const k = (i * 31) % live.length
      const block = live[k]!
      live[k] = live[live.length - 1]!
      live.pop()
      event = memory(block.addr, -block.size)
    }
    await put(`${first ? '' : ',\n'}${event}`)
    first = false
  }
  await put('\n  ]\n}\n')
  await flush()
  await new Promise<void>((r, j) => out.end((e?: Error | null) => (e ? j(e) : r())))
  return { bytes: statSync(path).size, memoryEvents, peakReserved }
}

interface Timed {
  seconds: number
  peakKiB: number
  stdout: string
}

function timed(command: string, args: string[]): Timed {
  const report = join(tmpdir(), `vramscope-bench-time-${process.pid}`)
  const stdout = execFileSync(TIMER, ['-f', '%e %M', '-o', report, command, ...args], { encoding: 'utf8', maxBuffer: 1 << 26 })
  const [seconds, peakKiB] = execFileSync('cat', [report], { encoding: 'utf8' }).trim().split('\n').at(-1)!.split(' ').map(Number)
  rmSync(report, { force: true })
  return { seconds: seconds!, peakKiB: peakKiB!, stdout }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
const mib = (kib: number) => `${Math.round(kib / 1024)} MiB`

async function main(): Promise<void> {
  if (!existsSync(TIMER)) throw new Error(`${TIMER} is needed for the peak memory (Debian: apt-get install time)`)
  const dir = mkdtempSync(join(tmpdir(), 'vramscope-bench-kineto-'))
  try {
    const path = join(dir, 'profile.json')
    const t0 = performance.now()
    const made = await writeTrace(path, GB * 1e9)
    console.log(
      `Profiler trace: ${(made.bytes / 1e9).toFixed(2)} GB, ${made.memoryEvents.toLocaleString('en')} CUDA memory events, written in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
    )
    console.log(
      `machine: ${execFileSync('nproc', { encoding: 'utf8' }).trim()} cores, load ${execFileSync('cat', ['/proc/loadavg'], { encoding: 'utf8' }).trim()}`,
    )
    const ours: Timed[] = []
    const peer: Timed[] = []
    const python = 'import json, sys; d = json.load(open(sys.argv[1])); print(sum(1 for e in d["traceEvents"] if e.get("name") == "[memory]"))'
    for (let r = 0; r < RUNS; r++) {
      const v = timed(process.execPath, [BIN, 'info', path, '--json'])
      const info = JSON.parse(v.stdout) as { events: number; recordedReserved?: { peak: number } }
      if (info.events !== made.memoryEvents) throw new Error(`vramscope read ${info.events} events, the trace holds ${made.memoryEvents}`)
      if (info.recordedReserved?.peak !== made.peakReserved)
        throw new Error(`vramscope's recorded peak ${info.recordedReserved?.peak}, the trace's ${made.peakReserved}`)
      ours.push(v)
      const p = timed('python3', ['-c', python, path])
      if (Number(p.stdout.trim()) !== made.memoryEvents) throw new Error(`json.load counted ${p.stdout.trim()} memory events`)
      peer.push(p)
      console.log(`  run ${r + 1}: vramscope info ${v.seconds.toFixed(1)} s, ${mib(v.peakKiB)}; python json.load ${p.seconds.toFixed(1)} s, ${mib(p.peakKiB)}`)
    }
    const s = median(ours.map((t) => t.seconds))
    console.log(
      `vramscope info (open, import, summary), median of ${RUNS}: ${s.toFixed(1)} s, peak ${mib(median(ours.map((t) => t.peakKiB)))}   target 15 s: ${s <= 15 ? 'met' : 'MISSED'}`,
    )
    console.log(
      `peer, python json.load (parse only), median of ${RUNS}: ${median(peer.map((t) => t.seconds)).toFixed(1)} s, peak ${mib(median(peer.map((t) => t.peakKiB)))}`,
    )
  } finally {
    if (!process.argv.includes('--keep')) rmSync(dir, { recursive: true, force: true })
  }
}

await main()
