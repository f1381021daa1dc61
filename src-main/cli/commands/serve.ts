// `vramscope serve [FILE | FILES... | DIR]`: the app in a browser, for a GPU server reached through an
// SSH tunnel; several files, a folder or a pattern open as a job of many ranks (services/ranks-job.ts).
// Prints the URL with its token and serves until interrupted.
import { existsSync, readFileSync } from 'node:fs'
import { resolve } from 'node:path'

import { ensureRendererBuilt, RENDERER_DIR, REPO_ROOT } from '../../web/renderer-build.ts'
import { startWebHost } from '../../web/server.ts'
import { ensureWorkerBuilt } from '../../web/worker-build.ts'
import { workerSession } from '../../web/worker-session.ts'
import { InputError } from '../../services/input-error.ts'
import { expandInputs, isOneFile } from '../../services/whatif/job.ts'
import { OptionError, type Io } from '../shared.ts'

export interface ServeOptions {
  host: string
  port: string
  json?: boolean
  uploadDir?: string
  pageIdleMs?: string
  allowRecordCommands?: boolean
  skipDriverCheck?: boolean
}

export async function serveCommand(io: Io, files: readonly string[], options: ServeOptions): Promise<void> {
  const port = Number(options.port)
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new OptionError('--port', `must be a port number from 0 to 65535, got ${JSON.stringify(options.port)}`)
  let initial: string | undefined
  let initialJob: string[] | undefined
  if (files.length > 0 && (await isOneFile(files))) {
    initial = resolve(files[0]!)
    if (!existsSync(initial)) throw new OptionError(files[0]!, 'no such file')
  } else if (files.length > 0) {
    try {
      initialJob = (await expandInputs(files)).map((f) => resolve(f))
    } catch (e) {
      if (e instanceof InputError) throw new OptionError(e.file, e.problem)
      throw e
    }
  }
  let pageIdleMs: number | undefined
  if (options.pageIdleMs !== undefined) {
    pageIdleMs = Number(options.pageIdleMs)
    if (!Number.isSafeInteger(pageIdleMs) || pageIdleMs < 1)
      throw new OptionError('--page-idle-ms', `must be a whole number of milliseconds, got ${JSON.stringify(options.pageIdleMs)}`)
  }
  const uploadDir = options.uploadDir !== undefined ? resolve(options.uploadDir) : undefined
  if (uploadDir !== undefined && !existsSync(uploadDir)) throw new OptionError('--upload-dir', `no such directory: ${options.uploadDir}`)
  await ensureRendererBuilt((line) => io.stderr.write(`${line}\n`))
  const workerEntry = await ensureWorkerBuilt((line) => io.stderr.write(`${line}\n`))
  const version = (JSON.parse(readFileSync(resolve(REPO_ROOT, 'package.json'), 'utf8')) as { version: string }).version
  // Opening, importing and replaying run in a worker process: this one only answers the pages.
  const session = workerSession(
    {
      version,
      host: 'web',
      samplesDir: resolve(REPO_ROOT, 'resources', 'samples'),
      pytorchHookDir: resolve(REPO_ROOT, 'resources', 'pytorch'),
      ...(options.allowRecordCommands && { recordCommands: true }),
      ...(options.skipDriverCheck && { skipDriverCheck: true }),
      ...(initial !== undefined && { initialFile: initial, allowedPaths: new Set([initial]) }),
      ...(initial === undefined && { allowedPaths: new Set<string>() }),
      ...(initialJob !== undefined && { initialJob }),
    },
    (message) => io.stderr.write(`${message}\n`),
    workerEntry,
  )
  let host
  try {
    host = await startWebHost({
      session,
      staticDir: RENDERER_DIR,
      host: options.host,
      port,
      ...(uploadDir !== undefined && { uploadDir }),
      ...(pageIdleMs !== undefined && { pageIdleMs }),
    })
  } catch (e) {
    const error = e as NodeJS.ErrnoException
    if (error.code === 'EADDRINUSE') throw new OptionError('--port', `port ${port} is in use on ${options.host}`)
    if (error.code === 'EADDRNOTAVAIL' || error.code === 'ENOTFOUND') throw new OptionError('--host', `cannot listen on ${options.host}: ${error.message}`)
    await session.close()
    throw e
  }
  // The worker starts now rather than on the first page's first call, and its answer to app:info
  // is kept: the page asks for it first, while the worker is busy opening the file it prefetches.
  void session.warm().catch(() => {})
  // The file named here is opened and its first maps replayed now, before a page asks: by the time
  // one is opened, its first map is ready to draw (AppSession.prefetchInitial).
  session.prefetchInitial()
  if (options.json) io.stdout.write(`${JSON.stringify({ url: host.url, port: host.port, token: host.token })}\n`)
  else {
    io.stdout.write(`vramscope is serving on ${host.url}\n`)
    io.stdout.write('Open that URL in a browser (from another machine: ssh -L PORT:127.0.0.1:PORT this-host). Ctrl+C stops.\n')
  }
  await new Promise<void>((resolveStop) => {
    const stop = () => {
      void host
        .close()
        .then(() => session.close())
        .then(resolveStop)
    }
    process.once('SIGINT', stop)
    process.once('SIGTERM', stop)
  })
}
