// The torch.profiler trace, Umpire log and Nsight Systems export importers as fuzz targets of
// fuzz-runner.ts, and their inputs (the Jazzer.js seeds, test/fuzz/seeds.ts, are the same): small
// profiler traces of every event the scanner looks at, the Umpire logs and the Nsight Systems
// export scripts/fixtures/import-formats.ts writes from a small snapshot. Every outcome must be a
// well-formed import or the importer's typed error naming the file.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

import { KinetoTraceError, parseKinetoTrace } from '../../src-main/services/import/kineto.ts'
import { loadSqlite } from '../../src-main/services/import/nsys.ts'
import { openInput } from '../../src-main/services/import/open-input.ts'
import { UmpireLogError, parseUmpireLog } from '../../src-main/services/import/umpire.ts'
import { umpireClassicLog, umpireEventsLog, writeNsysExport } from '../../scripts/fixtures/import-formats.ts'
import { concat } from './bytes.ts'
import { int, mutate, type FuzzTarget, type Mutation, type Rand, BYTE_MUTATIONS } from './fuzz-harness.ts'
import { nsysExpectedError, readNsysBytes } from './nsys-fuzz-read.ts'
import { checkKineto, checkUmpire } from './reader-checks.ts'

const byteMutations = BYTE_MUTATIONS
const encoder = new TextEncoder()
const decoder = new TextDecoder()
const SNAPSHOT = fileURLToPath(new URL('../fixtures/pytorch/synthetic.pickle', import.meta.url))

/** Tokens worth planting in JSON: structure, escapes, numbers at the edges, the names the readers look for. */
const JSON_TOKENS = [
  '{',
  '}',
  '[',
  ']',
  ',',
  ':',
  '"',
  '\\',
  '\\u0000',
  '\\"',
  'null',
  'true',
  '-1',
  '0',
  '1e308',
  '9007199254740993',
  '-0',
  '1.5',
  '"[memory]"',
  '"cpu_op"',
  '"traceEvents"',
  '"Bytes"',
  '"Addr"',
  '"Device Type"',
  '"Device Id"',
  '"Total Reserved"',
  '"kind":"replay"',
  '"category":"operation"',
  '"allocate"',
  '"deallocate"',
  '"make_allocator"',
  '"allocator_ref"',
  '"pointer"',
  '"memory_ptr"',
  '"0x0"',
  '"(nil)"',
  '"DEVICE::1"',
  '\n',
  '\r\n',
  '\ufeff',
]

const jsonMutations: Mutation[] = [
  ...byteMutations,
  (b, r) => {
    const token = encoder.encode(JSON_TOKENS[int(r, JSON_TOKENS.length)]!)
    const at = int(r, b.length + 1)
    return [concat([b.subarray(0, at), token, b.subarray(at)]), `insert token at ${at}`]
  },
  (b, r) => {
    const lines = decoder.decode(b).split('\n')
    const i = int(r, lines.length)
    const j = int(r, lines.length)
    ;[lines[i], lines[j]] = [lines[j]!, lines[i]!]
    return [encoder.encode(lines.join('\n')), `swap lines ${i + 1} and ${j + 1}`]
  },
  (b, r) => {
    const lines = decoder.decode(b).split('\n')
    const i = int(r, lines.length)
    lines.splice(int(r, lines.length + 1), 0, lines[i]!)
    return [encoder.encode(lines.join('\n')), `duplicate line ${i + 1}`]
  },
]

// --- torch.profiler traces -----------------------------------------------------------------------

/** Small profiler traces: memory events of every device type, cpu_ops around them, a prelude with the GPU. */
export function kinetoInputs(): Uint8Array[] {
  const memory = (ts: number, addr: number, bytes: number, type = 1, device = 0, tid = 1) =>
    `{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": ${tid}, "ts": ${ts}, "args": {"Total Reserved": ${2097152 * (1 + (ts % 3))}, "Total Allocated": ${Math.max(0, bytes)}, "Bytes": ${bytes}, "Device Id": ${device}, "Device Type": ${type}, "Addr": ${addr}}}`
  const op = (ts: number, dur: number, name: string, tid = 1) =>
    `{"ph": "X", "cat": "cpu_op", "name": "${name}", "pid": 1, "tid": ${tid}, "ts": ${ts}, "dur": ${dur}, "args": {"Input Dims": [[2, 3]], "Call stack": "a.py(1): f;b.py(\\"2\\"): g"}}`
  const trace = (events: string[], prelude = '"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100", "totalGlobalMem": 85017493504}]') =>
    encoder.encode(`{\n  ${prelude},\n  "traceEvents": [\n  ${events.join(',\n  ')}\n  ],\n  "traceName": "x"\n}\n`)
  const events: string[] = []
  for (let i = 0; i < 40; i++) {
    events.push(op(i * 10, 8, `aten::op_${i % 5}`, 1 + (i % 2)))
    events.push(memory(i * 10 + 1, 0x7f0000000000 + (i % 8) * 4096, 512 * (1 + (i % 4)), i % 11 === 0 ? 0 : 1, i % 13 === 0 ? 1 : 0, 1 + (i % 2)))
    if (i >= 2) events.push(memory(i * 10 + 2, 0x7f0000000000 + ((i - 2) % 8) * 4096, -512 * (1 + ((i - 2) % 4)), 1, 0, 1 + (i % 2)))
  }
  return [trace(events), trace(events.slice(0, 8), '"schemaVersion": 1'), trace([])]
}

export function kinetoTarget(): FuzzTarget {
  const inputs = kinetoInputs()
  return {
    nextCase: (rand) => mutated(inputs, jsonMutations, rand),
    read: (bytes, rand) => checkKineto(parseKinetoTrace(bytes, 'fuzz.json', { maxEventBytes: 256 + int(rand, 4096) })),
    expectedError: (e) => (e instanceof KinetoTraceError && e.file === 'fuzz.json' && e.message.startsWith('fuzz.json: ') ? e.code : undefined),
  }
}

// --- Umpire logs ---------------------------------------------------------------------------------

/** The two forms of log of a small snapshot, and a log of two devices and an unknown allocator. */
export async function umpireInputs(): Promise<Uint8Array[]> {
  const input = await openInput(SNAPSHOT)
  const mixed = [
    '{"category":"operation","name":"make_memory_resource","numeric_args":{},"string_args":{"allocator_ref":"0x10"},"tags":{"allocator_name":"DEVICE::1","replay":"true"},"timestamp":5}',
    '{"category":"operation","name":"make_memory_resource","numeric_args":{},"string_args":{"allocator_ref":"0x20"},"tags":{"allocator_name":"DEVICE","replay":"true"},"timestamp":5}',
    '{"category":"operation","name":"make_allocator","numeric_args":{},"string_args":{"allocator_ref":"0x30","type":"N6umpire8strategy9QuickPoolE","arg0":"DEVICE::1"},"tags":{"allocator_name":"p1","replay":"true"},"timestamp":6}',
    '{"category":"operation","name":"allocate","numeric_args":{"size":512},"string_args":{"allocator_ref":"0x30","pointer":"0xa00"},"tags":{"replay":"true"},"timestamp":10}',
    '{"category":"operation","name":"allocate","numeric_args":{"size":512},"string_args":{"allocator_ref":"0x20","pointer":"0xa00"},"tags":{"replay":"true"},"timestamp":9}',
    '{"category":"operation","name":"allocate","numeric_args":{"size":0},"string_args":{"allocator_ref":"0x20","pointer":"0x0"},"tags":{"replay":"true"},"timestamp":11}',
    '{"category":"operation","name":"deallocate","string_args":{"allocator_ref":"0x30","pointer":"0xa00"},"tags":{"replay":"true"},"timestamp":12}',
    '{"category":"operation","name":"allocate","numeric_args":{"size":64},"string_args":{"allocator_ref":"0x99","pointer":"0xc00"},"tags":{"replay":"true"},"timestamp":12}',
  ].join('\n')
  return [encoder.encode(umpireEventsLog(input)), encoder.encode(umpireClassicLog(input)), encoder.encode(mixed)]
}

/** Values worth putting in an Umpire field: other types, pointers at the edges, names of resources and events. */
const UMPIRE_VALUES: unknown[] = [
  null,
  true,
  -1,
  0,
  1.5,
  2 ** 53,
  1e300,
  '',
  '0x',
  '0x0',
  '(nil)',
  '0xffffffffffffffff',
  '0x10000000000000000',
  'DEVICE',
  'DEVICE::1',
  'DEVICE::70000',
  'HOST',
  'UM',
  'pool',
  'allocate',
  'deallocate',
  'make_allocator',
  'makeAllocator',
  'reallocate',
  [],
  {},
]

/** One line parsed, one of its values (at any depth) replaced, written back: the reader's checks past JSON. */
const replaceValue: Mutation = (b, r) => {
  const lines = decoder.decode(b).split('\n')
  const i = int(r, lines.length)
  let value: unknown
  try {
    value = JSON.parse(lines[i]!)
  } catch {
    return [b, `line ${i + 1} is not JSON`]
  }
  const holders: [Record<string, unknown>, string][] = []
  const walk = (v: unknown) => {
    if (typeof v !== 'object' || v === null) return
    for (const [k, x] of Object.entries(v)) {
      holders.push([v as Record<string, unknown>, k])
      walk(x)
    }
  }
  walk(value)
  if (holders.length === 0) return [b, `line ${i + 1} has no values`]
  const [holder, key] = holders[int(r, holders.length)]!
  holder[key] = UMPIRE_VALUES[int(r, UMPIRE_VALUES.length)]
  lines[i] = JSON.stringify(value)
  return [encoder.encode(lines.join('\n')), `line ${i + 1}: ${key} = ${JSON.stringify(holder[key])}`]
}

export async function umpireTarget(): Promise<FuzzTarget> {
  const inputs = await umpireInputs()
  const mutations = [...jsonMutations, replaceValue, replaceValue, replaceValue]
  return {
    nextCase: (rand) => mutated(inputs, mutations, rand),
    read: (bytes, rand) => checkUmpire(parseUmpireLog(bytes, 'fuzz.stats', { device: rand() < 0.5 ? 'all' : int(rand, 2) })),
    expectedError: (e) => (e instanceof UmpireLogError && e.file === 'fuzz.stats' && e.message.startsWith('fuzz.stats: ') ? e.code : undefined),
  }
}

// --- Nsight Systems exports ----------------------------------------------------------------------

/** The export of a small snapshot, and one with a second device. */
export async function nsysInputs(): Promise<Uint8Array[]> {
  const input = await openInput(SNAPSHOT)
  const dir = mkdtempSync(join(tmpdir(), 'vramscope-nsys-seeds-'))
  try {
    const out: Uint8Array[] = []
    for (const otherDevice of [false, true]) {
      const path = join(dir, `export-${otherDevice}.sqlite`)
      await writeNsysExport(input, path, { otherDevice })
      out.push(new Uint8Array(readFileSync(path)))
    }
    return out
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

/** SQLite's pages are 4 KiB in these files: damage inside one page (a cell, a pointer), or a whole page zeroed. */
const pageMutations: Mutation[] = [
  ...byteMutations,
  (b, r) => {
    const pages = Math.max(1, b.length >> 12)
    const p = int(r, pages)
    const out = b.slice()
    out.fill(0, p << 12, Math.min(b.length, (p + 1) << 12))
    return [out, `zero page ${p}`]
  },
]

export async function nsysTarget(): Promise<FuzzTarget> {
  const inputs = await nsysInputs()
  const lib = await loadSqlite()
  const dir = mkdtempSync(join(tmpdir(), 'vramscope-nsys-fuzz-'))
  process.on('exit', () => rmSync(dir, { recursive: true, force: true }))
  return {
    nextCase: (rand) => mutated(inputs, pageMutations, rand),
    read: (bytes, rand) => readNsysBytes(lib, dir, bytes, rand() < 0.7 ? 'all' : int(rand, 2)),
    expectedError: nsysExpectedError,
  }
}

function mutated(inputs: Uint8Array[], mutations: Mutation[], rand: Rand): { bytes: Uint8Array; what: string } {
  const base = int(rand, inputs.length)
  const [bytes, steps] = mutate(inputs[base]!, rand, 1 + int(rand, 3), mutations)
  return { bytes, what: [`input ${base}`, ...steps].join('; ') }
}
