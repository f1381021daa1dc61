// Entry of the worker process that hosts the native module: started by Electron's
// utilityProcess.fork in the app (messages through process.parentPort) or by Node's
// child_process.fork in tests and the CLI (messages through the IPC channel, 'advanced'
// serialization so ArrayBuffers cross as bytes, not JSON). Both end up as one HostPort.
import { serveWorker } from './host.ts'
import { BUNDLE_DIR_ENV } from './bundle-file.ts'
import type { HostPort, WorkerMessage, WorkerRequest } from './protocol.ts'

interface ElectronParentPort {
  on(event: 'message', listener: (event: { data: unknown }) => void): void
  postMessage(message: unknown): void
}

function parentPort(): HostPort {
  const electronPort = (process as unknown as { parentPort?: ElectronParentPort }).parentPort
  if (electronPort) {
    return {
      // parentPort's transfer list takes only MessagePorts: buffers are copied (structured clone).
      post: (message: WorkerMessage) => electronPort.postMessage(message),
      onMessage: (listener) => electronPort.on('message', (event) => listener(event.data as WorkerRequest)),
    }
  }
  if (typeof process.send === 'function') {
    const send = process.send.bind(process)
    const bundleDir = process.env[BUNDLE_DIR_ENV]
    return {
      ...(bundleDir !== undefined && bundleDir !== '' && { bundleDir }),
      post: (message: WorkerMessage) => void send(message),
      onMessage: (listener) => process.on('message', (message) => listener(message as WorkerRequest)),
    }
  }
  throw new Error('the vramscope worker must be started by the app (utilityProcess.fork or child_process.fork), not on its own')
}

// A parent that goes away takes the worker with it: nothing it computes could be delivered.
process.on('disconnect', () => process.exit(0))
// Ended by its parent (close(): a kill): exit as a process does, so its exit handlers remove what it
// wrote (a job's staged files, services/ranks-job.ts).
process.on('SIGTERM', () => process.exit(0))
serveWorker(parentPort())
