// `npm start`. The desktop app (Electron) arrives with a later issue; until then this says plainly
// what is here: whether Electron's binary is installed, that the headless `vramscope serve` comes
// with the web host, and what runs today, shown by comparing every strategy on a small workload.
//
// It exits 0 when it has explained: a missing Electron binary is the expected state of CI and of
// machines that reach only the npm registry, and a non-zero exit would bury the explanation under
// npm's failure banner. It exits 1 only when something is broken (the native addon will not load).
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)

function electronBinary() {
  try {
    // electron's index.js returns the binary's path, and throws when the binary was never fetched.
    return { path: require('electron') }
  } catch (error) {
    const installed = (() => {
      try {
        require.resolve('electron/package.json')
        return true
      } catch {
        return false
      }
    })()
    return { missing: installed ? 'its binary was not downloaded' : 'the electron package is not installed', error }
  }
}

const electron = electronBinary()
console.log('vramscope: the desktop app is not part of this version yet (it arrives with the Electron shell).')
if (electron.path) {
  console.log(`  Electron is installed (${electron.path}); the window will open from here once the shell exists.`)
} else {
  console.log(`  Electron: ${electron.missing}` + (process.env.ELECTRON_SKIP_BINARY_DOWNLOAD ? ' (ELECTRON_SKIP_BINARY_DOWNLOAD is set).' : '.'))
  console.log('  Fetch it with `node node_modules/electron/install.js` on a machine that can reach GitHub.')
}
console.log('  Headless mode, `vramscope serve` (the same UI in a browser, for GPU servers reached over SSH),')
console.log('  comes with the web host: not implemented yet.')
console.log('\nWhat works today: the native allocator library, its Node binding and the `vramscope` command.')
console.log('Replay a PyTorch run recorded on an H100 through several strategies, side by side:')
console.log('  npx vramscope replay test/fixtures/pytorch/transformer_varseq.pickle -s caching:preset=pytorch,slab,buddy')
console.log('(`npx vramscope --help` lists info, import, replay, export and diff.) `npm test` runs every')
console.log('suite; `npm run bench` times each strategy. A small comparison on a simulated 1 GiB device:\n')

let service
try {
  const { tsImport } = await import('tsx/esm/api')
  service = await tsImport('../src-main/services/allocators.ts', import.meta.url)
  service.listStrategies()
} catch (error) {
  console.error(`vramscope: the native library did not load: ${error.message}`)
  process.exit(1)
}

// One deterministic workload for every strategy: mixed sizes, frees keeping about 500 blocks live.
const count = 20_000
const ops = { kind: new Uint8Array(count), size: new Float64Array(count), stream: new Uint32Array(count), target: new Uint32Array(count) }
const sizes = [512, 4096, 65536, 300_000, 2_000_000]
const live = []
let seed = 1
for (let i = 0; i < count; i++) {
  seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0
  if (seed % 1000 < live.length) {
    ops.kind[i] = service.RunOpKind.free
    ops.target[i] = live.splice(seed % live.length, 1)[0]
  } else {
    ops.kind[i] = service.RunOpKind.alloc
    ops.size[i] = sizes[seed % sizes.length]
    live.push(i)
  }
}

const MiB = 1024 * 1024
const rows = [['strategy', 'peak reserved', 'peak requested', 'fragmentation', 'failed', 'ns/op']]
for (const info of service.listStrategies()) {
  try {
    const allocator = new service.Allocator(info.name, {}, 'simulated', { capacity: 1024 * MiB })
    const result = await allocator.runOps(ops)
    const stats = allocator.stats()
    rows.push([
      info.name,
      `${(stats.reservedPeak / MiB).toFixed(1)} MiB`,
      `${(stats.requestedPeak / MiB).toFixed(1)} MiB`,
      `${(stats.externalFragmentation * 100).toFixed(1)} %`,
      String(result.failures),
      (result.elapsedNs / count).toFixed(0),
    ])
    allocator.dispose()
  } catch (error) {
    rows.push([info.name, `error: ${error.code ?? ''} ${error.message}`])
  }
}
const widths = rows[0].map((_, c) => Math.max(...rows.map((r) => (r[c] ?? '').length)))
for (const row of rows) console.log('  ' + row.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]) : (cell ?? '').padStart(widths[c]))).join('  '))
console.log(`\n  ${count} operations each, default parameters; "failed": requests a strategy could not serve.`)
