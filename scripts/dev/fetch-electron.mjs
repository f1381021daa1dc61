// Fetches Electron's binary after `npm install`, in place of electron's own postinstall (denied in
// package.json's allowScripts): same download, but a failure never fails the install. Where the
// binary cannot be had (CI, machines that reach only the npm registry) everything except the
// desktop window still works, and `npm start` says so.
import { spawnSync } from 'node:child_process'
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)

if (process.env.ELECTRON_SKIP_BINARY_DOWNLOAD) {
  console.log('vramscope: ELECTRON_SKIP_BINARY_DOWNLOAD is set, so the Electron binary is not fetched.')
  process.exit(0)
}

let installScript
try {
  installScript = require.resolve('electron/install.js')
} catch {
  process.exit(0) // electron is a devDependency: absent with --omit=dev, and nothing to fetch
}

// electron's install.js downloads only when the binary is missing or of another version.
const download = spawnSync(process.execPath, [installScript], {
  stdio: ['ignore', 'inherit', 'pipe'],
  encoding: 'utf8',
  timeout: 10 * 60 * 1000,
})
if (download.status !== 0) {
  // install.js prints a stack; its first line is the error. 'TypeError: fetch failed' (no route to
  // the host) says it in words, naming the host it tried.
  const first = (download.stderr || String(download.error ?? '')).trim().split('\n')[0] ?? ''
  const host = process.env.ELECTRON_MIRROR || 'github.com'
  const reason = /fetch failed/.test(first) ? `no connection to ${host}` : first.replace(/^(Type)?Error:\s*/, '')
  console.warn(
    `vramscope: the Electron binary could not be downloaded (${reason || 'no reason given'}).\n` +
      '  The install goes on: the native library and the tests work without it;\n' +
      '  only the desktop window needs it. To try again: node node_modules/electron/install.js',
  )
}
