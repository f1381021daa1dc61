// A worker process started with Node's child_process.fork: how tests (and any plain-Node host)
// run the same worker the app runs under Electron's utilityProcess.
import { fork } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

import { BUNDLE_DIR_ENV } from './bundle-file.ts'
import { workerEnv } from './worker-env.ts'

import type { HostTransport, WorkerExit, WorkerMessage } from './protocol.ts'

/** The worker's TypeScript entry: run through tsx when forked from the sources. */
export const WORKER_SOURCE = fileURLToPath(new URL('./worker.ts', import.meta.url))

export interface NodeWorkerOptions {
  /** Entry module (default: the TypeScript source, loaded with tsx). */
  entry?: string
  env?: NodeJS.ProcessEnv
}

export function forkNodeWorker(options: NodeWorkerOptions = {}): HostTransport {
  const entry = options.entry ?? WORKER_SOURCE
  // Large bundles come back as files in a folder of this worker's own (bundle-file.ts), removed
  // when it ends. Where no folder can be made, they come through the channel.
  let bundleDir: string | undefined
  try {
    bundleDir = mkdtempSync(join(tmpdir(), 'vramscope-bundles-'))
  } catch {
    bundleDir = undefined
  }
  const removeBundleDir = () => {
    process.off('exit', removeBundleDir)
    try {
      if (bundleDir !== undefined) rmSync(bundleDir, { recursive: true, force: true })
    } catch {
      // A file still open where that keeps it (Windows): left to the system's temporary files.
    }
  }
  // A host that ends first (its worker then ends with it) leaves no folder behind either.
  if (bundleDir !== undefined) process.once('exit', removeBundleDir)
  const child = fork(entry, [], {
    // tsx named by its location, not its name: the parent's working directory may be anywhere.
    execArgv: entry.endsWith('.ts') ? ['--import', import.meta.resolve('tsx')] : [],
    // v8 serialization: ArrayBuffers and typed arrays cross as bytes (JSON would turn them into objects).
    serialization: 'advanced',
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    env: { ...workerEnv(options.env ?? process.env), ...(bundleDir !== undefined && { [BUNDLE_DIR_ENV]: bundleDir }) },
  })
  const exitListeners: ((exit: WorkerExit) => void)[] = []
  let exit: WorkerExit | undefined
  const ended = (e: WorkerExit) => {
    if (exit) return
    exit = e
    removeBundleDir()
    for (const listener of exitListeners) listener(e)
  }
  child.on('exit', (code, signal) => ended({ code, signal }))
  child.on('error', (error) => {
    // A process that never started has no exit event; one that did reports its exit too.
    if (child.pid === undefined) ended({ code: null, signal: null, reason: `could not start: ${error.message}` })
  })
  return {
    get pid() {
      return child.pid
    },
    ...(bundleDir !== undefined && { bundleDir }),
    post: (message) => {
      if (!child.connected) throw new Error('the worker process is not connected')
      child.send(message)
    },
    onMessage: (listener) => child.on('message', (m) => listener(m as WorkerMessage)),
    onExit: (listener) => {
      if (exit) listener(exit)
      else exitListeners.push(listener)
    },
    kill: () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM')
    },
  }
}
