// The desktop shell's security settings in one place (Electron's security checklist): the window's
// web preferences, the Content-Security-Policy, the app:// origin the pages come from and its
// handler, the sandbox, and the guards on navigation, new windows, webviews and permissions.
// main/index.ts only calls these; test/unit/main/electron-security.test.ts tests them as exported, and
// test/e2e/electron.e2e.test.ts checks a running window against them.
import { extname, isAbsolute, join, normalize, relative, sep } from 'node:path'

import type { App, Protocol, Session, WebContents, WebPreferences } from 'electron'

import { CONTENT_SECURITY_POLICY, contentTypeOf } from '../ipc/page-policy.ts'

/** Pages come from app://vramscope/…, never file:// (a file:// page may read any local file). */
export const APP_SCHEME = 'app'
export const APP_HOST = 'vramscope'
export const APP_ORIGIN = `${APP_SCHEME}://${APP_HOST}`
export const APP_ENTRY = `${APP_ORIGIN}/index.html`

// The renderer's policy, shared with the web host (src-main/ipc/page-policy.ts). Served as a
// header by the app:// handler and as a <meta> in the built index.html.
export { CONTENT_SECURITY_POLICY }

/** Every window's web preferences, but for the preload script's path (secureWebPreferences adds it). */
export const SECURE_WEB_PREFERENCES = Object.freeze({
  contextIsolation: true,
  sandbox: true,
  nodeIntegration: false,
  nodeIntegrationInWorker: false,
  nodeIntegrationInSubFrames: false,
  webSecurity: true,
  allowRunningInsecureContent: false,
  experimentalFeatures: false,
  enableBlinkFeatures: '',
  webviewTag: false,
  navigateOnDragDrop: false,
  spellcheck: false,
} as const satisfies WebPreferences)

/** The webPreferences of every BrowserWindow main creates. */
export function secureWebPreferences(preload: string): WebPreferences {
  return { preload, ...SECURE_WEB_PREFERENCES }
}

/** app:// is a standard, secure origin (module workers and fetch of its own files work). */
export const PRIVILEGED_SCHEMES = [{ scheme: APP_SCHEME, privileges: { standard: true, secure: true, supportFetchAPI: true, codeCache: true } }] as const

/** `electron-vite dev` serves the renderer with hot reload: its URL, never trusted in a packaged app. */
export function devServerUrlOf(packaged: boolean, env: Readonly<Record<string, string | undefined>>): string | undefined {
  return packaged ? undefined : env['ELECTRON_RENDERER_URL']
}

/** The page every window loads: the built renderer from app://, or the dev server when there is one. */
export function pageUrl(devServerUrl: string | undefined): string {
  return devServerUrl ?? APP_ENTRY
}

/**
 * What must happen before the app is ready: app:// registered as privileged, every renderer
 * sandboxed (whoever creates it), and every web contents held to the app's pages.
 */
export function secureApp(app: Pick<App, 'enableSandbox' | 'on'>, protocol: Pick<Protocol, 'registerSchemesAsPrivileged'>, devServerUrl?: string): void {
  protocol.registerSchemesAsPrivileged(PRIVILEGED_SCHEMES.map((s) => ({ scheme: s.scheme, privileges: { ...s.privileges } })))
  app.enableSandbox()
  app.on('web-contents-created', (_event, contents) => guardWebContents(contents, devServerUrl))
}

/** Whether a URL is one of the app's own pages (the dev server's in `electron-vite dev`). */
export function isAppUrl(url: string, devServerUrl?: string): boolean {
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    return false
  }
  if (parsed.protocol === `${APP_SCHEME}:` && parsed.host === APP_HOST) return true
  if (devServerUrl !== undefined && devServerUrl !== '') {
    const dev = new URL(devServerUrl)
    return parsed.origin === dev.origin
  }
  return false
}

/**
 * The file an app:// URL names inside the built renderer, or undefined for anything else
 * (another host, a path that climbs out with `..` or encoded separators).
 */
export function appUrlToFile(url: string, rendererDir: string): string | undefined {
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    return undefined
  }
  if (parsed.protocol !== `${APP_SCHEME}:` || parsed.host !== APP_HOST) return undefined
  let path: string
  try {
    path = decodeURIComponent(parsed.pathname)
  } catch {
    return undefined
  }
  // Plain dots were folded by the URL parser; any `..` left came encoded: refused, not resolved.
  if (path.includes('\0') || path.includes('\\') || path.split('/').includes('..')) return undefined
  const relativePath = normalize(path === '/' ? '/index.html' : path).replace(/^[/\\]+/, '')
  const full = join(rendererDir, relativePath)
  const inside = relative(rendererDir, full)
  if (inside === '' || inside.startsWith('..') || isAbsolute(inside) || inside.split(sep).includes('..')) return undefined
  return full
}

/** Response headers of every app:// response. */
export const APP_RESPONSE_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy': CONTENT_SECURITY_POLICY,
  'x-content-type-options': 'nosniff',
  'cross-origin-opener-policy': 'same-origin',
  'referrer-policy': 'no-referrer',
}

/**
 * The app:// handler (protocol.handle): the built renderer's files and nothing else, each with
 * APP_RESPONSE_HEADERS (the CSP among them); 404 for any other URL or a file that cannot be read.
 */
export function appProtocolHandler(rendererDir: string, readFile: (path: string) => Promise<Uint8Array>): (request: Request) => Promise<Response> {
  return async (request) => {
    const file = appUrlToFile(request.url, rendererDir)
    if (file === undefined) return new Response('not found', { status: 404 })
    try {
      const body = await readFile(file)
      return new Response(body, { status: 200, headers: { 'content-type': contentTypeOf(extname(file)), ...APP_RESPONSE_HEADERS } })
    } catch {
      return new Response('not found', { status: 404 })
    }
  }
}

/** Denies every permission (camera, notifications, clipboard reads, …): the app needs none. */
export function denyAllPermissions(session: Session): void {
  session.setPermissionRequestHandler((_contents, _permission, callback) => callback(false))
  session.setPermissionCheckHandler(() => false)
  session.setDevicePermissionHandler(() => false)
  session.setDisplayMediaRequestHandler((_request, callback) => callback({}))
}

/**
 * Keeps a window on the app's pages: navigation elsewhere, new windows, webviews and redirects are
 * refused. Nothing is handed to shell.openExternal: the app opens no outside links at all.
 */
export function guardWebContents(contents: WebContents, devServerUrl?: string): void {
  contents.on('will-navigate', (event, url) => {
    if (!isAppUrl(url, devServerUrl)) event.preventDefault()
  })
  contents.on('will-frame-navigate', (event) => {
    if (!isAppUrl(event.url, devServerUrl)) event.preventDefault()
  })
  contents.on('will-redirect', (event, url) => {
    if (!isAppUrl(url, devServerUrl)) event.preventDefault()
  })
  contents.on('will-attach-webview', (event) => event.preventDefault())
  contents.setWindowOpenHandler(() => ({ action: 'deny' }))
}
