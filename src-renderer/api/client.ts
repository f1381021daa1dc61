// The renderer's side of the API contract (src-shared/contract.ts): over HTTP to the web host,
// or through the Electron preload's bridge when the page runs in the desktop app. Bundles come
// back as ArrayBuffers, decoded in the worker.
import type { Api, AppInfo, Channel, ChannelArg, ChannelResult, JobStatus, RecentFile, RecordRequest, ReplayRequest, TraceSummary } from '../../src-shared/contract.ts'

export class ApiCallError extends Error {
  constructor(
    message: string,
    readonly code: string,
  ) {
    super(message)
  }
}

/** The calls the UI makes; bundle channels return raw buffers. */
export interface Client {
  info(): Promise<AppInfo>
  openSample(name: string): Promise<{ jobId: string }>
  openPath(path: string): Promise<{ jobId: string }>
  openFile(file: File): Promise<{ jobId: string }>
  openRecent(key: string): Promise<{ jobId: string }>
  recent(): Promise<RecentFile[]>
  traceData(traceId: string): Promise<ArrayBuffer>
  startReplay(request: ReplayRequest): Promise<{ jobId: string }>
  replayResult(jobId: string): Promise<ArrayBuffer>
  /** The same bytes as they arrive (the web host), for a reader that starts before the end. */
  replayResultStream?(jobId: string): Promise<ReadableStream<Uint8Array>>
  recordWorkload(request: RecordRequest): Promise<{ jobId: string }>
  /** waitMs: a host that can (the web host) answers once the job settles or that long has passed. */
  jobStatus(jobId: string, waitMs?: number): Promise<JobStatus>
  /** Whether jobStatus honours waitMs (then polling needs no pause between calls). */
  readonly statusWaits: boolean
  jobResult(jobId: string): Promise<TraceSummary>
  cancel(jobId: string): Promise<{ cancelled: boolean }>
}

/** What the Electron preload exposes (issue 5): the Api, with bundles as ArrayBuffers. */
type BridgeApi = Omit<Api, 'trace:data' | 'replay:result'> & {
  'trace:data': (arg: ChannelArg<'trace:data'>) => Promise<ArrayBuffer>
  'replay:result': (arg: ChannelArg<'replay:result'>) => Promise<ArrayBuffer>
}

function tokenFromPage(): string {
  const url = new URL(location.href)
  const fromUrl = url.searchParams.get('token')
  if (fromUrl) {
    sessionStorage.setItem('vramscope-token', fromUrl)
    // Keep the token out of the address bar and of anything that copies the URL.
    url.searchParams.delete('token')
    history.replaceState(null, '', url.pathname + url.search + url.hash)
    return fromUrl
  }
  return sessionStorage.getItem('vramscope-token') ?? ''
}

function httpClient(): Client {
  const token = tokenFromPage()
  async function post(channel: Channel, body: BodyInit | undefined, headers: Record<string, string> = {}): Promise<Response> {
    const response = await fetch(`/api/${encodeURIComponent(channel)}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, ...headers },
      ...(body !== undefined && { body }),
    })
    if (!response.ok) {
      let message = `${channel}: HTTP ${response.status}`
      let code = 'INTERNAL'
      try {
        const j = (await response.json()) as { error?: { message?: string; code?: string } }
        message = j.error?.message ?? message
        code = j.error?.code ?? code
      } catch {
        // Not JSON: keep the status line.
      }
      throw new ApiCallError(message, code)
    }
    return response
  }
  async function call<C extends Channel>(channel: C, arg?: ChannelArg<C>): Promise<ChannelResult<C>> {
    const response = await post(channel, arg === undefined ? undefined : JSON.stringify(arg), { 'content-type': 'application/json' })
    const j = (await response.json()) as { result: ChannelResult<C> }
    return j.result
  }
  async function bundle(channel: 'trace:data' | 'replay:result', arg: object): Promise<ArrayBuffer> {
    const response = await post(channel, JSON.stringify(arg), { 'content-type': 'application/json' })
    return response.arrayBuffer()
  }
  return {
    info: () => call('app:info'),
    openSample: (name) => call('trace:openSample', { name }),
    openPath: (path) => call('trace:openPath', { path }),
    openFile: async (file) => {
      const response = await post('trace:openBytes', file, { 'content-type': 'application/octet-stream', 'x-file-name': encodeURIComponent(file.name) })
      return ((await response.json()) as { result: { jobId: string } }).result
    },
    openRecent: (key) => call('trace:openRecent', { key }),
    recent: () => call('trace:recent'),
    traceData: (traceId) => bundle('trace:data', { traceId }),
    startReplay: (request) => call('replay:start', request),
    replayResult: (jobId) => bundle('replay:result', { jobId }),
    replayResultStream: async (jobId) => {
      const response = await post('replay:result', JSON.stringify({ jobId }), { 'content-type': 'application/json' })
      if (!response.body) throw new ApiCallError('replay:result: the response has no body', 'INTERNAL')
      return response.body
    },
    recordWorkload: (request) => call('record:workload', request),
    jobStatus: (jobId, waitMs) => call('job:status', { jobId, ...(waitMs !== undefined && { waitMs }) }),
    statusWaits: true,
    jobResult: (jobId) => call('job:result', { jobId }),
    cancel: (jobId) => call('job:cancel', { jobId }),
  }
}

function bridgeClient(bridge: BridgeApi): Client {
  return {
    info: () => bridge['app:info'](),
    openSample: (name) => bridge['trace:openSample']({ name }),
    openPath: (path) => bridge['trace:openPath']({ path }),
    openFile: async (file) => bridge['trace:openBytes']({ name: file.name, bytes: new Uint8Array(await file.arrayBuffer()) }),
    openRecent: (key) => bridge['trace:openRecent']({ key }),
    recent: () => bridge['trace:recent'](),
    traceData: (traceId) => bridge['trace:data']({ traceId }),
    startReplay: (request) => bridge['replay:start'](request),
    replayResult: (jobId) => bridge['replay:result']({ jobId }),
    recordWorkload: (request) => bridge['record:workload'](request),
    // The desktop app's main process answers from the status its worker pushes: no waiting there.
    jobStatus: (jobId) => bridge['job:status']({ jobId }),
    statusWaits: false,
    jobResult: (jobId) => bridge['job:result']({ jobId }),
    cancel: (jobId) => bridge['job:cancel']({ jobId }),
  }
}

export function createClient(): Client {
  const bridge = (globalThis as { vramscope?: BridgeApi }).vramscope
  return bridge ? bridgeClient(bridge) : httpClient()
}

/** Polls a job until it settles, reporting its status; rejects if it failed or was cancelled. */
export async function waitForJob(client: Client, jobId: string, onStatus: (s: JobStatus) => void, intervalMs = 80): Promise<JobStatus> {
  // A host that holds the answer until the job ends (or an interval passes, for the progress bar)
  // is asked again at once: the page learns of the end when it happens. Otherwise polls soon at
  // first, then every intervalMs: a short job (a small file, the first strategy of a replay) is
  // not kept waiting for a full interval, a long one costs no more requests.
  for (let wait = 5; ; wait = Math.min(intervalMs, wait * 2)) {
    const status = await client.jobStatus(jobId, client.statusWaits ? intervalMs : undefined)
    onStatus(status)
    if (status.state === 'done') return status
    if (status.state !== 'running') throw new ApiCallError(status.error?.message ?? status.state, status.error?.code ?? status.state.toUpperCase())
    if (!client.statusWaits) await new Promise((r) => setTimeout(r, wait))
  }
}
