// Seeded fuzzing of the input readers, run in a child process by fuzz.test.ts so that a hang can
// be stopped from outside (the loop: fuzz-harness.ts). Every case mutates a real input; its outcome
// must be a well-formed result or the reader's typed error naming the file.
//   node --import tsx fuzz-runner.ts trace-file|rmm-log|pytorch-snapshot|kineto-trace|umpire-log|nsys-sqlite SEED MAX_CASES BUDGET_MS
import { readdirSync, readFileSync } from 'node:fs'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

import { RmmLogError, parseRmmLog } from '../../src-main/services/import/rmm.ts'
import { readMessage } from '../../src-main/services/trace/arrow-messages.ts'
import { TraceFileError, TraceWriter, decodeTrace, encodeTrace } from '../../src-main/services/trace/file.ts'
import { EventKind } from '../../src-main/services/trace/model.ts'
import { concat } from './bytes.ts'
import { int, mutate, runFuzzCases, type FuzzTarget, type Mutation, type Rand, BYTE_MUTATIONS } from './fuzz-harness.ts'
import { kinetoTarget, nsysTarget, umpireTarget } from './import-fuzz-targets.ts'
import { pytorchSnapshotTarget } from './pytorch-fuzz-target.ts'
import { checkRmm, checkTraceContents, fixChecksums } from './reader-checks.ts'
import { sampleStrategies, sampleTrace } from './trace-samples.ts'

const byteMutations = BYTE_MUTATIONS

// --- trace files ----------------------------------------------------------------------------------

const INTERESTING_INT32 = [0, 1, -1, 8, 0x7fffffff, -0x80000000, 0xffff, 0x10000, 1 << 24, 16, 24, 255]

const traceMutations: Mutation[] = [
  ...byteMutations,
  (b, r) => {
    // Lengths and offsets are 4-byte aligned in flatbuffers and IPC prefixes: hit them.
    if (b.length < 4) return [b, 'too short for an int32']
    const out = b.slice()
    const at = int(r, b.length >> 2) << 2
    const value = INTERESTING_INT32[int(r, INTERESTING_INT32.length)]!
    new DataView(out.buffer).setInt32(at, value, true)
    return [out, `int32 at ${at} = ${value}`]
  },
  (b, r) => {
    const chunks = frameChunks(b)
    if (chunks.length < 2) return [b, 'swap chunks: too few']
    const i = int(r, chunks.length)
    const j = int(r, chunks.length)
    const parts = chunks.map(([s, e]) => b.subarray(s, e))
    ;[parts[i], parts[j]] = [parts[j]!, parts[i]!]
    return [concat(parts), `swap chunks ${i} and ${j}`]
  },
  (b, r) => {
    const chunks = frameChunks(b)
    if (chunks.length === 0) return [b, 'drop chunk: none']
    const i = int(r, chunks.length)
    return [concat(chunks.filter((_, k) => k !== i).map(([s, e]) => b.subarray(s, e))), `drop chunk ${i}`]
  },
]

/** [start, end) of each chunk, as far as the framing holds. */
function frameChunks(b: Uint8Array): [number, number][] {
  const out: [number, number][] = []
  let at = 0
  try {
    while (at < b.length) {
      const start = at
      for (;;) {
        const m = readMessage(b, at)
        at = m.end
        if (m.header.kind === 'eos') break
      }
      out.push([start, at])
    }
  } catch {
    // the rest does not frame
  }
  return out
}

async function traceInputs(): Promise<Uint8Array[]> {
  const whole = concat(encodeTrace(sampleTrace(300, 11), sampleStrategies(16)))
  const dir = await mkdtemp(join(tmpdir(), 'vramscope-fuzz-'))
  try {
    const path = join(dir, 'recording.vramscope')
    const writer = await TraceWriter.create(path, { source: 'recording', warnings: [], properties: {} }, { flushIntervalMs: 60_000 })
    const source = sampleTrace(120, 12)
    for (let i = 0; i < 120; i++) {
      const e = source.events
      const stack = e.stack[i]! < 0 ? -1 : writer.stack(Array.from(source.tables.stacks[e.stack[i]!]!, (f) => source.tables.frames[f]!))
      const id = e.kind[i] === EventKind.marker ? writer.marker(`m${e.id[i]}`) : e.id[i]!
      writer.append(e.kind[i] as EventKind, id, e.size[i]!, writer.stream(source.tables.streams[e.stream[i]!]!), 0, e.time[i]!, stack)
      if (i % 40 === 39) await writer.flush()
    }
    await writer.abandon()
    return [whole, new Uint8Array(await readFile(path))]
  } finally {
    await rm(dir, { recursive: true, force: true })
  }
}

// --- RMM logs -------------------------------------------------------------------------------------

const TOKENS = [
  ',',
  '"',
  '\n',
  '\r\n',
  ' ',
  '0x',
  '0',
  '9',
  'f',
  'allocate',
  'free',
  'allocate failure',
  '(nil)',
  ':',
  '.',
  '\u0000',
  '\ufffd',
  'é',
  '\t',
  '""',
  '99999999999999999999',
  '-1',
]
const encoder = new TextEncoder()

const rmmMutations: Mutation[] = [
  ...byteMutations,
  (b, r) => {
    const token = encoder.encode(TOKENS[int(r, TOKENS.length)]!)
    const at = int(r, b.length + 1)
    return [concat([b.subarray(0, at), token, b.subarray(at)]), `insert token at ${at}`]
  },
  (b, r) => {
    const lines = new TextDecoder().decode(b).split('\n')
    const i = int(r, lines.length)
    const j = int(r, lines.length)
    ;[lines[i], lines[j]] = [lines[j]!, lines[i]!]
    return [encoder.encode(lines.join('\n')), `swap lines ${i + 1} and ${j + 1}`]
  },
  (b, r) => {
    const lines = new TextDecoder().decode(b).split('\n')
    const i = int(r, lines.length)
    lines.splice(int(r, lines.length + 1), 0, lines[i]!)
    return [encoder.encode(lines.join('\n')), `duplicate line ${i + 1}`]
  },
  (b, r) => {
    const lines = new TextDecoder().decode(b).split('\n')
    const i = int(r, lines.length)
    const fields = lines[i]!.split(',')
    fields[int(r, fields.length)] = TOKENS[int(r, TOKENS.length)]!
    lines[i] = fields.join(',')
    return [encoder.encode(lines.join('\n')), `replace a field of line ${i + 1}`]
  },
]

function rmmInputs(): Uint8Array[] {
  const dir = fileURLToPath(new URL('../fixtures/rmm', import.meta.url))
  const fixtures = readdirSync(dir)
    .filter((f) => f.endsWith('.csv') || f.endsWith('.bin'))
    .sort()
    .map((f) => new Uint8Array(readFileSync(join(dir, f))))
  const lines = ['Thread,Time,Action,Pointer,Size,Stream']
  for (let i = 0; i < 150; i++)
    lines.push(
      `3,12:00:${String(i % 60).padStart(2, '0')}.${String(i).padStart(6, '0')},allocate,0x${(0x1000 + i * 256).toString(16)},${256 * (i + 1)},0x${i % 3}`,
    )
  for (let i = 0; i < 150; i += 2) lines.push(`3,12:01:00.${String(i).padStart(6, '0')},free,0x${(0x1000 + i * 256).toString(16)},${256 * (i + 1)},0x0`)
  return [...fixtures, encoder.encode(lines.join('\n'))]
}

// --- the targets ---------------------------------------------------------------------------------

/** Picks a real input and applies one to three mutations. */
function mutatedInput(inputs: Uint8Array[], mutations: Mutation[], rand: Rand): { bytes: Uint8Array; steps: string[] } {
  const base = int(rand, inputs.length)
  const [bytes, steps] = mutate(inputs[base]!, rand, 1 + int(rand, 3), mutations)
  return { bytes, steps: [`input ${base}`, ...steps] }
}

async function traceFileTarget(): Promise<FuzzTarget> {
  const inputs = await traceInputs()
  return {
    nextCase(rand) {
      let { bytes, steps } = mutatedInput(inputs, traceMutations, rand)
      if (rand() < 0.5) {
        bytes = fixChecksums(bytes)
        steps.push('checksums fixed')
      }
      return { bytes, what: steps.join('; ') }
    },
    read: (bytes) => checkTraceContents(decodeTrace(bytes, 'fuzz.vramscope')),
    expectedError: (e) => (e instanceof TraceFileError && e.message.startsWith('fuzz.vramscope: ') ? e.code : undefined),
  }
}

function rmmLogTarget(): FuzzTarget {
  const inputs = rmmInputs()
  return {
    nextCase(rand) {
      const { bytes, steps } = mutatedInput(inputs, rmmMutations, rand)
      return { bytes, what: steps.join('; ') }
    },
    read: (bytes, rand) => checkRmm(parseRmmLog(bytes, 'fuzz.csv', { maxBadLines: int(rand, 6) })),
    expectedError: (e) => (e instanceof RmmLogError && e.message.startsWith('fuzz.csv: ') ? e.code : undefined),
  }
}

const targets: Record<string, () => FuzzTarget | Promise<FuzzTarget>> = {
  'trace-file': traceFileTarget,
  'rmm-log': rmmLogTarget,
  'pytorch-snapshot': pytorchSnapshotTarget,
  'kineto-trace': kinetoTarget,
  'umpire-log': umpireTarget,
  'nsys-sqlite': nsysTarget,
}

const [name, seedText, maxText, budgetText] = process.argv.slice(2)
const makeTarget = name === undefined ? undefined : targets[name]
if (makeTarget === undefined || !seedText || !maxText || !budgetText)
  throw new Error(`usage: fuzz-runner.ts ${Object.keys(targets).join('|')} SEED MAX_CASES BUDGET_MS`)
runFuzzCases(name!, await makeTarget(), Number(seedText), Number(maxText), Number(budgetText))
