// `npm start`: the desktop app on the bundled sample trace (or on the files named after `--`).
// Where Electron's binary exists it builds the app (electron-vite) and runs it; where it is
// missing (CI, machines that reach only the npm registry) this says so, points to
// `vramscope serve`, and starts exactly that on the sample, so the README's first command always
// shows the app: open the printed URL.
import { spawn, spawnSync } from 'node:child_process'
import { createRequire } from 'node:module'
import { dirname, join, resolve } from 'node:path'
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
      return { missing: "Electron's binary was not downloaded" + (process.env.ELECTRON_SKIP_BINARY_DOWNLOAD ? ' (ELECTRON_SKIP_BINARY_DOWNLOAD is set)' : '') }
    } catch {
      return { missing: 'the electron package is not installed' }
    }
  }
}

function run(command, args) {
  const child = spawn(command, args, { cwd: root, stdio: 'inherit' })
  for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal))
  child.on('exit', (code, signal) => process.exit(code ?? (signal ? 0 : 1)))
}

// Files named after `--` are taken from where npm was run; options (--port, --host) go to serve.
const args = process.argv.slice(2)
const files = args.filter((a) => !a.startsWith('-')).map((f) => resolve(process.env.INIT_CWD ?? process.cwd(), f))
const options = args.filter((a) => a.startsWith('-'))
const electron = electronBinary()
if (electron.path) {
  // out/ is rebuilt every time: a start never shows a stale app.
  const build = spawnSync(process.execPath, [join(root, 'node_modules', 'electron-vite', 'bin', 'electron-vite.js'), 'build', '--logLevel', 'warn'], {
    cwd: root,
    stdio: 'inherit',
  })
  if (build.status !== 0) process.exit(build.status ?? 1)
  console.log(`vramscope: starting the desktop app (Electron at ${electron.path}).`)
  run(electron.path, ['.', ...(files.length > 0 ? files : [SAMPLE])])
} else {
  console.log(`vramscope: no desktop window here: ${electron.missing}.`)
  console.log('  (Fetch it with `node node_modules/electron/install.js` on a machine that can reach GitHub.)')
  console.log('  The same app runs in a browser with `npx vramscope serve [FILE]` (for GPU servers: over an SSH tunnel).')
  console.log(`  Starting it now on ${files[0] ?? `the bundled sample, ${SAMPLE}`}:\n`)
  run(process.execPath, [join(root, 'bin', 'vramscope.mjs'), 'serve', ...(files.length > 0 ? files.slice(0, 1) : [SAMPLE]), ...options])
}
