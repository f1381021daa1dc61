// The web host (`vramscope serve`): the renderer's built files and the app's API over HTTP, for a
// GPU server reached through an SSH tunnel. It listens on 127.0.0.1 by default, on a random port,
// and every API call must carry the random token printed in the URL; requests whose Host header
// is not the one it serves are refused (DNS rebinding), and the page runs under a strict CSP.
// Each call is dispatched (src-main/ipc/dispatch.ts): checked against its channel's schema, as the
// desktop app checks it, then served by the session: `vramscope serve` runs it in a worker process
// (worker-session.ts), so no import or replay runs on this process's event loop; long work runs as
// jobs there, so a request never waits for a replay. The JSON body is the argument, except for an upload, whose body is the
// file's bytes.
import { createReadStream, createWriteStream } from 'node:fs'
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { randomBytes, timingSafeEqual } from 'node:crypto'
import { tmpdir } from 'node:os'
import { extname, join, normalize, sep } from 'node:path'
import { pipeline } from 'node:stream/promises'

import { encodeBundleParts } from '../../src-shared/bundle.ts'
import { isBundleFile, type BundleFile } from '../utility/bundle-file.ts'
import { specOf, type Bundle, type Channel } from '../../src-shared/contract.ts'
import { ArgumentError, channelNamed, dispatch, type Handlers } from '../ipc/dispatch.ts'
import { CONTENT_SECURITY_POLICY, contentTypeOf } from '../ipc/page-policy.ts'
import { ApiError } from '../../src-shared/api-error.ts'
import { sessionHandlers } from '../ipc/session-handlers.ts'
import { AppSession, DEFAULT_PAGE, uploadName } from '../services/app-session.ts'

/**
 * What the web host serves: a session in a worker process (WorkerSession: `vramscope serve`), or
 * an AppSession in this process (tests), whose handlers are the channel table's
 * (ipc/session-handlers.ts).
 */
export interface WebSession {
  /** The dispatcher's handlers for calls from `page`. */
  handlers(page: string): Partial<Handlers>
  /** A page was heard from. */
  seen(page: string): void
  closeIdlePages(idleMs: number): void
  prefetchInitial(): void
  /** Opens a file the host wrote as `page`'s; the session deletes it once opened or failed. */
  openUploadedFile(path: string, name: string, page: string): { jobId: string } | Promise<{ jobId: string }>
  /** Stages a file the host wrote for `page`'s job of many ranks (ranks:stage); the session owns it from here. */
  stageUploadedRankFile(path: string, name: string, page: string): Promise<{ key: string }>
}

export interface WebHostOptions {
  session: WebSession | AppSession
  /** Built renderer (index.html and assets/). */
  staticDir: string
  host?: string
  /** 0: a free port. */
  port?: number
  /** Default: 24 random bytes, hex. */
  token?: string
  /** Largest upload accepted, bytes (default 8 GiB). */
  maxUploadBytes?: number
  /** Where uploads are written while they arrive, each in a vramscope-upload-* folder (default: the temp directory). */
  uploadDir?: string
  /** An upload whose body sends nothing for this long is dropped (default 60 s). */
  uploadIdleMs?: number
  /**
   * A page (the id its client sends in x-vramscope-page) that makes no request for this long is
   * closed, its traces freed (default 5 min; the page's client calls `page:alive` every 30 s).
   */
  pageIdleMs?: number
}

/** The header a page's client names itself in: its traces and jobs are that page's. */
export const PAGE_HEADER = 'x-vramscope-page'
const PAGE_ID = /^[\w-]{1,64}$/

export interface WebHost {
  url: string
  token: string
  port: number
  server: Server
  close(): Promise<void>
}

const SECURITY_HEADERS = {
  'content-security-policy': CONTENT_SECURITY_POLICY,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cross-origin-opener-policy': 'same-origin',
}

const MAX_JSON_BYTES = 1 << 20

/** How long a refused upload's remaining body is read and dropped before the connection is cut. */
const REFUSED_BODY_GRACE_MS = 1000

class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message)
  }
}

/** decodeURIComponent, with malformed percent-encoding the caller's error (400), not a URIError (500). */
function decoded(text: string, what: string): string {
  try {
    return decodeURIComponent(text)
  } catch {
    throw new HttpError(400, 'BAD_INPUT', `${what} is not valid percent-encoding (URI malformed)`)
  }
}

function sameToken(given: string, token: string): boolean {
  const a = Buffer.from(given)
  const b = Buffer.from(token)
  return a.length === b.length && timingSafeEqual(a, b)
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  // Listened to rather than iterated: leaving a for-await loop early destroys the request, and the
  // client would read a reset rather than the 413.
  const chunks: Buffer[] = []
  let total = 0
  await new Promise<void>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      total += chunk.length
      chunks.push(chunk)
      if (total <= MAX_JSON_BYTES) return
      req.off('data', onData)
      reject(new HttpError(413, 'BAD_INPUT', `request body larger than ${MAX_JSON_BYTES} bytes`))
    }
    req.on('data', onData)
    req.once('end', resolve)
    req.once('error', reject)
    // A client gone before the end: nothing more will come (after 'end' this does nothing).
    req.once('close', () => reject(new HttpError(400, 'BAD_INPUT', 'the request ended before its body did')))
  })
  if (total === 0) return undefined
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'))
  } catch (e) {
    throw new HttpError(400, 'BAD_INPUT', `request body is not JSON: ${(e as Error).message}`)
  }
}

/**
 * Writes an upload's body to `path`. Rejects, with the file closed, when the body passes
 * `maxBytes` (413: the rest of the body is left unread, for the caller to drop after replying),
 * sends nothing for `idleMs` (408), or ends early (the client went away); the caller removes the file.
 */
function receiveUpload(req: IncomingMessage, path: string, maxBytes: number, idleMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const file = createWriteStream(path)
    let received = 0
    let settled = false
    let idle: NodeJS.Timeout | undefined
    const finish = (error?: Error) => {
      if (settled) return
      settled = true
      clearTimeout(idle)
      req.off('data', onData)
      req.off('end', onEnd)
      req.off('close', onClose)
      req.off('error', finish)
      if (!error) return void file.end(() => resolve())
      if (file.closed) return reject(error)
      file.once('close', () => reject(error))
      file.destroy()
    }
    const idleSince = () => {
      clearTimeout(idle)
      idle = setTimeout(() => finish(new HttpError(408, 'BAD_INPUT', `the upload sent nothing for ${idleMs} ms`)), idleMs)
    }
    const onData = (chunk: Buffer) => {
      received += chunk.length
      if (received > maxBytes) return finish(new HttpError(413, 'BAD_INPUT', `upload larger than the ${maxBytes}-byte limit`))
      idleSince()
      if (!file.write(chunk)) {
        req.pause()
        file.once('drain', () => req.resume())
      }
    }
    const onEnd = () => finish()
    const onClose = () => finish(new HttpError(400, 'BAD_INPUT', 'the upload ended before its last byte'))
    file.on('error', finish)
    req.on('data', onData)
    req.on('end', onEnd)
    req.on('close', onClose)
    req.on('error', finish)
    idleSince()
  })
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body)
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store', ...SECURITY_HEADERS })
  res.end(text)
}

async function sendBundle(res: ServerResponse, bundle: Bundle | ArrayBuffer | BundleFile): Promise<void> {
  if (isBundleFile(bundle)) return sendBundleFile(res, bundle)
  // Piece by piece from the arrays themselves: no copy of the whole bundle first, and the page
  // starts reading (a replay's layout streams into its model) while the rest is on its way. A
  // worker's bundle arrives encoded already.
  const parts = bundle instanceof ArrayBuffer ? [new Uint8Array(bundle)] : encodeBundleParts(bundle)
  await sendBytes(
    res,
    parts.reduce((n, p) => n + p.byteLength, 0),
    parts,
  )
}

/** A 200 of `length` bytes from `chunks`, each written as the socket takes it; stops when the page has gone. */
async function sendBytes(res: ServerResponse, length: number, chunks: Iterable<Uint8Array> | AsyncIterable<Uint8Array>): Promise<void> {
  res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': length, 'cache-control': 'no-store', ...SECURITY_HEADERS })
  for await (const chunk of chunks) {
    if (res.destroyed) return
    if (!res.write(chunk)) await drainedOrClosed(res)
  }
  res.end()
}

/** A bundle the worker wrote to a file: streamed from it, and the file deleted however that ends. */
async function sendBundleFile(res: ServerResponse, file: BundleFile): Promise<void> {
  try {
    const stream = createReadStream(file.bundleFile, { highWaterMark: 1 << 20 })
    // Opened before the status line goes out, so a file that is gone is an error response, not a cut-off one.
    await new Promise<void>((resolve, reject) => {
      stream.once('open', () => resolve())
      stream.once('error', reject)
    })
    try {
      await sendBytes(res, file.bytes, stream as AsyncIterable<Uint8Array>)
    } finally {
      stream.destroy()
    }
  } finally {
    await rm(file.bundleFile, { force: true })
  }
}

/** Resolves when the socket takes more, or when the page has gone (then nothing waits forever). */
function drainedOrClosed(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done)
      res.off('close', done)
      resolve()
    }
    res.on('drain', done)
    res.on('close', done)
  })
}

export async function startWebHost(options: WebHostOptions): Promise<WebHost> {
  const { session, staticDir } = options
  const host = options.host ?? '127.0.0.1'
  const token = options.token ?? randomBytes(24).toString('hex')
  const maxUpload = options.maxUploadBytes ?? 8 * 1024 ** 3
  const uploadDir = options.uploadDir ?? tmpdir()
  const uploadIdleMs = options.uploadIdleMs ?? 60_000
  /** Upload folders still being written: removed whatever ends the request, and on close. */
  const receiving = new Set<string>()
  const indexHtml = await readFile(join(staticDir, 'index.html'))
  let allowedHosts = new Set<string>()
  // Listening on every interface (--host 0.0.0.0): any Host is accepted and the token is the only guard.
  const anyHost = host === '0.0.0.0' || host === '::'

  const pageIdleMs = options.pageIdleMs ?? 5 * 60_000
  const idleSweep = setInterval(() => session.closeIdlePages(pageIdleMs), Math.max(50, Math.min(pageIdleMs / 4, 30_000)))
  idleSweep.unref()

  async function api(channel: Channel, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const spec = specOf(channel)
    const named = req.headers[PAGE_HEADER]
    if (named !== undefined && (typeof named !== 'string' || !PAGE_ID.test(named)))
      throw new HttpError(400, 'BAD_INPUT', `${PAGE_HEADER}: a page id is 1 to 64 letters, digits, - or _`)
    const page = named ?? DEFAULT_PAGE
    session.seen(page)
    const handlers = session instanceof AppSession ? sessionHandlers(session, page) : session.handlers(page)
    if (spec.upload) {
      // The bytes are the body: streamed to a private file, which the session opens and deletes.
      const name = uploadName(decoded(String(req.headers['x-file-name'] ?? 'upload'), 'the x-file-name header'))
      const declared = Number(req.headers['content-length'] ?? NaN)
      if (declared > maxUpload) throw new HttpError(413, 'BAD_INPUT', `upload of ${declared} bytes is larger than the ${maxUpload}-byte limit`)
      const dir = await mkdtemp(join(uploadDir, 'vramscope-upload-'))
      const path = join(dir, name)
      receiving.add(dir)
      try {
        await receiveUpload(req, path, maxUpload, uploadIdleMs)
      } catch (e) {
        await rm(dir, { recursive: true, force: true })
        throw e
      } finally {
        receiving.delete(dir)
      }
      // From here the session owns the file: it deletes it once opened or failed (or, a rank's
      // file of a job, moves it into the page's folder).
      let started: { jobId: string } | { key: string }
      try {
        started = channel === 'ranks:stage' ? await session.stageUploadedRankFile(path, name, page) : await session.openUploadedFile(path, name, page)
      } catch (e) {
        // The session never took it (its worker was gone).
        await rm(dir, { recursive: true, force: true })
        throw e
      }
      return sendJson(res, 200, { ok: true, result: started })
    }
    const result = await dispatch(handlers, channel, await readJson(req))
    if (spec.result.kind === 'bundle') return sendBundle(res, result as Bundle | ArrayBuffer | BundleFile)
    return sendJson(res, 200, { ok: true, result })
  }

  async function serveStatic(url: URL, res: ServerResponse): Promise<void> {
    const pathname = url.pathname
    if (pathname === '/' || pathname === '/index.html') {
      // A page with the token is loading: its first request will be the file named on the command
      // line, so the host opens it while the page loads its code (AppSession.prefetchInitial).
      const given = url.searchParams.get('token')
      if (given !== null && sameToken(given, token)) session.prefetchInitial()
      res.writeHead(200, { 'content-type': contentTypeOf('.html'), 'cache-control': 'no-store', ...SECURITY_HEADERS })
      res.end(indexHtml)
      return
    }
    const relative = normalize(decoded(pathname, 'the path')).replace(/^[/\\]+/, '')
    const full = join(staticDir, relative)
    if (relative.startsWith('..') || !full.startsWith(staticDir + sep)) throw new HttpError(404, 'NOT_FOUND', 'not found')
    let size: number
    try {
      const s = await stat(full)
      if (!s.isFile()) throw new Error('not a file')
      size = s.size
    } catch {
      throw new HttpError(404, 'NOT_FOUND', `not found: ${pathname}`)
    }
    res.writeHead(200, {
      'content-type': contentTypeOf(extname(full)),
      'content-length': size,
      'cache-control': pathname.startsWith('/assets/') ? 'public, max-age=31536000, immutable' : 'no-store',
      ...SECURITY_HEADERS,
    })
    await pipeline(createReadStream(full), res)
  }

  const server = createServer((req, res) => {
    void (async () => {
      try {
        if (!anyHost && !allowedHosts.has(String(req.headers.host ?? '').toLowerCase()))
          throw new HttpError(403, 'UNAUTHORIZED', `requests must be addressed to ${[...allowedHosts][0]}`)
        const url = new URL(req.url ?? '/', 'http://host')
        if (url.pathname.startsWith('/api/')) {
          if (req.method !== 'POST') throw new HttpError(405, 'BAD_INPUT', 'API calls are POST requests')
          const auth = String(req.headers.authorization ?? '')
          if (!auth.startsWith('Bearer ') || !sameToken(auth.slice(7), token))
            throw new HttpError(401, 'UNAUTHORIZED', 'missing or wrong token: open the URL vramscope serve printed')
          await api(channelNamed(decoded(url.pathname.slice(5), 'the channel')), req, res)
          return
        }
        if (req.method !== 'GET' && req.method !== 'HEAD') throw new HttpError(405, 'BAD_INPUT', 'only GET here')
        await serveStatic(url, res)
      } catch (e) {
        if (res.headersSent) {
          res.destroy()
          return
        }
        if (e instanceof HttpError && (e.status === 413 || e.status === 408)) {
          // The rest of the body may still be coming. Reading and dropping it lets the client read
          // this reply: closing now would cut the connection with its bytes unread, which the
          // client sees as a reset, not a reply. A client that goes on sending is cut off shortly after.
          req.resume()
          res.once('finish', () =>
            setTimeout(() => {
              if (!req.complete) req.socket.destroy()
            }, REFUSED_BODY_GRACE_MS).unref(),
          )
        }
        if (e instanceof HttpError) return sendJson(res, e.status, { ok: false, error: { code: e.code, message: e.message } })
        // The URL names the channel already: the problems alone (`targets.first: …`).
        if (e instanceof ArgumentError) return sendJson(res, 400, { ok: false, error: { code: e.code, message: e.problems } })
        const error = e as Error & { code?: string }
        // By code, not class: an error from the worker process crosses as its message and code.
        if (e instanceof ApiError || error.code === 'NOT_FOUND' || error.code === 'BAD_INPUT' || error.code === 'BUSY') {
          const status = error.code === 'NOT_FOUND' ? 404 : error.code === 'BUSY' ? 429 : 400
          return sendJson(res, status, { ok: false, error: { code: error.code!, message: error.message } })
        }
        // Argument errors of the services (TypeError/RangeError with code INVALID_ARGUMENT) are the caller's.
        if (error.code === 'INVALID_ARGUMENT') return sendJson(res, 400, { ok: false, error: { code: 'BAD_INPUT', message: error.message } })
        sendJson(res, 500, { ok: false, error: { code: 'INTERNAL', message: error.message } })
      }
    })()
  })

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(options.port ?? 0, host, () => resolve())
  })
  const address = server.address()
  const port = typeof address === 'object' && address ? address.port : 0
  const shownHost = host.includes(':') ? `[${host}]` : host
  allowedHosts = new Set([`${shownHost}:${port}`.toLowerCase()])
  if (host === '127.0.0.1' || host === '::1' || host === 'localhost') for (const h of ['127.0.0.1', 'localhost', '[::1]']) allowedHosts.add(`${h}:${port}`)
  const urlHost = anyHost ? '127.0.0.1' : shownHost
  return {
    url: `http://${urlHost}:${port}/?token=${token}`,
    token,
    port,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        clearInterval(idleSweep)
        server.closeAllConnections?.()
        server.close(() => resolve())
      }).then(async () => {
        await Promise.all([...receiving].map((dir) => rm(dir, { recursive: true, force: true })))
      }),
  }
}
