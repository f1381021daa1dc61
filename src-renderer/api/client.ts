// The renderer's side of the API contract (src-shared/contract.ts): over HTTP to the web host,
// or through the Electron preload's bridge when the page runs in the desktop app. Either way one
// generic call per channel, shaped by the contract (a bundle comes back as an ArrayBuffer, decoded
// in the worker); only what differs by transport (a file's upload, a streamed bundle) is its own.
import { BUNDLE_CHANNELS, type BundleChannel, type Channel, type ChannelArg, type ChannelResult, type JobStatus } from '../../src-shared/contract.ts'
import { MAX_STATUS_WAIT_MS } from '../../src-shared/job-wait.ts'

export class ApiCallError extends Error {
  constructor(
    message: string,
    readonly code: string,
  ) {
    super(message)
  }
}

/** The error a host's HTTP answer carries (its JSON message and code), or its status line. */
export async function responseError(channel: Channel, response: Response): Promise<ApiCallError> {
  let message = `${channel}: HTTP ${response.status}`
  let code = 'INTERNAL'
  try {
    const j = (await response.json()) as { error?: { message?: string; code?: string } }
    message = j.error?.message ?? message
    code = j.error?.code ?? code
  } catch {
    // Not JSON: keep the status line.
  }
  return new ApiCallError(message, code)
}

/** A request as plain data (it can be posted to a worker, which then fetches it itself). */
export interface FetchRequest {
  url: string
  init: { method: string; headers: Record<string, string>; body: string }
}

/** What a call brings back: a channel's result, or a bundle's bytes (decoded in the worker). */
export type Received<C extends Channel> = C extends BundleChannel ? ArrayBuffer : ChannelResult<C>

/** A call's argument list: none for a channel that takes none. */
export type CallArgs<C extends Channel> = ChannelArg<C> extends void ? [] : [arg: ChannelArg<C>]

/** The API as the UI calls it, over whichever host serves the page. */
export interface Client {
  /** One call of the contract (src-shared/contract.ts); files go by openFile. */
  call<C extends Channel>(channel: C, ...arg: CallArgs<C>): Promise<Received<C>>
  /** Opens a file the user dropped or picked (`trace:openBytes`; over HTTP, the bytes are the body). */
  openFile(file: File): Promise<{ jobId: string }>
  /** Hands over one file of a job of many ranks (`ranks:stage`; over HTTP, the bytes are the body). */
  stageFile(file: File): Promise<{ key: string }>
  /**
   * How to fetch a replay's bundle (the web host): a decode worker fetches it itself and reads it
   * as it arrives, no hop through the page's thread. Plain data, so it can be posted to a worker.
   */
  replayResultRequest?(arg: { jobId: string; strategy?: number; preview?: boolean }): FetchRequest
}

/** What the Electron preload exposes: one method per channel, bundles as ArrayBuffers. */
type BridgeApi = { [C in Channel]: (arg: ChannelArg<C>) => Promise<Received<C>> }

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

/** How often a page tells the web host it is still there (the host closes pages that go quiet). */
const PAGE_ALIVE_MS = 30_000

function httpClient(): Client {
  const token = tokenFromPage()
  // This page's id: what it opens is its own, freed when it goes away or goes quiet.
  const page = crypto.randomUUID()
  const headersWith = (more: Record<string, string>) => ({ authorization: `Bearer ${token}`, 'x-vramscope-page': page, ...more })
  async function post(channel: Channel, body: BodyInit | undefined, headers: Record<string, string> = {}, keepalive = false): Promise<Response> {
    const response = await fetch(`/api/${encodeURIComponent(channel)}`, {
      method: 'POST',
      headers: headersWith(headers),
      ...(body !== undefined && { body }),
      ...(keepalive && { keepalive }),
    })
    if (!response.ok) throw await responseError(channel, response)
    return response
  }
  async function call<C extends Channel>(channel: C, ...[arg]: CallArgs<C>): Promise<Received<C>> {
    const response = await post(channel, arg === undefined ? undefined : JSON.stringify(arg), { 'content-type': 'application/json' })
    if (BUNDLE_CHANNELS.has(channel)) return (await response.arrayBuffer()) as Received<C>
    return ((await response.json()) as { result: Received<C> }).result
  }
  setInterval(() => void post('page:alive', undefined).catch(() => {}), PAGE_ALIVE_MS)
  // A fetch that outlives the page (sendBeacon cannot carry the token's header).
  addEventListener('pagehide', () => void post('page:close', undefined, {}, true).catch(() => {}))
  return {
    call,
    openFile: async (file) => {
      const response = await post('trace:openBytes', file, { 'content-type': 'application/octet-stream', 'x-file-name': encodeURIComponent(file.name) })
      return ((await response.json()) as { result: { jobId: string } }).result
    },
    stageFile: async (file) => {
      const response = await post('ranks:stage', file, { 'content-type': 'application/octet-stream', 'x-file-name': encodeURIComponent(file.name) })
      return ((await response.json()) as { result: { key: string } }).result
    },
    replayResultRequest: (arg) => ({
      url: new URL(`/api/${encodeURIComponent('replay:result')}`, location.href).href,
      init: {
        method: 'POST',
        headers: headersWith({ 'content-type': 'application/json' }),
        body: JSON.stringify(arg),
      },
    }),
  }
}

function bridgeClient(bridge: BridgeApi): Client {
  return {
    call: (channel, ...[arg]) => (bridge[channel] as (arg: unknown) => Promise<never>)(arg),
    openFile: async (file) => bridge['trace:openBytes']({ name: file.name, bytes: new Uint8Array(await file.arrayBuffer()) }),
    stageFile: async (file) => bridge['ranks:stage']({ name: file.name, bytes: new Uint8Array(await file.arrayBuffer()) }),
  }
}

export function createClient(): Client {
  const bridge = (globalThis as { vramscope?: BridgeApi }).vramscope
  return bridge ? bridgeClient(bridge) : httpClient()
}

/** How often a running job's progress is asked for, after its first second. */
export const PROGRESS_MS = 250

/** A job's progress in words: its phase, with how far it got once it runs (a waiting job's phase says what it waits for). */
export function progressText(job: JobStatus): string {
  return job.state === 'queued' ? job.phase : `${job.phase} · ${Math.round(job.fraction * 100)} %`
}

/**
 * Polls a job until it settles, reporting its status; rejects if it failed or was cancelled. With
 * `until` (a performance.now() time), returns its last status, still running, once that has passed.
 */
export async function waitForJob(
  client: Client,
  jobId: string,
  onStatus: (s: JobStatus) => void,
  intervalMs = PROGRESS_MS,
  until?: number,
): Promise<JobStatus> {
  // Every host holds the answer until the job ends or an interval passes (for the progress bar),
  // so it is asked again at once: the page learns of the end when it happens. The first answer
  // waits longest (MAX_STATUS_WAIT_MS): a job done within it costs one call, and a progress bar
  // is for work that takes longer. A job waiting for a slot (queued) is waited for as a running
  // one; its phase says what it waits behind.
  for (let asked = 0; ; asked++) {
    const status = await client.call('job:status', { jobId, waitMs: asked === 0 ? MAX_STATUS_WAIT_MS : intervalMs })
    onStatus(status)
    if (status.state === 'done') return status
    if (status.state !== 'running' && status.state !== 'queued')
      throw new ApiCallError(status.error?.message ?? status.state, status.error?.code ?? status.state.toUpperCase())
    if (until !== undefined && performance.now() >= until) return status
  }
}
