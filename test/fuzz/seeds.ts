// Seed inputs for a Jazzer.js target, from the real fixtures (small ones only: libFuzzer mutates
// small inputs faster), each behind the option byte its target reads first (see *.fuzz.ts).
// scripts/dev/fuzz-ts.sh adds them to the kept corpus before each run.
//   node --import tsx test/fuzz/seeds.ts trace-file|rmm-log|pytorch-snapshot|kineto-trace|umpire-log|nsys-sqlite DIR
import { createHash } from 'node:crypto'
import { mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

import { encodeTrace } from '../../src-main/services/trace/file.ts'
import { concat } from '../helpers/bytes.ts'
import { kinetoInputs, nsysInputs, umpireInputs } from '../helpers/import-fuzz-targets.ts'
import { sampleStrategies, sampleTrace } from '../helpers/trace-samples.ts'

const fixtures = fileURLToPath(new URL('../fixtures', import.meta.url))
const MAX_SEED_BYTES = 24 * 1024

function files(dir: string, pattern: RegExp): Uint8Array[] {
  return readdirSync(join(fixtures, dir))
    .filter((f) => pattern.test(f))
    .sort()
    .map((f) => new Uint8Array(readFileSync(join(fixtures, dir, f))))
    .filter((b) => b.length <= MAX_SEED_BYTES)
}

/** Each input once behind each of the given option bytes. */
const behind = (options: number[], inputs: Uint8Array[]) => options.flatMap((o) => inputs.map((b) => concat([Uint8Array.of(o), b])))

const seeds: Record<string, () => Uint8Array[] | Promise<Uint8Array[]>> = {
  // 1: checksums recomputed (the decoder), 0: as they are (the checksum check).
  'trace-file': () =>
    behind(
      [1, 0],
      [concat(encodeTrace(sampleTrace(24, 11), sampleStrategies(2))), concat(encodeTrace(sampleTrace(60, 12), [])), ...files('trace', /\.vramscope$/)],
    ),
  // 0 and 3 bad lines allowed.
  'rmm-log': () => behind([0, 3], files('rmm', /\.(csv|bin)$/)),
  // 0: the fast lane where it applies, 1: the general lane (the restricted unpickler).
  'pytorch-snapshot': () =>
    behind([0, 1], [...files('pytorch', /^synthetic.*\.(pickle|json)$/), ...files('pickle', /\.pickle$/), ...files('hostile', /\.pickle$/)]),
  // 12: events up to 1 MiB; 2: up to 1 KiB (the size bound within reach).
  'kineto-trace': () => behind([12, 2], kinetoInputs()),
  // 0: every device, 1: DEVICE::1 alone.
  'umpire-log': async () => behind([0, 1], await umpireInputs()),
  // 0: the busiest device, 1: device 1.
  'nsys-sqlite': async () => behind([0, 1], await nsysInputs()),
}

const [target, dir] = process.argv.slice(2)
const make = target === undefined ? undefined : seeds[target]
if (make === undefined || dir === undefined) throw new Error(`usage: seeds.ts ${Object.keys(seeds).join('|')} DIR`)
mkdirSync(dir, { recursive: true })
for (const seed of await make()) writeFileSync(join(dir, createHash('sha1').update(seed).digest('hex')), seed)
