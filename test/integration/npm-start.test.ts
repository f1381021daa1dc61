// `npm start` (scripts/dev/start.mjs) and the install step that fetches Electron's binary
// (scripts/dev/fetch-electron.mjs) where that binary cannot be downloaded: each says so in its own
// words, first, with no raw stack (TypeError: fetch failed) before them, and start goes on to serve
// the app in a browser. The download is made to fail at once (a mirror on a port nothing listens on).
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'

const ROOT = join(import.meta.dirname, '..', '..')
const ELECTRON = join(ROOT, 'node_modules', 'electron')
const binaryPresent = existsSync(join(ELECTRON, 'path.txt')) && existsSync(join(ELECTRON, 'dist', readFileSync(join(ELECTRON, 'path.txt'), 'utf8')))
const skip = binaryPresent
  ? "Electron's binary is here: npm start would open a window"
  : !existsSync(ELECTRON)
    ? 'the electron package is not installed'
    : false
// A mirror that refuses at once: any download fails with fetch failed, in milliseconds.
const env = { ...process.env, ELECTRON_MIRROR: 'http://127.0.0.1:9/', ELECTRON_GET_USE_PROXY: '', ELECTRON_SKIP_BINARY_DOWNLOAD: '' }

describe('npm start without an Electron binary', { skip }, () => {
  it('says so first, with no stack, and serves the app instead', async () => {
    const child = spawn(process.execPath, [join(ROOT, 'scripts', 'dev', 'start.mjs'), '--', '--port', '0'], {
      cwd: ROOT,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let out = ''
    child.stdout.on('data', (d: Buffer) => (out += d.toString()))
    child.stderr.on('data', (d: Buffer) => (out += d.toString()))
    try {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no URL in 60 s:\n${out}`)), 60_000)
        const check = (): void => {
          if (/https?:\/\/\S+/.test(out.split('Starting it now')[1] ?? '')) {
            clearTimeout(timer)
            resolve()
          }
        }
        child.stdout.on('data', check)
        child.once('exit', (code) => reject(new Error(`npm start exited ${code}:\n${out}`)))
      })
    } finally {
      child.kill('SIGTERM')
    }
    assert.match(out, /^vramscope: no desktop window here: Electron's binary was not downloaded/, out)
    assert.doesNotMatch(out, /TypeError|fetch failed|\n\s+at /, out)
  })
})

describe("the install step's fetch of Electron, where it fails", { skip }, () => {
  it('reports one clear line with the reason, and never fails the install', () => {
    const run = spawnSync(process.execPath, [join(ROOT, 'scripts', 'dev', 'fetch-electron.mjs')], { cwd: ROOT, env, encoding: 'utf8', timeout: 60_000 })
    assert.equal(run.status, 0, run.stdout + run.stderr)
    const out = run.stdout + run.stderr
    assert.match(out, /vramscope: the Electron binary could not be downloaded \(.*127\.0\.0\.1.*\)/, out)
    assert.doesNotMatch(out, /\n\s+at /, out)
  })
})
