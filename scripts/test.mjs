// `npm test`: everything CI runs, in one place. The native ctest suites (CPU label, simulated
// backing), the sanitizer builds when native/scripts/sanitizers.sh exists, the TypeScript type
// check, the short fuzz runs, then the Node tests (node:test + tsx), whose closing lines are the
// last thing printed.
//   --only=native | --only=unit   run one half
//   VRAMSCOPE_NATIVE_BUILD        the ctest build directory (default native/build)
//   VRAMSCOPE_CUDA                AUTO (default), ON or OFF: compile the CUDA code too
//   VRAMSCOPE_JOBS                parallel compile and test jobs (default: the cores, at most 8)
import { spawnSync } from 'node:child_process'
import { existsSync, readdirSync, statSync } from 'node:fs'
import { availableParallelism } from 'node:os'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const only = process.argv.find((a) => a.startsWith('--only='))?.slice('--only='.length)
if (only !== undefined && only !== 'native' && only !== 'unit' && only !== 'e2e') {
  console.error(`npm test: --only must be native, unit or e2e, got '${only}'`)
  process.exit(2)
}
const jobs = process.env.VRAMSCOPE_JOBS ?? String(Math.min(availableParallelism(), 8))
const buildDir = join(root, process.env.VRAMSCOPE_NATIVE_BUILD ?? join('native', 'build'))
const cuda = process.env.VRAMSCOPE_CUDA ?? 'AUTO'
const failed = []

// `last`: on success print nothing after the command, so that the node test runner's closing lines
// (# tests, # pass, # fail) end the output, where CI reads them.
function step(title, command, args, { last = false, ...options } = {}) {
  console.log(`\n=== ${title}: ${[command, ...args].map((a) => (a.startsWith(root) ? relative(root, a) || '.' : a)).join(' ')}`)
  const started = Date.now()
  const run = spawnSync(command, args, { cwd: root, stdio: 'inherit', ...options })
  const seconds = ((Date.now() - started) / 1000).toFixed(1)
  const ok = run.status === 0
  if (!ok) failed.push(title)
  if (ok && last) return ok
  console.log(`=== ${title}: ${ok ? 'ok' : `FAILED (${run.error?.message ?? `exit ${run.status}`})`} in ${seconds} s`)
  return ok
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
  const configured = step('native configure', 'cmake', ['-S', join(root, 'native'), '-B', buildDir, '-DCMAKE_BUILD_TYPE=Release', `-DVRAMSCOPE_CUDA=${cuda}`])
  const built = configured && step('native build', 'cmake', ['--build', buildDir, '--parallel', jobs])
  if (built) step('native tests (ctest -L CPU)', 'ctest', ['--test-dir', buildDir, '-L', 'CPU', '--output-on-failure', '--parallel', jobs])
  const sanitizers = join(root, 'native', 'scripts', 'sanitizers.sh')
  if (existsSync(sanitizers)) step('sanitizers', 'bash', [sanitizers], { env: { ...process.env, JOBS: jobs } })
  else console.log('\n=== sanitizers: skipped, native/scripts/sanitizers.sh does not exist yet')
  // libFuzzer over allocator operation sequences, 45 s from the kept corpus (npm run fuzz:long: 10 min).
  step('fuzz (libFuzzer, short)', 'bash', [join(root, 'native', 'scripts', 'fuzz.sh'), 'short', process.env.VRAMSCOPE_FUZZ_SECONDS ?? '45'], { env: { ...process.env, JOBS: jobs } })
}

if (only === undefined || only === 'unit' || only === 'e2e') {
  const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc')
  step('typecheck', process.execPath, [tsc, '--noEmit', '-p', join(root, 'tsconfig.json')])
  const svelteCheck = join(root, 'node_modules', 'svelte-check', 'bin', 'svelte-check')
  step('typecheck the UI (svelte-check)', process.execPath, [svelteCheck, '--tsconfig', join(root, 'src-renderer', 'tsconfig.json'), '--threshold', 'error', '--fail-on-warnings'])
  step('build the UI (vite)', process.execPath, [join(root, 'node_modules', 'vite', 'bin', 'vite.js'), 'build', '-c', join(root, 'vite.renderer.config.ts'), '--logLevel', 'warn'])
  // The Node tests go through the addon: build it when it is missing or older than any native
  // source, so a developer never tests a stale binary.
  const addon = join(root, 'build', 'Release', 'vramscope.node')
  const stale = !existsSync(addon) || newestNativeSource() > statSync(addon).mtimeMs
  if (stale) step('native addon (missing or older than native/, building it)', process.execPath, [join(root, 'scripts', 'build-addon.mjs')])
  // The desktop app's bundles (out/, with a copy of the addon): the security and packaging tests read what is built.
  step('build the desktop app (electron-vite)', process.execPath, [join(root, 'node_modules', 'electron-vite', 'bin', 'electron-vite.js'), 'build', '--logLevel', 'warn'])
  // Jazzer.js (libFuzzer over the instrumented TypeScript readers: trace file, PyTorch snapshot, RMM
  // CSV), 15 s each from the kept corpus (npm run fuzz:long: 10 min each).
  if (only !== 'e2e') step('fuzz the TypeScript readers (Jazzer.js, short)', 'bash', [join(root, 'scripts', 'fuzz-ts.sh'), 'short', process.env.VRAMSCOPE_FUZZ_TS_SECONDS ?? '15'])
  const testsIn = (dir) => readdirSync(join(root, 'test', dir)).filter((f) => f.endsWith('.test.ts')).sort().map((f) => join(root, 'test', dir, f))
  if (failed.length > 0) console.log(`\nnpm test: already failed: ${failed.join(', ')}; the Node tests run anyway`)
  if (only !== 'e2e') step('node tests', process.execPath, ['--import', 'tsx', '--test', ...testsIn('unit')])
  // The UI in Chromium against the real `vramscope serve` (each file skips, saying why, without a Chromium).
  step('browser tests (Chromium, Playwright)', process.execPath, ['--import', 'tsx', '--test', '--test-concurrency=1', ...testsIn('e2e')], { last: failed.length === 0 })
}

if (failed.length > 0) {
  console.error(`\nnpm test: FAILED: ${failed.join(', ')}`)
  process.exit(1)
}
