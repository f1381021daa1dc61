// `npm start`: the app on the bundled sample trace. The desktop window (Electron) comes with the
// shell; until it is there, and wherever Electron's binary is missing (CI, machines that reach only
// the npm registry), this says so, points to `vramscope serve`, and starts exactly that on the
// sample, so the README's first command always shows the app: open the printed URL.
import { spawn } from 'node:child_process'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const require = createRequire(import.meta.url)
const SAMPLE = join('resources', 'samples', 'transformer_varseq.pickle')

function electronBinary() {
  try {
    // electron's index.js returns the binary's path, and throws when the binary was never fetched.
    return { path: require('electron') }
  } catch {
    try {
      require.resolve('electron/package.json')
      return { missing: 'its binary was not downloaded' + (process.env.ELECTRON_SKIP_BINARY_DOWNLOAD ? ' (ELECTRON_SKIP_BINARY_DOWNLOAD is set)' : '') }
    } catch {
      return { missing: 'the electron package is not installed' }
    }
  }
}

const electron = electronBinary()
if (electron.path) {
  console.log(`vramscope: Electron is installed (${electron.path}), but the desktop shell is not part of this version yet.`)
} else {
  console.log(`vramscope: no desktop window here: Electron ${electron.missing}.`)
  console.log('  (Fetch it with `node node_modules/electron/install.js` on a machine that can reach GitHub.)')
}
console.log('  The same app runs in a browser with `npx vramscope serve [FILE]` (for GPU servers: over an SSH tunnel).')
console.log(`  Starting it now on the bundled sample, ${SAMPLE}:\n`)

const child = spawn(process.execPath, [join(root, 'bin', 'vramscope.mjs'), 'serve', SAMPLE, ...process.argv.slice(2)], { cwd: root, stdio: 'inherit' })
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal))
child.on('exit', (code, signal) => process.exit(code ?? (signal ? 0 : 1)))
