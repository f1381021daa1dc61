// Builds the Node addon build/Release/vramscope.node from native/ with cmake-js; `npm install` runs
// it. Node-API only (native/package.json says so), so the headers come from the node-api-headers
// package and nothing is downloaded. CUDA backings are compiled when CMake finds nvcc.
import { spawnSync } from 'node:child_process'
import { createRequire } from 'node:module'
import { availableParallelism } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
const require = createRequire(import.meta.url)

function fail(message) {
  console.error(`\nvramscope: ${message}\n`)
  process.exit(1)
}

const cmake = spawnSync('cmake', ['--version'], { encoding: 'utf8' })
if (cmake.error || cmake.status !== 0) {
  fail(
    'building the native addon needs CMake >= 3.24 and a C++17 compiler, and `cmake` was not found.\n' +
      '  Debian/Ubuntu: sudo apt-get install cmake g++   macOS: brew install cmake\n' +
      'Then run `npm install` again.',
  )
}

let cmakeJs
try {
  cmakeJs = require.resolve('cmake-js/bin/cmake-js')
} catch {
  fail('cmake-js is not installed; run `npm install` (not `npm install --ignore-scripts --omit=...`).')
}

// VRAMSCOPE_CUDA=AUTO|ON|OFF is passed on to CMake (AUTO: CUDA when nvcc is found).
const cuda = process.env.VRAMSCOPE_CUDA
if (cuda !== undefined && !['AUTO', 'ON', 'OFF'].includes(cuda)) {
  fail(`VRAMSCOPE_CUDA must be AUTO, ON or OFF, got '${cuda}'`)
}
const jobs = process.env.VRAMSCOPE_JOBS ?? String(Math.min(availableParallelism(), 8))

// Configure every time (a few seconds), so that a changed VRAMSCOPE_CUDA or a new source file is
// picked up; cmake-js's `build` alone keeps whatever the first configuration cached.
const common = ['--directory', join(root, 'native'), '--out', join(root, 'build'), '--config', 'Release']
const steps = [
  ['configure', ...common, `--CDVRAMSCOPE_CUDA=${cuda ?? 'AUTO'}`],
  ['build', ...common, '--parallel', jobs],
]
let build = { status: 0 }
for (const step of steps) {
  build = spawnSync(process.execPath, [cmakeJs, ...step], { cwd: root, stdio: 'inherit' })
  if (build.status !== 0) break
}
if (build.status !== 0) {
  fail('the native addon did not build (see the compiler output above).\n' + 'To build without CUDA: VRAMSCOPE_CUDA=OFF npm run build:addon')
}
