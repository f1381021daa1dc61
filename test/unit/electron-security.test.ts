// Electron's security checklist, item by item, against what is BUILT (out/, from `electron-vite
// build`, which npm test runs first): the window options and CSP read out of the main bundle, the
// CSP of the built index.html, the built preload run against a stand-in for Electron, and the
// guards of security.ts exercised with stand-in web contents and sessions. Any regression fails.
import assert from 'node:assert/strict'
import { EventEmitter } from 'node:events'
import { existsSync, readFileSync } from 'node:fs'
import { join, sep } from 'node:path'
import { describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import vm from 'node:vm'

import { CHANNELS, EVENTS } from '../../src-shared/contract.ts'
import { APP_ENTRY, appUrlToFile, CONTENT_SECURITY_POLICY, denyAllPermissions, guardWebContents, isAppUrl } from '../../src-main/main/security.ts'

const OUT = fileURLToPath(new URL('../../out', import.meta.url))
const BUILT = ['main/index.js', 'main/worker.js', 'preload/index.cjs', 'renderer/index.html'].map((f) => join(OUT, f))
const missing = BUILT.filter((f) => !existsSync(f))
if (missing.length > 0) throw new Error(`the desktop app is not built (${missing.join(', ')} missing): run npm run build:app (npm test does)`)

const mainBundle = readFileSync(join(OUT, 'main', 'index.js'), 'utf8')
const preloadBundle = readFileSync(join(OUT, 'preload', 'index.cjs'), 'utf8')
const indexHtml = readFileSync(join(OUT, 'renderer', 'index.html'), 'utf8')

/** The source text of a top-level function of the bundle, evaluated on its own. */
function bundledFunction<T>(name: string): T {
  const start = mainBundle.indexOf(`function ${name}(`)
  assert.ok(start >= 0, `${name} is in the built main bundle`)
  let depth = 0
  let end = mainBundle.indexOf('{', start)
  for (let i = end; i < mainBundle.length; i++) {
    if (mainBundle[i] === '{') depth++
    else if (mainBundle[i] === '}' && --depth === 0) {
      end = i + 1
      break
    }
  }
  return new Function(`return (${mainBundle.slice(start, end)})`)() as T
}

/** A constant of the bundle: `var NAME = <expression>;` evaluated on its own. */
function bundledConstant(name: string): unknown {
  const match = new RegExp(`(?:var|const|let) ${name} = ([\\s\\S]*?);\\n`).exec(mainBundle)
  assert.ok(match, `${name} is in the built main bundle`)
  return new Function(`return (${match[1]})`)()
}

function directives(csp: string): Map<string, string[]> {
  return new Map(
    csp
      .split(';')
      .map((d) => d.trim().split(/\s+/))
      .filter((d) => d[0])
      .map((d) => [d[0]!, d.slice(1)]),
  )
}

describe('security of the built desktop app', () => {
  test('every window: context isolation, sandbox, no Node, web security, no webview (read from the built main bundle)', () => {
    const secureWebPreferences = bundledFunction<(preload: string) => Record<string, unknown>>('secureWebPreferences')
    const prefs = secureWebPreferences('/x/preload.cjs')
    assert.equal(prefs['contextIsolation'], true)
    assert.equal(prefs['sandbox'], true)
    assert.equal(prefs['nodeIntegration'], false)
    assert.equal(prefs['nodeIntegrationInWorker'], false)
    assert.equal(prefs['nodeIntegrationInSubFrames'], false)
    assert.equal(prefs['webSecurity'], true)
    assert.equal(prefs['allowRunningInsecureContent'], false)
    assert.equal(prefs['webviewTag'], false)
    assert.equal(prefs['experimentalFeatures'], false)
    assert.equal(prefs['preload'], '/x/preload.cjs')
    // Every BrowserWindow of the bundle takes exactly these preferences.
    const windows = [...mainBundle.matchAll(/new BrowserWindow\(\{[\s\S]*?\n\t\}\)/g)].map((m) => m[0])
    assert.ok(windows.length > 0, 'the bundle creates windows')
    for (const w of windows) assert.match(w, /webPreferences: secureWebPreferences\(PRELOAD\)/)
    assert.match(mainBundle, /app\.enableSandbox\(\)/, 'every renderer sandboxed, whoever creates it')
    for (const weakened of [/nodeIntegration: true/, /contextIsolation: false/, /sandbox: false/, /webSecurity: false/, /allowRunningInsecureContent: true/, /ELECTRON_DISABLE_SECURITY_WARNINGS/])
      assert.doesNotMatch(mainBundle, weakened)
  })

  test('pages come from app://, never file://; the app:// handler serves only the built renderer, with the CSP header', () => {
    // The bundler inlines the app:// entry where windows load it.
    const loads = [...mainBundle.matchAll(/\.loadURL\(([^)]*)\)/g)].map((m) => m[1])
    assert.deepEqual(loads, [`DEV_SERVER_URL ?? "${APP_ENTRY}"`])
    assert.ok(APP_ENTRY.startsWith('app://vramscope/'))
    assert.match(mainBundle, /DEV_SERVER_URL = app\.isPackaged \? void 0 :/, 'a packaged app never loads a dev server')
    assert.doesNotMatch(mainBundle, /loadFile\(|loadURL\(["'`]file:/)
    assert.match(mainBundle, /registerSchemesAsPrivileged\(\[\{\s*scheme: "app",\s*privileges: \{[^}]*secure: true/)
    assert.match(mainBundle, /"content-security-policy": CONTENT_SECURITY_POLICY/)
    const renderer = join(OUT, 'renderer')
    assert.equal(appUrlToFile('app://vramscope/index.html', renderer), join(renderer, 'index.html'))
    assert.equal(appUrlToFile('app://vramscope/', renderer), join(renderer, 'index.html'))
    // The URL parser folds plain dots itself (they stay inside); encoded separators are refused.
    for (const dotted of ['app://vramscope/../main/index.js', 'app://vramscope/%2e%2e/main/index.js'])
      assert.ok(appUrlToFile(dotted, renderer)!.startsWith(renderer + sep), dotted)
    for (const escape of ['app://vramscope/..%2fmain%2findex.js', 'app://vramscope/assets/..%2f..%2f..%2fpackage.json', 'app://vramscope/assets%5c..%5c..%5cmain', 'app://other/index.html', 'file:///etc/passwd', 'app://vramscope/%00', 'app://vramscope/%E0%A4%A'])
      assert.equal(appUrlToFile(escape, renderer), undefined, escape)
  })

  test('a strict CSP, the same in the main bundle and in the built index.html', () => {
    const fromBundle = bundledConstant('CONTENT_SECURITY_POLICY')
    assert.equal(fromBundle, CONTENT_SECURITY_POLICY)
    const meta = /<meta http-equiv="Content-Security-Policy" content="([^"]+)"/.exec(indexHtml)
    assert.ok(meta, 'the built index.html carries the CSP')
    assert.ok(indexHtml.indexOf('Content-Security-Policy') < indexHtml.indexOf('<script'), 'the CSP comes before any script')
    assert.equal(meta[1], fromBundle)
    const d = directives(meta[1]!)
    assert.deepEqual(d.get('default-src'), ["'none'"])
    assert.deepEqual(d.get('script-src'), ["'self'"], 'no inline scripts, no eval, no other origin')
    assert.deepEqual(d.get('object-src'), ["'none'"])
    assert.deepEqual(d.get('base-uri'), ["'none'"])
    assert.deepEqual(d.get('frame-ancestors'), ["'none'"])
    assert.deepEqual(d.get('form-action'), ["'none'"])
    assert.deepEqual(d.get('connect-src'), ["'self'"], 'no network')
    for (const [name, sources] of d)
      for (const s of sources) assert.ok(!/^(\*|https?:|ws:|wss:|'unsafe-eval'|'wasm-unsafe-eval')/.test(s) && !(s === "'unsafe-inline'" && name !== 'style-src'), `${name} ${s}`)
    assert.doesNotMatch(indexHtml, /<script(?![^>]*\bsrc=)[^>]*>/, 'no inline script in the built page')
  })

  test('navigation, redirects, new windows and webviews are refused; no shell.openExternal anywhere', () => {
    assert.match(mainBundle, /app\.on\("web-contents-created", \(_event, contents\) => guardWebContents\(contents, DEV_SERVER_URL\)\)/)
    assert.doesNotMatch(mainBundle, /openExternal\s*\(|\bshell\b[,}]/, 'main neither calls nor imports shell.openExternal')
    assert.doesNotMatch(preloadBundle, /openExternal|shell/)
    const contents = Object.assign(new EventEmitter(), { openHandler: undefined as undefined | ((d: { url: string }) => { action: string }) })
    const fake = Object.assign(contents, { setWindowOpenHandler: (h: (d: { url: string }) => { action: string }) => (contents.openHandler = h) })
    guardWebContents(fake as never)
    const navigate = (event: string, url: string) => {
      let prevented = false
      const e = { url, preventDefault: () => (prevented = true) }
      fake.emit(event, e, url)
      return prevented
    }
    assert.equal(navigate('will-navigate', 'https://example.com/'), true)
    assert.equal(navigate('will-navigate', 'file:///etc/passwd'), true)
    assert.equal(navigate('will-navigate', 'app://elsewhere/index.html'), true)
    assert.equal(navigate('will-navigate', APP_ENTRY), false, 'reloading its own page is fine')
    assert.equal(navigate('will-frame-navigate', 'https://example.com/'), true)
    assert.equal(navigate('will-redirect', 'http://127.0.0.1:1/'), true)
    assert.equal(navigate('will-attach-webview', 'app://vramscope/index.html'), true, 'webviews are refused outright')
    assert.deepEqual(fake.openHandler!({ url: 'https://example.com' }), { action: 'deny' })
    assert.deepEqual(fake.openHandler!({ url: APP_ENTRY }), { action: 'deny' })
    assert.equal(isAppUrl('http://localhost:5173/', undefined), false, 'no dev server unless one is running')
    assert.equal(isAppUrl('http://localhost:5173/x', 'http://localhost:5173/'), true)
  })

  test('every permission request and check is denied', () => {
    const handlers: Record<string, (...args: any[]) => unknown> = {}
    const session = {
      setPermissionRequestHandler: (h: never) => (handlers['request'] = h),
      setPermissionCheckHandler: (h: never) => (handlers['check'] = h),
      setDevicePermissionHandler: (h: never) => (handlers['device'] = h),
      setDisplayMediaRequestHandler: (h: never) => (handlers['display'] = h),
    }
    denyAllPermissions(session as never)
    for (const permission of ['media', 'geolocation', 'notifications', 'clipboard-read', 'openExternal', 'fileSystem']) {
      let granted: boolean | undefined
      handlers['request']!({}, permission, (g: boolean) => (granted = g))
      assert.equal(granted, false, permission)
      assert.equal(handlers['check']!({}, permission), false)
    }
    assert.equal(handlers['device']!({}), false)
    let stream: unknown
    handlers['display']!({}, (s: unknown) => (stream = s))
    assert.deepEqual(stream, {}, 'screen capture gets no source')
    assert.match(mainBundle, /denyAllPermissions\(session\.defaultSession\)/)
  })

  test('the built preload exposes one method per channel and per event, never ipcRenderer, and forwards only payloads', async () => {
    const listeners = new Map<string, Set<(...a: unknown[]) => void>>()
    const invoked: [string, unknown][] = []
    const ipcRenderer = {
      invoke: async (channel: string, arg: unknown) => {
        invoked.push([channel, arg])
        if (channel === 'trace:data') return { ok: true, value: new Uint8Array([1, 2, 3]) }
        if (channel === 'job:status') return { ok: false, error: { code: 'NOT_FOUND', message: 'job: no job "x"' } }
        return { ok: true, value: { echoed: arg } }
      },
      on: (event: string, l: (...a: unknown[]) => void) => (listeners.get(event) ?? listeners.set(event, new Set()).get(event)!).add(l),
      removeListener: (event: string, l: (...a: unknown[]) => void) => listeners.get(event)?.delete(l),
    }
    let exposed: Record<string, (...a: unknown[]) => unknown> | undefined
    const contextBridge = {
      exposeInMainWorld: (name: string, api: typeof exposed) => {
        assert.equal(name, 'vramscope')
        exposed = api
      },
    }
    // The preload runs as Electron's sandbox runs it: a CommonJS function given a `require` that
    // knows only 'electron'.
    const sandboxRequire = (id: string) => {
      if (id === 'electron') return { contextBridge, ipcRenderer }
      throw new Error(`a sandboxed preload cannot require ${id}`)
    }
    vm.runInNewContext(preloadBundle, { require: sandboxRequire, module: { exports: {} }, exports: {}, ArrayBuffer, Error, Object, Set, TypeError })
    assert.ok(exposed, 'the preload exposed its API')
    assert.deepEqual(Object.keys(exposed).sort(), [...CHANNELS, ...EVENTS].sort())
    for (const value of Object.values(exposed)) assert.equal(typeof value, 'function', 'only functions cross the bridge')
    assert.ok(!Object.values(exposed).includes(ipcRenderer.invoke as never))

    assert.deepEqual(await exposed['trace:openSample']!({ name: 'a' }), { echoed: { name: 'a' } })
    const bundle = await exposed['trace:data']!({ traceId: 't' })
    assert.ok(bundle instanceof ArrayBuffer && bundle.byteLength === 3, 'bundles reach the page as one ArrayBuffer')
    await assert.rejects(exposed['job:status']!({ jobId: 'x' }) as Promise<unknown>, (e: Error & { code?: string }) => e.message === 'job: no job "x"' && e.code === 'NOT_FOUND')
    assert.deepEqual(invoked.map(([c]) => c), ['trace:openSample', 'trace:data', 'job:status'])

    const received: unknown[] = []
    const unsubscribe = exposed['app:command']!((...args: unknown[]) => received.push(args)) as () => void
    assert.equal(typeof unsubscribe, 'function', 'a subscription returns its unsubscribe')
    const forward = [...listeners.get('app:command')!][0]!
    forward({ sender: ipcRenderer, ports: [] }, { command: 'shortcuts' })
    assert.deepEqual(received, [[{ command: 'shortcuts' }]], 'the page gets the payload alone, not the IPC event (which holds ipcRenderer)')
    unsubscribe()
    assert.equal(listeners.get('app:command')!.size, 0)
    assert.throws(() => exposed!['app:command']!('not a function'), TypeError)
  })

  test('heavy work stays out of main: its bundle carries no services, no native loader, no synchronous fs', () => {
    for (const heavy of [/loadNative|createRequire|replayTrace|openInput\(/, /readFileSync|writeFileSync|existsSync|statSync|readdirSync|execSync|spawnSync/])
      assert.doesNotMatch(mainBundle, heavy)
    assert.match(mainBundle, /forkElectronWorker\(WORKER_ENTRY/)
    assert.match(readFileSync(join(OUT, 'main', 'worker.js'), 'utf8'), /parentPort/)
  })
})
