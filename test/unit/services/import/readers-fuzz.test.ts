// Fuzzing the input readers with mutated real inputs (helpers/fuzz-runner.ts): trace files, RMM
// logs, PyTorch snapshots (pickle and JSON), torch.profiler traces, Umpire logs and Nsight Systems
// exports. Every outcome is a well-formed result or the reader's typed error (TraceFileError,
// RmmLogError, SnapshotImportError, KinetoTraceError, UmpireLogError, NsysSqliteError) naming the file; never
// another exception, a crash or a hang. A finding, as for Jazzer (scripts/dev/fuzz-ts.sh): a case that
// takes more than 10 s, or the runner past 2 GB resident (killed at once, from outside, where /proc
// tells). Bounded per run; the seed is fixed so CI is repeatable.
// VRAMSCOPE_FUZZ_SEED, VRAMSCOPE_FUZZ_CASES and VRAMSCOPE_FUZZ_BUDGET_MS widen a local run.
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { createInterface } from 'node:readline'
import { it } from 'node:test'
import { fileURLToPath } from 'node:url'

import { residentBytes } from '../../../helpers/bounded-child.ts'

const runner = fileURLToPath(new URL('../../../helpers/fuzz-runner.ts', import.meta.url))
const seed = Number(process.env['VRAMSCOPE_FUZZ_SEED'] ?? 20251122)
/** A case that runs longer than this has hung: the runner is killed. */
const HANG_MS = 60_000
/** A case slower than this is a finding. */
const SLOW_CASE_MS = 10_000
/** Resident memory past this is a finding. */
const MAX_RSS = 2 * 2 ** 30

const targets = [
  { target: 'trace-file', title: 'trace-file', cases: 3000, budgetMs: 15_000, leastCases: 200, errorCodes: [] },
  { target: 'rmm-log', title: 'rmm-log', cases: 6000, budgetMs: 10_000, leastCases: 200, errorCodes: [] },
  {
    target: 'pytorch-snapshot',
    title: 'pytorch snapshots',
    cases: 2000,
    budgetMs: 20_000,
    leastCases: 300,
    errorCodes: ['corrupt', 'truncated', 'not-a-snapshot'],
  },
  { target: 'kineto-trace', title: 'torch.profiler traces', cases: 4000, budgetMs: 10_000, leastCases: 300, errorCodes: ['bad-event', 'truncated'] },
  { target: 'umpire-log', title: 'Umpire logs', cases: 1500, budgetMs: 10_000, leastCases: 150, errorCodes: ['bad-line'] },
  { target: 'nsys-sqlite', title: 'Nsight Systems exports', cases: 1500, budgetMs: 10_000, leastCases: 150, errorCodes: ['corrupt'] },
] as const

for (const { target, title, cases, budgetMs, leastCases, errorCodes } of targets) {
  const maxCases = Number(process.env['VRAMSCOPE_FUZZ_CASES'] ?? cases)
  const budget = Number(process.env['VRAMSCOPE_FUZZ_BUDGET_MS'] ?? budgetMs)
  it(
    `${title}: ${maxCases} mutated inputs (seed ${seed}, at most ${budget / 1000} s) give a result or the typed error`,
    { timeout: budget + HANG_MS + 30_000 },
    async (t) => {
      const child = spawn(process.execPath, ['--import', 'tsx', runner, target, String(seed), String(maxCases), String(budget)], {
        stdio: ['ignore', 'pipe', 'inherit'],
      })
      const exited = once(child, 'exit')
      let lastCase = ''
      const failures: string[] = []
      let summary: { cases: number; outcomes: Record<string, number>; slowest: { ms: number; what: string }; maxRss: number } | undefined
      const watchdog = setTimeout(() => child.kill('SIGKILL'), budget + HANG_MS)
      let peakRss = 0
      const memoryWatch = setInterval(() => {
        peakRss = Math.max(peakRss, child.pid === undefined ? 0 : residentBytes(child.pid))
        if (peakRss > MAX_RSS) child.kill('SIGKILL')
      }, 100)
      for await (const line of createInterface({ input: child.stdout! })) {
        if (line.startsWith('case ')) lastCase = line
        else if (line.startsWith('failure ')) failures.push(line.slice('failure '.length))
        else if (line.startsWith('summary ')) summary = JSON.parse(line.slice('summary '.length))
      }
      const [code, signal] = (await exited) as [number | null, string | null]
      clearTimeout(watchdog)
      clearInterval(memoryWatch)
      assert.ok(peakRss <= MAX_RSS, `the fuzzer passed ${MAX_RSS} bytes resident on ${lastCase}`)
      assert.equal(signal, null, `the fuzzer was killed: it hung on ${lastCase}`)
      assert.deepEqual(failures, [], 'inputs that gave an exception other than the typed error')
      assert.equal(code, 0)
      assert.ok(summary, 'the runner reported its summary')
      assert.ok(summary.slowest.ms <= SLOW_CASE_MS, `a case took ${summary.slowest.ms.toFixed(0)} ms: ${summary.slowest.what}`)
      assert.ok(summary.maxRss <= MAX_RSS, `the runner peaked at ${summary.maxRss} bytes resident`)
      t.diagnostic(
        `${summary.cases} cases: ${JSON.stringify(summary.outcomes)}; slowest ${summary.slowest.ms.toFixed(1)} ms (${summary.slowest.what}); peak ${(summary.maxRss / 2 ** 20).toFixed(0)} MB resident`,
      )
      assert.ok(summary.cases >= Math.min(maxCases, leastCases), `only ${summary.cases} cases ran in the budget`)
      assert.ok((summary.outcomes['ok'] ?? 0) > 0 && Object.keys(summary.outcomes).length > 2, 'the mutations reach both results and errors')
      for (const expected of errorCodes) assert.ok((summary.outcomes[expected] ?? 0) > 0, `some mutations give ${expected}`)
    },
  )
}
