// The worker process under Electron: utilityProcess.fork, the same protocol as the Node transport
// the tests use (src-main/utility/node-transport.ts). Electron reports a utility process's death
// twice: 'exit' with a code, and app 'child-process-gone' with a reason (crashed, oom, killed);
// both go into the WorkerExit the user reads.
import { app, utilityProcess, type Details, type Event } from 'electron'

import type { HostTransport, WorkerExit, WorkerMessage, WorkerRequest } from '../utility/protocol.ts'
import { workerEnv } from '../utility/worker-env.ts'

let forks = 0

export function forkElectronWorker(entry: string, env: Record<string, string | undefined>): HostTransport {
  const serviceName = `vramscope worker ${++forks}`
  const child = utilityProcess.fork(entry, [], { serviceName, env: workerEnv(env) as NodeJS.ProcessEnv, stdio: 'inherit' })
  let reason: string | undefined
  const gone = (_event: Event, details: Details) => {
    if (details.type === 'Utility' && (details.serviceName === serviceName || details.name === serviceName)) reason = details.reason
  }
  app.on('child-process-gone', gone)

  // Messages posted before the process has spawned wait for it.
  let spawned = false
  const queued: WorkerRequest[] = []
  child.once('spawn', () => {
    spawned = true
    for (const message of queued.splice(0)) child.postMessage(message)
  })

  const exitListeners: ((exit: WorkerExit) => void)[] = []
  let exit: WorkerExit | undefined
  child.once('exit', (code) => {
    // child-process-gone may come just after 'exit': wait a turn for its reason.
    setTimeout(() => {
      app.off('child-process-gone', gone)
      exit = { code, signal: null, ...(reason !== undefined && { reason }) }
      for (const listener of exitListeners) listener(exit)
    }, 50)
  })
  return {
    get pid() {
      return child.pid
    },
    post: (message) => {
      if (exit) throw new Error('the worker process has exited')
      if (spawned) child.postMessage(message)
      else queued.push(message)
    },
    onMessage: (listener) => child.on('message', (message: unknown) => listener(message as WorkerMessage)),
    onExit: (listener) => {
      if (exit) listener(exit)
      else exitListeners.push(listener)
    },
    kill: () => void child.kill(),
  }
}
