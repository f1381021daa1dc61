// `npm run fuzz:long`: the long fuzz runs, on demand (CI runs the short ones inside `npm test`).
//  - native: libFuzzer over allocator operation sequences (native/scripts/fuzz.sh long), inputs that
//    add coverage merged into the kept corpus native/fuzz/corpus/*.b64 (commit what it adds);
//  - ts: the TypeScript readers (trace file, PyTorch snapshot, RMM log, torch.profiler trace, Umpire
//    log, Nsight Systems export) under Jazzer.js, libFuzzer
//    driving the instrumented JavaScript (scripts/dev/fuzz-ts.sh long), inputs that add coverage merged
//    into the kept corpus test/fuzz/corpus/*.b64 (commit what it adds);
//  - seeded: the same readers under the structure-aware seeded mutation fuzzer of
//    test/helpers/fuzz-runner.ts with a fresh seed, unbounded case count and a long budget, in a
//    child with a hang watchdog.
//   node scripts/dev/fuzz-long.mjs [--seconds=600] [--only=native|ts|seeded]
import { spawn, spawnSync } from 'node:child_process'
import { once } from 'node:events'
import { dirname, join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
const arg = (name) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3)
const seconds = Number(arg('seconds') ?? 600)
const only = arg('only')
const failed = []

if (only === undefined || only === 'native') {
  console.log(`\n=== native allocator operations (libFuzzer), ${seconds} s per target`)
  const run = spawnSync('bash', [join(root, 'native', 'scripts', 'fuzz.sh'), 'long', String(seconds)], { cwd: root, stdio: 'inherit' })
  if (run.status !== 0) failed.push('native')
}

if (only === undefined || only === 'ts') {
  console.log(`\n=== TypeScript readers (Jazzer.js), ${seconds} s per target`)
  const run = spawnSync('bash', [join(root, 'scripts', 'dev', 'fuzz-ts.sh'), 'long', String(seconds)], { cwd: root, stdio: 'inherit' })
  if (run.status !== 0) failed.push('ts')
}

if (only === undefined || only === 'seeded') {
  const runner = join(root, 'test', 'helpers', 'fuzz-runner.ts')
  for (const target of ['trace-file', 'rmm-log', 'pytorch-snapshot', 'kineto-trace', 'umpire-log', 'nsys-sqlite']) {
    const seed = Date.now() % 2 ** 31
    console.log(`\n=== ${target} (seeded mutation, seed ${seed}), ${seconds} s`)
    const child = spawn(process.execPath, ['--import', 'tsx', runner, target, String(seed), String(Number.MAX_SAFE_INTEGER), String(seconds * 1000)], {
      cwd: root,
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    const exited = once(child, 'exit')
    // A case that takes a minute has hung: the last "case" line names it.
    let lastCase = ''
    let lastCaseAt = Date.now()
    const watchdog = setInterval(() => {
      if (Date.now() - lastCaseAt > 60_000) child.kill('SIGKILL')
    }, 1000)
    for await (const line of createInterface({ input: child.stdout })) {
      if (line.startsWith('case ')) {
        lastCase = line
        lastCaseAt = Date.now()
      } else console.log(line)
    }
    const [code, signal] = await exited
    clearInterval(watchdog)
    if (signal !== null) console.log(`HANG: killed on ${lastCase} (seed ${seed})`)
    if (code !== 0 || signal !== null) failed.push(target)
  }
}

if (failed.length > 0) {
  console.error(`\nfuzz:long: FAILED: ${failed.join(', ')} (the failing inputs are printed above with their seeds)`)
  process.exit(1)
}
console.log('\nfuzz:long: nothing found')
