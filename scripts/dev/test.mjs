// `npm test`: everything CI runs, in one place. The native ctest suites (CPU label, simulated
// backing), the sanitizer builds when native/scripts/sanitizers.sh exists, the short fuzz runs, the
// formatting check, the TypeScript type checks, then the Node tests (node:test + tsx). The last
// line printed is the count over every suite: `N passed, N failed, N skipped`; the exit status is
// non-zero when anything failed.
//   --only=native | --only=unit | --only=e2e   run one part
//   VRAMSCOPE_NATIVE_BUILD        the ctest build directory (default native/build)
//   VRAMSCOPE_CUDA                AUTO (default), ON or OFF: compile the CUDA code too
//   VRAMSCOPE_JOBS                parallel compile and test jobs (default: the cores, at most 8)
// What counts: ctest's tests, node:test's tests (from a TAP file beside the console output), and
// each other check (type checks, sanitizers, each fuzz run, formatting) as one suite. A step that
// cannot run says why and counts as skipped; a failed build counts as one failure (and the suites
// that needed it as skipped).
import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs'
import { availableParallelism, tmpdir } from 'node:os'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'

import { closingLine, ctestCounts, skipReason, tapCounts } from './test-report.mjs'

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
const only = process.argv.find((a) => a.startsWith('--only='))?.slice('--only='.length)
if (only !== undefined && only !== 'native' && only !== 'unit' && only !== 'e2e') {
  console.error(`npm test: --only must be native, unit or e2e, got '${only}'`)
  process.exit(2)
}
const jobs = process.env.VRAMSCOPE_JOBS ?? String(Math.min(availableParallelism(), 8))
const buildDir = join(root, process.env.VRAMSCOPE_NATIVE_BUILD ?? join('native', 'build'))
const cuda = process.env.VRAMSCOPE_CUDA ?? 'AUTO'
const totals = { passed: 0, failed: 0, skipped: 0 }
const failed = []

/** Runs a command, its output going to the console as it comes and, with `capture`, kept (the last 1 MB) for counting. */
function run(command, args, { capture = false, quiet = false, ...options } = {}) {
  return new Promise((resolve) => {
    const child = spawn(command, args, { cwd: root, stdio: capture || quiet ? ['inherit', 'pipe', 'pipe'] : 'inherit', ...options })
    let output = ''
    const keep = (to) => (chunk) => {
      if (!quiet) to.write(chunk)
      output = (output + chunk.toString()).slice(-(1 << 20))
    }
    child.stdout?.on('data', keep(process.stdout))
    child.stderr?.on('data', keep(process.stderr))
    child.on('error', (error) => resolve({ status: null, error, output }))
    child.on('close', (status, signal) => resolve({ status: signal ? null : status, error: signal ? new Error(`killed by ${signal}`) : undefined, output }))
  })
}

function record(title, counts, seconds, note = '') {
  totals.passed += counts.passed
  totals.failed += counts.failed
  totals.skipped += counts.skipped
  if (counts.failed > 0) failed.push(title)
  const parts = [counts.passed && `${counts.passed} passed`, counts.failed && `${counts.failed} failed`, counts.skipped && `${counts.skipped} skipped`].filter(
    Boolean,
  )
  console.log(
    `=== ${title}: ${counts.failed > 0 ? 'FAILED' : counts.passed > 0 || counts.skipped === 0 ? 'ok' : 'skipped'}${parts.length ? ` (${parts.join(', ')})` : ''}${note} in ${seconds} s`,
  )
}

function skip(title, reason) {
  totals.skipped++
  console.log(`\n=== ${title}: skipped, ${reason}`)
}

/**
 * One step. `kind`: 'suite' counts as one passed, failed or skipped suite (skipped where the script
 * says `== NAME: skipped, REASON`); 'build' counts only when it fails; a function maps the run to
 * counts (undefined: it did not get to count; either way a failing exit with no failure counted is
 * one failure).
 */
async function step(title, command, args, { kind = 'suite', ...options } = {}) {
  console.log(`\n=== ${title}: ${[command, ...args].map((a) => (a.startsWith(root) ? relative(root, a) || '.' : a)).join(' ')}`)
  const started = Date.now()
  const result = await run(command, args, { capture: kind !== 'build', ...options })
  const seconds = ((Date.now() - started) / 1000).toFixed(1)
  const ok = result.status === 0
  const why = ok ? '' : ` (${result.error?.message ?? `exit ${result.status}`})`
  let counts
  if (typeof kind === 'function') {
    counts = kind(result) ?? { passed: 0, failed: 0, skipped: 0 }
    if (!ok && counts.failed === 0) counts = { ...counts, failed: 1 }
  } else if (kind === 'build') counts = { passed: 0, failed: ok ? 0 : 1, skipped: 0 }
  else {
    const reason = ok ? skipReason(result.output) : undefined
    if (reason !== undefined) {
      totals.skipped++
      console.log(`=== ${title}: skipped, ${reason} (${seconds} s)`)
      return { ok, result }
    }
    counts = { passed: ok ? 1 : 0, failed: ok ? 0 : 1, skipped: 0 }
  }
  record(title, counts, seconds, counts.failed > 0 ? why : '')
  return { ok, result }
}

/** The node test runner over `files`: spec (or TAP, as node picks) on the console, TAP in a file that is counted. */
async function nodeTests(title, files, extraArgs = []) {
  const dir = mkdtempSync(join(tmpdir(), 'vramscope-test-'))
  const tap = join(dir, 'report.tap')
  const consoleReporter = process.stdout.isTTY ? 'spec' : 'tap'
  try {
    await step(
      title,
      process.execPath,
      [
        '--import',
        'tsx',
        '--test',
        ...extraArgs,
        `--test-reporter=${consoleReporter}`,
        '--test-reporter-destination=stdout',
        '--test-reporter=tap',
        `--test-reporter-destination=${tap}`,
        ...files,
      ],
      {
        capture: false,
        kind: () => (existsSync(tap) ? tapCounts(readFileSync(tap, 'utf8')) : undefined),
      },
    )
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

function newestNativeSource() {
  let newest = 0
  const walk = (dir) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (entry.name.startsWith('build')) continue
      const path = join(dir, entry.name)
      if (entry.isDirectory()) walk(path)
      else if (/\.(cpp|hpp|cu|cuh|h|txt)$/.test(entry.name)) newest = Math.max(newest, statSync(path).mtimeMs)
    }
  }
  walk(join(root, 'native'))
  return newest
}

if (only === undefined || only === 'native') {
  const configured = (
    await step('native configure', 'cmake', ['-S', join(root, 'native'), '-B', buildDir, '-DCMAKE_BUILD_TYPE=Release', `-DVRAMSCOPE_CUDA=${cuda}`], {
      kind: 'build',
    })
  ).ok
  const built = configured && (await step('native build', 'cmake', ['--build', buildDir, '--parallel', jobs], { kind: 'build' })).ok
  if (built)
    await step('native tests (ctest -L CPU)', 'ctest', ['--test-dir', buildDir, '-L', 'CPU', '--output-on-failure', '--parallel', jobs], {
      kind: (r) => ctestCounts(r.output),
    })
  else skip('native tests (ctest -L CPU)', 'the native build failed')
  const sanitizers = join(root, 'native', 'scripts', 'sanitizers.sh')
  if (existsSync(sanitizers)) await step('sanitizers', 'bash', [sanitizers], { env: { ...process.env, JOBS: jobs } })
  else skip('sanitizers', 'native/scripts/sanitizers.sh does not exist yet')
  // libFuzzer over allocator operation sequences, 45 s from the kept corpus (npm run fuzz:long: 10 min).
  await step('fuzz (libFuzzer, short)', 'bash', [join(root, 'native', 'scripts', 'fuzz.sh'), 'short', process.env.VRAMSCOPE_FUZZ_SECONDS ?? '45'], {
    env: { ...process.env, JOBS: jobs },
  })
}

if (only === undefined || only === 'unit' || only === 'e2e') {
  // Prettier (TypeScript, Svelte) and clang-format (native/): a difference fails; npm run format applies them.
  await step('formatting (npm run format:check)', process.execPath, [join(root, 'scripts', 'dev', 'format.mjs'), '--check'])
  const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc')
  await step('typecheck', process.execPath, [tsc, '--noEmit', '-p', join(root, 'tsconfig.json')])
  const svelteCheck = join(root, 'node_modules', 'svelte-check', 'bin', 'svelte-check')
  await step('typecheck the UI (svelte-check)', process.execPath, [
    svelteCheck,
    '--tsconfig',
    join(root, 'src-renderer', 'tsconfig.json'),
    '--threshold',
    'error',
    '--fail-on-warnings',
  ])
  await step(
    'build the UI (vite)',
    process.execPath,
    [join(root, 'node_modules', 'vite', 'bin', 'vite.js'), 'build', '-c', join(root, 'vite.renderer.config.ts'), '--logLevel', 'warn'],
    { kind: 'build' },
  )
  // The Node tests go through the addon: build it when it is missing or older than any native
  // source, so a developer never tests a stale binary.
  const addon = join(root, 'build', 'Release', 'vramscope.node')
  const stale = !existsSync(addon) || newestNativeSource() > statSync(addon).mtimeMs
  if (stale)
    await step('native addon (missing or older than native/, building it)', process.execPath, [join(root, 'scripts', 'dev', 'build-addon.mjs')], {
      kind: 'build',
    })
  // The desktop app's bundles (out/, with a copy of the addon): the preload test and the desktop e2e run what is built.
  await step(
    'build the desktop app (electron-vite)',
    process.execPath,
    [join(root, 'node_modules', 'electron-vite', 'bin', 'electron-vite.js'), 'build', '--logLevel', 'warn'],
    { kind: 'build' },
  )
  // Jazzer.js (libFuzzer over the instrumented TypeScript readers: trace file, PyTorch snapshot, RMM
  // CSV), 15 s each from the kept corpus (npm run fuzz:long: 10 min each).
  if (only !== 'e2e')
    await step('fuzz the TypeScript readers (Jazzer.js, short)', 'bash', [
      join(root, 'scripts', 'dev', 'fuzz-ts.sh'),
      'short',
      process.env.VRAMSCOPE_FUZZ_TS_SECONDS ?? '15',
    ])
  const testsIn = (...dirs) =>
    dirs.flatMap((dir) =>
      readdirSync(join(root, 'test', dir), { recursive: true })
        .filter((f) => f.endsWith('.test.ts'))
        .sort()
        .map((f) => join(root, 'test', dir, f)),
    )
  if (failed.length > 0) console.log(`\nnpm test: already failed: ${failed.join(', ')}; the Node tests run anyway`)
  // Unit tests (test/unit/, laid out as the sources are), integration tests of the CLI, the web host
  // and the worker process (test/integration/), and the load tests at their short default sizes
  // (test/load/; npm run test:load runs them long).
  if (only !== 'e2e') await nodeTests('node tests', testsIn('unit', 'integration', 'load'))
  // The UI in Chromium against the real `vramscope serve`, and the desktop app where Electron's
  // binary exists (each file skips its tests, saying why, where it cannot run).
  await nodeTests('browser tests (Chromium, Playwright; Electron)', testsIn('e2e'), ['--test-concurrency=1'])
}

if (failed.length > 0) console.error(`\nnpm test: FAILED: ${failed.join(', ')}`)
else console.log('')
console.log(closingLine(totals))
process.exitCode = totals.failed > 0 ? 1 : 0
