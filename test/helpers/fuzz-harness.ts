// The fuzzing loop and the byte mutations every input format shares; each format (fuzz-runner.ts
// names them) plugs in how a case is made from its real inputs, how it is read and checked, and
// which errors are its reader's typed errors. Runs inside the child that fuzz.test.ts watches.
import { concat } from './bytes.ts'
import { random } from './trace-samples.ts'

export type Rand = () => number
export type Mutation = (input: Uint8Array, rand: Rand) => [Uint8Array, string]

export const int = (rand: Rand, below: number) => Math.floor(rand() * below)

export const flipBits: Mutation = (b, r) => {
  const out = b.slice()
  const n = 1 + int(r, 4)
  const at: number[] = []
  for (let i = 0; i < n && out.length > 0; i++) {
    const p = int(r, out.length)
    out[p]! ^= 1 << int(r, 8)
    at.push(p)
  }
  return [out, `flip bits at ${at.join(',')}`]
}

export const setRandomBytes: Mutation = (b, r) => {
  const out = b.slice()
  const n = 1 + int(r, 8)
  for (let i = 0; i < n && out.length > 0; i++) out[int(r, out.length)] = int(r, 256)
  return [out, `set ${n} random bytes`]
}

export const truncate: Mutation = (b, r) => {
  const at = int(r, b.length + 1)
  return [b.slice(0, at), `truncate at ${at}`]
}

export const appendRandomBytes: Mutation = (b, r) => {
  const extra = Uint8Array.from({ length: 1 + int(r, 64) }, () => int(r, 256))
  return [concat([b, extra]), `append ${extra.length} random bytes`]
}

export const deleteRange: Mutation = (b, r) => {
  const from = int(r, b.length + 1)
  const to = Math.min(b.length, from + 1 + int(r, 256))
  return [concat([b.subarray(0, from), b.subarray(to)]), `delete ${from}..${to}`]
}

export const copyRange: Mutation = (b, r) => {
  const from = int(r, b.length + 1)
  const to = Math.min(b.length, from + 1 + int(r, 512))
  const at = int(r, b.length + 1)
  return [concat([b.subarray(0, at), b.subarray(from, to), b.subarray(at)]), `copy ${from}..${to} to ${at}`]
}

export const zeroRange: Mutation = (b, r) => {
  const out = b.slice()
  const from = int(r, b.length + 1)
  const to = Math.min(b.length, from + 1 + int(r, 128))
  out.fill(0, from, to)
  return [out, `zero ${from}..${to}`]
}

/** Every format-blind mutation of the bytes, the list every target draws its byte-level steps from. */
export const BYTE_MUTATIONS: readonly Mutation[] = [flipBits, setRandomBytes, truncate, appendRandomBytes, deleteRange, copyRange, zeroRange]

/** Applies `count` mutations drawn from `list`; returns the bytes and what each did. */
export function mutate(bytes: Uint8Array, rand: Rand, count: number, list: readonly Mutation[]): [Uint8Array, string[]] {
  const steps: string[] = []
  for (let k = count; k > 0; k--) {
    const [next, what] = list[int(rand, list.length)]!(bytes, rand)
    bytes = next
    steps.push(what)
  }
  return [bytes, steps]
}

export interface FuzzTarget {
  /** One case: a real input mutated, and what was done to it (printed before the case is read). */
  nextCase(rand: Rand): { bytes: Uint8Array; what: string }
  /** Reads the bytes (options may be drawn from `rand`) and checks what came back; throws if it does not hold together. */
  read(bytes: Uint8Array, rand: Rand): void
  /** The outcome of an exception `read` threw: its code when it is the reader's typed error naming the file, else undefined (a failure). */
  expectedError(error: unknown): string | undefined
}

/**
 * Runs cases until `maxCases` or `budgetMs`. Prints "case N: what" before each case (the last line
 * names a hanging case), "failure {json}" for a wrong outcome (and exits non-zero), and
 * "summary {json}" at the end.
 */
export function runFuzzCases(name: string, target: FuzzTarget, seed: number, maxCases: number, budgetMs: number): void {
  const rand = random(seed)
  const outcomes: Record<string, number> = {}
  const started = performance.now()
  let slowest = { ms: 0, what: '' }
  let cases = 0
  for (; cases < maxCases && performance.now() - started < budgetMs; cases++) {
    const { bytes, what } = target.nextCase(rand)
    process.stdout.write(`case ${cases}: ${what}\n`)
    const t0 = performance.now()
    let outcome: string
    try {
      target.read(bytes, rand)
      outcome = 'ok'
    } catch (e) {
      const code = target.expectedError(e)
      if (code !== undefined) {
        outcome = code
      } else {
        outcome = 'unexpected'
        const error = e instanceof Error ? (e.stack ?? e.message) : String(e)
        process.stdout.write(`failure ${JSON.stringify({ seed, case: cases, what, error })}\n`)
        process.exitCode = 1
      }
    }
    const ms = performance.now() - t0
    if (ms > slowest.ms) slowest = { ms, what: `case ${cases}: ${what}` }
    outcomes[outcome] = (outcomes[outcome] ?? 0) + 1
  }
  const maxRss = process.resourceUsage().maxRSS * 1024
  process.stdout.write(`summary ${JSON.stringify({ target: name, seed, cases, ms: Math.round(performance.now() - started), outcomes, slowest, maxRss })}\n`)
}
