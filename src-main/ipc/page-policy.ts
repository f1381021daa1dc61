// How both hosts serve the renderer's files (the desktop app's app:// handler and the web host):
// the one Content-Security-Policy and the content types. Pure, so the web host, main and the
// build (the CSP <meta> of the desktop index.html) share it.

/**
 * The renderer's policy: nothing but the app's own scripts, styles (inline ones for Svelte's style
 * attributes), images (data:/blob: for exports), fonts and workers; no network beyond its own
 * origin, no plugins, no frames, no <base>, no form posts.
 */
export const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data: blob:",
  "font-src 'self'",
  "worker-src 'self' blob:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ')

export const CONTENT_TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.json': 'application/json',
  '.woff2': 'font/woff2',
  '.map': 'application/json',
}

/** The content type of a file by its extension (".js"), or a generic one. */
export function contentTypeOf(extension: string): string {
  return CONTENT_TYPES[extension] ?? 'application/octet-stream'
}
