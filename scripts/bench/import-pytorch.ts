// Benchmark: importing a PyTorch memory snapshot (pickle -> request trace + recorded layout) beside
// PyTorch's own memory_viz unpickler (torch/utils/viz/MemoryViz.js, which only unpickles), on the
// same bytes in the same run. Issue 3's target: our import at least 3x faster. The import is the
// pickle reader's fast lane wherever it takes the file (the output says which lane took each file).
//   npx tsx scripts/bench/import-pytorch.ts [--file F.pickle]... [--runs R] [--warmup W] [--clock wall|cpu] [--peer MemoryViz.js] [--json FILE]
// The peer's code is not in this repository: give the path of a MemoryViz.js from a PyTorch
// checkout or wheel with --peer or MEMORY_VIZ_JS; its unpickle() function is taken from it and run.
// Without one the peer is not measured, and the output says so. Medians and minima of R runs. The
// contenders take turns in blocks of a few runs, so that load on the machine falls on all alike;
// each block opens with one run that is not timed, which pays the collection of the garbage the
// contender before left (forcing a collection before each run is no fairer: V8 then drops the type
// feedback of code loaded through tsx, and ours would run unoptimized). Before a file's timed runs
// every contender runs --warmup times (default 10) on it, so that the first file's figures are not
// those of code still being compiled; all contenders get the same treatment. The import and the
// peer are measured first, over all files, the breakdown (general path, unpickling) after them.
import { readFileSync } from 'node:fs'
import { loadavg } from 'node:os'
import { basename, join } from 'node:path'

import { decodeFast } from '../../src-main/services/import/pytorch/pickle-reader.ts'
import { parsePytorchSnapshot } from '../../src-main/services/import/pytorch/index.ts'
import { MemoReferenceScanner, unpickle } from '../../src-main/services/import/pytorch/pickle-reader.ts'
import { FigureLog } from './figures.ts'

function options(name: string): string[] {
  const values: string[] = []
  process.argv.forEach((a, i) => {
    if (a === `--${name}` && process.argv[i + 1] !== undefined) values.push(process.argv[i + 1]!)
  })
  return values
}

const root = join(import.meta.dirname, '..', '..')
const files =
  options('file').length > 0
    ? options('file')
    : ['convnet_varimg', 'inference_mixed', 'mlp_varbatch', 'transformer_varseq'].map((n) => join(root, 'test', 'fixtures', 'pytorch', `${n}.pickle`))
const runs = Number(options('runs')[0] ?? 31)
const warmup = Number(options('warmup')[0] ?? 10)
const clock = options('clock')[0] ?? 'wall'
const peerPath = options('peer')[0] ?? process.env['MEMORY_VIZ_JS']

const now =
  clock === 'cpu'
    ? () => {
        const c = process.cpuUsage()
        return (c.user + c.system) / 1000
      }
    : () => performance.now()

/** Index just past the brace that closes the one at `open`, skipping strings, templates and comments. */
function functionEnd(text: string, open: number): number {
  // Each entry: the brace depth at which a template literal's ${ ... } returns to the template.
  const templates: number[] = []
  let depth = 0
  for (let i = open; i < text.length; i++) {
    const c = text[i]
    if (c === '/' && text[i + 1] === '/') i = text.indexOf('\n', i) < 0 ? text.length : text.indexOf('\n', i)
    else if (c === '/' && text[i + 1] === '*') i = text.indexOf('*/', i + 2) + 1
    else if (c === "'" || c === '"') {
      for (i++; i < text.length && text[i] !== c; i++) if (text[i] === '\\') i++
    } else if (c === '`' || (c === '}' && templates.length > 0 && templates[templates.length - 1] === depth)) {
      if (c === '}') templates.pop()
      // Inside a template: up to its end, or to a ${ that opens code again.
      for (i++; i < text.length && text[i] !== '`'; i++) {
        if (text[i] === '\\') i++
        else if (text[i] === '$' && text[i + 1] === '{') {
          templates.push(depth)
          i++
          break
        }
      }
    } else if (c === '{') depth++
    else if (c === '}' && --depth === 0) return i + 1
  }
  return -1
}

/** The peer's unpickle(ArrayBuffer) from MemoryViz.js: the function's text, cut out by matching braces. */
function loadPeer(path: string): ((buffer: ArrayBuffer) => unknown) | string {
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (e) {
    return `cannot read ${path}: ${(e as Error).message}`
  }
  const start = text.indexOf('function unpickle(')
  if (start < 0) return `${path} has no function unpickle(`
  const end = functionEnd(text, text.indexOf('{', start))
  if (end < 0) return `${path}: unpickle() has unbalanced braces`
  return new Function(`'use strict';\n${text.slice(start, end)}\nreturn unpickle`)() as (buffer: ArrayBuffer) => unknown
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[sorted.length >> 1]!
}

const peer = peerPath === undefined ? 'no MemoryViz.js given (--peer PATH or MEMORY_VIZ_JS=PATH)' : loadPeer(peerPath)
console.log(`import-pytorch: ${runs} runs after ${warmup} to warm up, ${clock} clock, load average ${loadavg()[0]!.toFixed(2)}, node ${process.version}`)
if (typeof peer === 'string') console.log(`peer (memory_viz unpickle): not measured: ${peer}`)

type Contenders = Record<string, () => unknown>

/** Times each contender `runs` times (after `warmup` runs), the contenders taking turns in blocks. */
function measure(contenders: Contenders, times: Record<string, number[]>): void {
  for (const f of Object.values(contenders)) for (let r = 0; r < Math.max(1, warmup); r++) f()
  const block = 5
  for (let done = 0; done < runs; done += block) {
    for (const [name, f] of Object.entries(contenders)) {
      f() // not timed: the previous contender's garbage
      for (let r = done; r < Math.min(runs, done + block); r++) {
        const t = now()
        f()
        ;(times[name] ??= []).push(now() - t)
      }
    }
  }
}

const figures = new FigureLog('scripts/bench/import-pytorch.ts')
const HEADLINE = 'import (ours: pickle -> trace + layout)'
const PEER = 'memory_viz unpickle (peer)'
/** Which lane of the pickle reader the import takes on these bytes. */
function laneOf(bytes: Uint8Array): string {
  const sink = { wants: () => true, decodedEvent: () => {}, frameId: () => 0, internStack: () => 0 }
  const decoded = decodeFast(bytes, sink, 200)
  return 'restart' in decoded
    ? `general lane (the fast lane hands it back: ${decoded.restart})`
    : 'root' in decoded
      ? 'fast lane'
      : `fast lane, the general lane from byte ${decoded.at}`
}
const inputs = files.map((file) => {
  const bytes = new Uint8Array(readFileSync(file))
  return { file, bytes, buffer: bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength), times: {} as Record<string, number[]> }
})
// The import and the peer first, over every file, with nothing else run in the process yet: the
// breakdown's general lane shares the mapper's code with the import, and running it first would
// leave that code compiled for both lanes' types, a cost the import does not have in the app
// (which takes the general lane only for pickles the fast lane hands back) nor the peer here.
for (const { file, bytes, buffer, times } of inputs) {
  const headline: Contenders = { [HEADLINE]: () => parsePytorchSnapshot(bytes, file) }
  if (typeof peer !== 'string') headline[PEER] = () => peer(buffer)
  measure(headline, times)
}
for (const { file, bytes, times } of inputs) {
  measure(
    {
      '  general path (no fast path)': () => parsePytorchSnapshot(bytes, file, { generalPathOnly: true }),
      '  general path, memo pre-pass (bounded)': () => parsePytorchSnapshot(bytes, file, { generalPathOnly: true, boundedAbove: 0 }),
      'unpickle only (ours, whole object graph)': () => unpickle(bytes),
      'memo pre-pass only (ours)': () => new MemoReferenceScanner().feed(bytes),
    },
    times,
  )
}

for (const { file, bytes, times } of inputs) {
  const check = parsePytorchSnapshot(bytes, file)
  const mb = bytes.length / 1e6
  console.log(
    `\n${basename(file)}: ${mb.toFixed(2)} MB, ${check.trace.events.kind.length} request events, ${check.recorded[0]?.layout?.op.length ?? 0} layout events; import by the ${laneOf(bytes)}`,
  )
  for (const [name, t] of Object.entries(times)) {
    const m = median(t)
    console.log(
      `  ${name.padEnd(42)} median ${m.toFixed(2).padStart(8)} ms  ${(mb / (m / 1000)).toFixed(0).padStart(5)} MB/s  min ${Math.min(...t).toFixed(2)} ms`,
    )
  }
  if (typeof peer !== 'string') {
    const ours = times[HEADLINE]!
    const p = times[PEER]!
    console.log(
      `  import vs peer: ${(median(p) / median(ours)).toFixed(2)}x faster by medians, ${(Math.min(...p) / Math.min(...ours)).toFixed(2)}x by minima (target >= 3x)`,
    )
  }
  const ours = median(times[HEADLINE]!)
  const peerMedian = typeof peer === 'string' ? undefined : median(times[PEER]!)
  figures.add({
    area: 'import',
    what: `PyTorch snapshot import, ${basename(file)} (${mb.toFixed(2)} MB)`,
    value: ours,
    unit: 'ms',
    peers: peerMedian === undefined ? [] : [{ name: "memory_viz's unpickler", value: peerMedian }],
    better: 'lower',
    target: '≥ 3× faster than memory_viz',
    met: peerMedian === undefined ? undefined : peerMedian / ours >= 3,
    note: typeof peer === 'string' ? `peer not measured: ${peer}` : undefined,
  })
}
figures.writeIfAsked()
