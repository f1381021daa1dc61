// The PyTorch snapshot importer (pickle and JSON) as a fuzz target of fuzz-runner.ts: real
// snapshots get bit flips, planted opcodes, truncations, deletions, copies and splices, JSON ones
// broken tokens and values; every outcome must be a well-formed import or a SnapshotImportError
// naming the file.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

import { parsePytorchSnapshot } from '../../src-main/services/import/pytorch/index.ts'
import { SnapshotImportError } from '../../src-main/services/import/pytorch/snapshot-error.ts'
import { concat } from './bytes.ts'
import {
  appendRandomBytes,
  copyRange,
  deleteRange,
  flipBits,
  int,
  setRandomBytes,
  truncate,
  type FuzzTarget,
  type Mutation,
  type Rand,
} from './fuzz-harness.ts'
import { checkPytorchImport } from './reader-checks.ts'

/** Opcodes worth planting: every kind the unpickler knows, the forbidden ones included. */
const OPCODES = [
  0x28, 0x29, 0x2e, 0x30, 0x31, 0x32, 0x42, 0x43, 0x46, 0x47, 0x49, 0x4a, 0x4b, 0x4c, 0x4d, 0x4e, 0x50, 0x51, 0x52, 0x53, 0x54, 0x55, 0x56, 0x58, 0x5d, 0x61,
  0x62, 0x63, 0x64, 0x65, 0x67, 0x68, 0x69, 0x6a, 0x6c, 0x6f, 0x70, 0x71, 0x72, 0x73, 0x74, 0x75, 0x7d, 0x80, 0x81, 0x82, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8a,
  0x8b, 0x8c, 0x8d, 0x8e, 0x8f, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97,
]

const plantOpcodes: Mutation = (b, r) => {
  const out = b.slice()
  const n = 1 + int(r, 4)
  for (let i = 0; i < n && out.length > 0; i++) out[int(r, out.length)] = OPCODES[int(r, OPCODES.length)]!
  return [out, `plant ${n} opcodes`]
}

/** A length or index argument made large: the byte after a length-prefixed or memo opcode. */
const enlargeArgument: Mutation = (b, r) => {
  const out = b.slice()
  for (let tries = 0; tries < 64; tries++) {
    const p = int(r, out.length - 1)
    if ([0x8c, 0x58, 0x8a, 0x68, 0x6a, 0x71, 0x72, 0x95].includes(out[p]!)) {
      out[p + 1] = 0xff - int(r, 4)
      return [out, `enlarge the argument of 0x${out[p]!.toString(16)} at ${p}`]
    }
  }
  return [out, 'unchanged']
}

/** Part of another input written over part of this one. */
function spliceFrom(others: Uint8Array[]): Mutation {
  return (b, r) => {
    const other = others[int(r, others.length)]!
    const from = int(r, other.length)
    const to = Math.min(other.length, from + 1 + int(r, 2048))
    const at = int(r, b.length + 1)
    const cut = Math.min(b.length, at + int(r, 2048))
    return [concat([b.subarray(0, at), other.subarray(from, to), b.subarray(cut)]), `splice another input's [${from}, ${to}) over [${at}, ${cut})`]
  }
}

const JSON_TOKENS = [
  '{',
  '}',
  '[',
  ']',
  ',',
  ':',
  '"',
  '0',
  '-1',
  '1e309',
  '"alloc"',
  '"free_requested"',
  '"segment_free"',
  'null',
  'true',
  '"addr"',
  '18446744073709551617',
  '"\\u0000"',
  '__proto__',
]

const jsonMutations: Mutation[] = [
  (b, r) => {
    const text = new TextDecoder().decode(b)
    const at = int(r, text.length + 1)
    const token = JSON_TOKENS[int(r, JSON_TOKENS.length)]!
    return [new TextEncoder().encode(text.slice(0, at) + token + text.slice(at + int(r, 3))), `insert ${token} at ${at}`]
  },
  (b, r) => {
    const text = new TextDecoder().decode(b)
    // Replace one number with another value: a type or range a snapshot does not allow.
    const numbers = [...text.matchAll(/-?\d+/g)]
    const m = numbers[int(r, numbers.length)]
    if (m === undefined) return [b, 'unchanged']
    const value = ['-5', '1.5', '"9"', 'null', '[]', '{}', '9007199254740993', '1e400'][int(r, 8)]!
    return [new TextEncoder().encode(text.slice(0, m.index) + value + text.slice(m.index! + m[0].length)), `number at ${m.index} -> ${value}`]
  },
]

export function pytorchSnapshotTarget(): FuzzTarget {
  const dir = join(fileURLToPath(new URL('.', import.meta.url)), '..', 'fixtures', 'pytorch')
  const read = (name: string) => new Uint8Array(readFileSync(join(dir, name)))
  // Mostly the small inputs, so that a CI run gets through many cases; the large ones now and then.
  const pickles = [
    ['synthetic.pickle', 6],
    ['synthetic-protocol-2.pickle', 2],
    ['synthetic-protocol-5.pickle', 2],
    ['mlp_varbatch_overflowed.pickle', 3],
    ['inference_mixed.pickle', 1],
    ['convnet_varimg.pickle', 1],
    ['mlp_varbatch.pickle', 1],
  ] as const
  const inputs = pickles.flatMap(([name, weight]) => Array.from({ length: weight }, () => ({ name, bytes: read(name) })))
  const json = { name: 'synthetic.json', bytes: read('synthetic.json') }
  const mutations = [
    flipBits,
    setRandomBytes,
    plantOpcodes,
    truncate,
    deleteRange,
    copyRange,
    spliceFrom(inputs.map((i) => i.bytes)),
    enlargeArgument,
    appendRandomBytes,
  ]
  return {
    nextCase(rand: Rand) {
      const useJson = rand() < 0.15
      const input = useJson ? json : inputs[int(rand, inputs.length)]!
      let bytes: Uint8Array = input.bytes
      const steps: string[] = []
      for (let k = 1 + (rand() < 0.3 ? 1 : 0); k > 0; k--) {
        const list = useJson && rand() < 0.7 ? jsonMutations : mutations
        const [mutated, what] = list[int(rand, list.length)]!(bytes, rand)
        bytes = mutated
        steps.push(what)
      }
      return { bytes, what: `${input.name}: ${steps.join('; ')}` }
    },
    read: (bytes, rand) =>
      checkPytorchImport(
        parsePytorchSnapshot(bytes, 'fuzzed.snapshot', { device: rand() < 0.2 ? 'all' : undefined, boundedAbove: rand() < 0.3 ? 0 : undefined }),
      ),
    expectedError: (e) => (e instanceof SnapshotImportError && e.file === 'fuzzed.snapshot' && e.message.startsWith('fuzzed.snapshot: ') ? e.code : undefined),
  }
}
