// `npm start`: the desktop app on the bundled sample trace (or on the files named after `--`).
// Where Electron's binary exists it builds the app (electron-vite) and runs it; where it is
// missing (CI, machines that reach only the npm registry) this says so, points to
// `vramscope serve`, and starts exactly that on the sample, so the README's first command always
// shows the app: open the printed URL.
import { spawn, spawnSync } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
const require = createRequire(import.meta.url)
const SAMPLE = join('resources', 'samples', 'transformer_varseq.pickle')

// Found the way electron's index.js finds it (path.txt names it under dist/), but never by
// requiring that file: where the binary is missing, it starts a download whose failure (no route
// to GitHub) prints a raw stack before anything this script can say. Downloading is the install
// step's job (scripts/dev/fetch-electron.mjs).
function electronBinary() {
  let dir
  try {
    dir = dirname(require.resolve('electron/package.json'))
  } catch {
    return { missing: 'the electron package is not installed' }
  }
  const pathFile = join(dir, 'path.txt')
  const binary = existsSync(pathFile) ? join(process.env.ELECTRON_OVERRIDE_DIST_PATH ?? join(dir, 'dist'), readFileSync(pathFile, 'utf8').trim()) : undefined
  if (binary !== undefined && existsSync(binary)) return { path: binary }
  return { missing: "Electron's binary was not downloaded" + (process.env.ELECTRON_SKIP_BINARY_DOWNLOAD ? ' (ELECTRON_SKIP_BINARY_DOWNLOAD is set)' : '') }
}

function run(command, args) {
  const child = spawn(command, args, { cwd: root, stdio: 'inherit' })
  for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal))
  child.on('exit', (code, signal) => process.exit(code ?? (signal ? 0 : 1)))
}

// Files named after `--` are taken from where npm was run; options (--port 8080, --host=...) go
// to serve, each with its value.
const VALUE_OPTIONS = new Set(['--port', '--host', '-p'])
const files = []
const options = []
const args = process.argv.slice(2).filter((a) => a !== '--')
for (let i = 0; i < args.length; i++) {
  const a = args[i]
  if (!a.startsWith('-')) files.push(resolve(process.env.INIT_CWD ?? process.cwd(), a))
  else {
    options.push(a)
    if (VALUE_OPTIONS.has(a) && i + 1 < args.length) options.push(args[++i])
  }
}
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
  console.log(`  Starting it now on ${files.length > 1 ? `a job of ${files.length} files` : (files[0] ?? `the bundled sample, ${SAMPLE}`)}:\n`)
  run(process.execPath, [join(root, 'bin', 'vramscope.mjs'), 'serve', ...(files.length > 0 ? files : [SAMPLE]), ...options])
}
