// Electron's security checklist, item by item, against what src-main/main/security.ts exports and
// main/index.ts calls (window preferences, sandbox, app:// origin and handler, CSP, navigation and
// permission guards), exercised with stand-ins for Electron's app, protocol, web contents and
// session; then what only the build holds (the CSP <meta> of the built index.html, the built
// preload run as Electron's sandbox runs it), and the main process's own sources (what it imports,
// what it never calls). test/e2e/electron.e2e.test.ts checks a running window where Electron exists.
import assert from 'node:assert/strict'
import { EventEmitter } from 'node:events'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { dirname, join, resolve, sep } from 'node:path'
import { describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import vm from 'node:vm'

import { CHANNELS, EVENTS } from '../../../src-shared/contract.ts'
import {
  APP_ENTRY,
  APP_RESPONSE_HEADERS,
  appProtocolHandler,
  appUrlToFile,
  CONTENT_SECURITY_POLICY,
  denyAllPermissions,
  devServerUrlOf,
  guardWebContents,
  isAppUrl,
  pageUrl,
  PRIVILEGED_SCHEMES,
  SECURE_WEB_PREFERENCES,
  secureApp,
  secureWebPreferences,
} from '../../../src-main/main/security.ts'

const ROOT = fileURLToPath(new URL('../../..', import.meta.url))
const MAIN_DIR = join(ROOT, 'src-main', 'main')

/** A file of the built app (out/, from `electron-vite build`, which npm test runs first). */
function built(file: string): string {
  const path = join(ROOT, 'out', file)
  if (!existsSync(path)) throw new Error(`the desktop app is not built (${path} missing): run npm run build:app (npm test does)`)
  return path
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

/** A web contents stand-in: an emitter with setWindowOpenHandler. */
function fakeWebContents() {
  const contents = Object.assign(new EventEmitter(), { openHandler: undefined as undefined | ((d: { url: string }) => { action: string }) })
  return Object.assign(contents, { setWindowOpenHandler: (h: (d: { url: string }) => { action: string }) => (contents.openHandler = h) })
}

/** Whether the guarded contents prevented `event` to `url`. */
function prevented(contents: EventEmitter, event: string, url: string): boolean {
  let refused = false
  contents.emit(event, { url, preventDefault: () => (refused = true) }, url)
  return refused
}

/** The relative imports of a source file that carry code (not `import type`), resolved. */
function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8')
  return [...text.matchAll(/^(?:import|export)\s(?!type\s)[^'"]*?from\s+'(\.[^']+)'/gm)].map((m) => resolve(dirname(file), m[1]!))
}

/** Every source file main's entry reaches through relative imports (what electron-vite bundles into out/main/index.js). */
function mainModuleGraph(): string[] {
  const seen = new Set<string>()
  const visit = (file: string) => {
    if (seen.has(file)) return
    seen.add(file)
    for (const next of importsOf(file)) visit(next)
  }
  visit(join(MAIN_DIR, 'index.ts'))
  return [...seen]
}

describe('security of the desktop app', () => {
  test('every window: context isolation, sandbox, no Node, web security, no webview, no experimental features', () => {
    const prefs = secureWebPreferences('/x/preload.cjs') as Record<string, unknown>
    assert.equal(prefs['contextIsolation'], true)
    assert.equal(prefs['sandbox'], true)
    assert.equal(prefs['nodeIntegration'], false)
    assert.equal(prefs['nodeIntegrationInWorker'], false)
    assert.equal(prefs['nodeIntegrationInSubFrames'], false)
    assert.equal(prefs['webSecurity'], true)
    assert.equal(prefs['allowRunningInsecureContent'], false)
    assert.equal(prefs['webviewTag'], false)
    assert.equal(prefs['experimentalFeatures'], false)
    assert.equal(prefs['enableBlinkFeatures'], '')
    assert.equal(prefs['navigateOnDragDrop'], false)
    assert.equal(prefs['preload'], '/x/preload.cjs')
    assert.deepEqual(prefs, { preload: '/x/preload.cjs', ...SECURE_WEB_PREFERENCES }, 'nothing but the preload is added')
    assert.ok(Object.isFrozen(SECURE_WEB_PREFERENCES), 'no caller can weaken the shared settings')
  })

  test('before ready: app:// privileged as a secure standard scheme, every renderer sandboxed, every web contents guarded', () => {
    const calls: string[] = []
    let schemes: unknown
    let created: ((event: unknown, contents: unknown) => void) | undefined
    const app = {
      enableSandbox: () => calls.push('enableSandbox'),
      on: (event: string, listener: (event: unknown, contents: unknown) => void) => {
        calls.push(`on ${event}`)
        if (event === 'web-contents-created') created = listener
      },
    }
    const protocol = { registerSchemesAsPrivileged: (s: unknown) => ((schemes = s), calls.push('registerSchemesAsPrivileged')) }
    secureApp(app as never, protocol as never, undefined)
    assert.deepEqual(calls.sort(), ['enableSandbox', 'on web-contents-created', 'registerSchemesAsPrivileged'])
    assert.deepEqual(schemes, [{ scheme: 'app', privileges: { standard: true, secure: true, supportFetchAPI: true, codeCache: true } }])
    assert.deepEqual(schemes, PRIVILEGED_SCHEMES)
    // Any web contents created later (a window, a webview, a devtools page) is held to the app's pages.
    const contents = fakeWebContents()
    created!({}, contents)
    assert.equal(prevented(contents, 'will-navigate', 'https://example.com/'), true)
    assert.deepEqual(contents.openHandler!({ url: 'https://example.com' }), { action: 'deny' })
  })

  test('pages come from app://, never file://; a packaged app never loads a dev server', () => {
    assert.ok(APP_ENTRY.startsWith('app://vramscope/'))
    assert.equal(pageUrl(undefined), APP_ENTRY)
    assert.equal(devServerUrlOf(true, { ELECTRON_RENDERER_URL: 'http://localhost:5173/' }), undefined, 'packaged: the variable is ignored')
    assert.equal(devServerUrlOf(false, { ELECTRON_RENDERER_URL: 'http://localhost:5173/' }), 'http://localhost:5173/')
    assert.equal(devServerUrlOf(false, {}), undefined)
    assert.equal(pageUrl(devServerUrlOf(true, { ELECTRON_RENDERER_URL: 'file:///etc/passwd' })), APP_ENTRY)
  })

  test('the app:// handler serves only the built renderer, with the CSP and the other security headers', async () => {
    const renderer = join(ROOT, 'out', 'renderer')
    assert.equal(appUrlToFile('app://vramscope/index.html', renderer), join(renderer, 'index.html'))
    assert.equal(appUrlToFile('app://vramscope/', renderer), join(renderer, 'index.html'))
    // The URL parser folds plain dots itself (they stay inside); encoded separators are refused.
    for (const dotted of ['app://vramscope/../main/index.js', 'app://vramscope/%2e%2e/main/index.js'])
      assert.ok(appUrlToFile(dotted, renderer)!.startsWith(renderer + sep), dotted)
    for (const escape of [
      'app://vramscope/..%2fmain%2findex.js',
      'app://vramscope/assets/..%2f..%2f..%2fpackage.json',
      'app://vramscope/assets%5c..%5c..%5cmain',
      'app://other/index.html',
      'file:///etc/passwd',
      'app://vramscope/%00',
      'app://vramscope/%E0%A4%A',
    ])
      assert.equal(appUrlToFile(escape, renderer), undefined, escape)

    const read: string[] = []
    const handler = appProtocolHandler(renderer, async (path) => {
      read.push(path)
      if (path.endsWith('missing.js')) throw new Error('ENOENT')
      return new TextEncoder().encode('<html></html>')
    })
    const page = await handler(new Request('app://vramscope/index.html'))
    assert.equal(page.status, 200)
    assert.equal(page.headers.get('content-security-policy'), CONTENT_SECURITY_POLICY)
    for (const [name, value] of Object.entries(APP_RESPONSE_HEADERS)) assert.equal(page.headers.get(name), value, name)
    assert.equal(page.headers.get('x-content-type-options'), 'nosniff')
    assert.match(page.headers.get('content-type') ?? '', /^text\/html/)
    assert.equal((await handler(new Request('app://vramscope/..%2f..%2fpackage.json'))).status, 404)
    assert.equal((await handler(new Request('app://other/index.html'))).status, 404)
    assert.equal((await handler(new Request('app://vramscope/assets/missing.js'))).status, 404)
    assert.deepEqual(read, [join(renderer, 'index.html'), join(renderer, 'assets', 'missing.js')], 'refused URLs never reach the disk')
  })

  test('a strict CSP: no inline or remote script, no eval, no network, no plugins, frames, <base> or forms', () => {
    const d = directives(CONTENT_SECURITY_POLICY)
    assert.deepEqual(d.get('default-src'), ["'none'"])
    assert.deepEqual(d.get('script-src'), ["'self'"], 'no inline scripts, no eval, no other origin')
    assert.deepEqual(d.get('object-src'), ["'none'"])
    assert.deepEqual(d.get('base-uri'), ["'none'"])
    assert.deepEqual(d.get('frame-ancestors'), ["'none'"])
    assert.deepEqual(d.get('form-action'), ["'none'"])
    assert.deepEqual(d.get('connect-src'), ["'self'"], 'no network')
    for (const [name, sources] of d)
      for (const s of sources)
        assert.ok(!/^(\*|https?:|ws:|wss:|'unsafe-eval'|'wasm-unsafe-eval')/.test(s) && !(s === "'unsafe-inline'" && name !== 'style-src'), `${name} ${s}`)
  })

  test('navigation, redirects, new windows and webviews are refused', () => {
    const contents = fakeWebContents()
    guardWebContents(contents as never)
    assert.equal(prevented(contents, 'will-navigate', 'https://example.com/'), true)
    assert.equal(prevented(contents, 'will-navigate', 'file:///etc/passwd'), true)
    assert.equal(prevented(contents, 'will-navigate', 'app://elsewhere/index.html'), true)
    assert.equal(prevented(contents, 'will-navigate', APP_ENTRY), false, 'reloading its own page is fine')
    assert.equal(prevented(contents, 'will-frame-navigate', 'https://example.com/'), true)
    assert.equal(prevented(contents, 'will-redirect', 'http://127.0.0.1:1/'), true)
    assert.equal(prevented(contents, 'will-attach-webview', 'app://vramscope/index.html'), true, 'webviews are refused outright')
    assert.deepEqual(contents.openHandler!({ url: 'https://example.com' }), { action: 'deny' })
    assert.deepEqual(contents.openHandler!({ url: APP_ENTRY }), { action: 'deny' })
    assert.equal(isAppUrl('http://localhost:5173/', undefined), false, 'no dev server unless one is running')
    assert.equal(isAppUrl('http://localhost:5173/x', 'http://localhost:5173/'), true)
    // With a dev server, its origin is the app's and nothing else is.
    const dev = fakeWebContents()
    guardWebContents(dev as never, 'http://localhost:5173/')
    assert.equal(prevented(dev, 'will-navigate', 'http://localhost:5173/index.html'), false)
    assert.equal(prevented(dev, 'will-navigate', 'http://localhost:5174/'), true)
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
  })

  test("main's sources: every window and the app go through security.ts, nothing weakens a setting or opens outside links", () => {
    const sources = readdirSync(MAIN_DIR)
      .filter((f) => f.endsWith('.ts'))
      .map((f) => [f, readFileSync(join(MAIN_DIR, f), 'utf8')] as const)
    const index = sources.find(([f]) => f === 'index.ts')![1]
    // These calls are what ties index.ts to the settings tested above.
    assert.match(index, /^secureApp\(app, protocol, DEV_SERVER_URL\)$/m, 'secureApp before ready, at the top level')
    assert.match(index, /denyAllPermissions\(session\.defaultSession\)/)
    assert.match(index, /protocol\.handle\(APP_SCHEME, appProtocolHandler\(RENDERER_DIR, readFile\)\)/)
    assert.match(index, /const DEV_SERVER_URL = devServerUrlOf\(app\.isPackaged, process\.env\)/)
    for (const [file, text] of sources) {
      const windows = [...text.matchAll(/new BrowserWindow\(\{[\s\S]*?\n  \}\)/g)].map((m) => m[0])
      for (const w of windows) assert.match(w, /webPreferences: secureWebPreferences\(PRELOAD\)/, `${file}: every BrowserWindow takes secureWebPreferences`)
      if (file === 'index.ts') assert.ok(windows.length > 0, 'index.ts creates windows')
      for (const load of text.matchAll(/\.loadURL\(([^)]*\)?)\)/g)) assert.equal(load[1], 'pageUrl(DEV_SERVER_URL)', `${file}: windows load pageUrl() only`)
      assert.doesNotMatch(text, /loadFile\(/, `${file}: no file:// pages`)
      if (file === 'security.ts') continue
      for (const weakened of [
        /nodeIntegration: true/,
        /contextIsolation: false/,
        /sandbox: false/,
        /webSecurity: false/,
        /allowRunningInsecureContent: true/,
        /ELECTRON_DISABLE_SECURITY_WARNINGS/,
        /registerSchemesAsPrivileged|enableSandbox|setPermission\w*Handler/,
      ])
        assert.doesNotMatch(text, weakened, `${file}: ${weakened}`)
      assert.doesNotMatch(
        text,
        /openExternal\s*\(|import\s*\{[^}]*\bshell\b[^}]*\}\s*from\s*'electron'/,
        `${file} neither calls nor imports shell.openExternal`,
      )
    }
  })

  test('heavy work stays out of main: what it imports reaches no services, no native loader, no synchronous fs', () => {
    const graph = mainModuleGraph()
    assert.ok(graph.some((f) => f.endsWith(`main${sep}security.ts`)) && graph.some((f) => f.includes(`src-shared${sep}`)), 'the import graph was followed')
    for (const file of graph) {
      assert.ok(!file.includes(`${sep}services${sep}`) && !file.endsWith(`src-main${sep}native.ts`), `main imports ${file}`)
      assert.doesNotMatch(readFileSync(file, 'utf8'), /\b(readFileSync|writeFileSync|existsSync|statSync|readdirSync|execSync|spawnSync|createRequire)\b/, file)
    }
    assert.match(readFileSync(join(MAIN_DIR, 'index.ts'), 'utf8'), /forkElectronWorker\(WORKER_ENTRY/, 'the native module lives in the worker process')
  })

  test('the built index.html carries the same CSP as a <meta>, before any script, and no inline script', () => {
    const indexHtml = readFileSync(built('renderer/index.html'), 'utf8')
    const meta = /<meta http-equiv="Content-Security-Policy" content="([^"]+)"/.exec(indexHtml)
    assert.ok(meta, 'the built index.html carries the CSP')
    assert.equal(meta[1], CONTENT_SECURITY_POLICY)
    assert.ok(indexHtml.indexOf('Content-Security-Policy') < indexHtml.indexOf('<script'), 'the CSP comes before any script')
    assert.doesNotMatch(indexHtml, /<script(?![^>]*\bsrc=)[^>]*>/, 'no inline script in the built page')
    assert.match(readFileSync(built('main/worker.js'), 'utf8'), /parentPort/, 'the built worker entry is a utility process')
  })

  test('the built preload exposes one method per channel and per event, never ipcRenderer nor anything else of Electron, and forwards only payloads', async () => {
    const preloadBundle = readFileSync(built('preload/index.cjs'), 'utf8')
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
    // Whatever else it reads of Electron (shell.openExternal, …) is recorded and refused below.
    const otherElectron: string[] = []
    const electron = new Proxy({ contextBridge, ipcRenderer } as Record<string | symbol, unknown>, {
      get: (target, key) => {
        if (typeof key === 'string' && !['contextBridge', 'ipcRenderer', '__esModule', 'default'].includes(key)) otherElectron.push(key)
        return target[key]
      },
    })
    const sandboxRequire = (id: string) => {
      if (id === 'electron') return electron
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
    await assert.rejects(
      exposed['job:status']!({ jobId: 'x' }) as Promise<unknown>,
      (e: Error & { code?: string }) => e.message === 'job: no job "x"' && e.code === 'NOT_FOUND',
    )
    assert.deepEqual(
      invoked.map(([c]) => c),
      ['trace:openSample', 'trace:data', 'job:status'],
    )

    const received: unknown[] = []
    const unsubscribe = exposed['app:command']!((...args: unknown[]) => received.push(args)) as () => void
    assert.equal(typeof unsubscribe, 'function', 'a subscription returns its unsubscribe')
    const forward = [...listeners.get('app:command')!][0]!
    forward({ sender: ipcRenderer, ports: [] }, { command: 'shortcuts' })
    assert.deepEqual(received, [[{ command: 'shortcuts' }]], 'the page gets the payload alone, not the IPC event (which holds ipcRenderer)')
    unsubscribe()
    assert.equal(listeners.get('app:command')!.size, 0)
    assert.throws(() => exposed!['app:command']!('not a function'), TypeError)
    assert.deepEqual(otherElectron, [], 'the preload uses contextBridge and ipcRenderer only (no shell)')
  })
})
