// Requests to a running web host (`vramscope serve` or startWebHost in a test), as a browser page
// sends them: the API at /api/CHANNEL with the host's token, on loopback.
import { request, type Agent, type IncomingHttpHeaders } from 'node:http'

import type { JobStatus } from '../../src-shared/contract.ts'

export interface HostAddress {
  port: number
  token: string
}

export interface HttpReply {
  status: number
  headers: IncomingHttpHeaders
  body: Buffer
}

/** One request; `token` null sends none, undefined the host's own. */
export function httpCall(
  host: HostAddress,
  method: string,
  path: string,
  options: { body?: string | Buffer; headers?: Record<string, string>; token?: string | null; agent?: Agent } = {},
): Promise<HttpReply> {
  return new Promise((resolve, reject) => {
    const token = options.token === undefined ? host.token : options.token
    const headers = { ...(token !== null && { authorization: `Bearer ${token}` }), ...options.headers }
    const req = request({ host: '127.0.0.1', port: host.port, method, path, headers, ...(options.agent && { agent: options.agent }) }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (c: Buffer) => chunks.push(c))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }))
      res.on('error', reject)
    })
    req.on('error', reject)
    req.end(options.body)
  })
}

/** POST /api/CHANNEL with `body` as it is (JSON text or an upload's bytes); the reply's body as text in `encoding`. */
export async function postApi(
  host: HostAddress,
  channel: string,
  body: string | Buffer,
  headers: Record<string, string> = {},
  encoding: BufferEncoding = 'utf8',
): Promise<{ status: number; body: string }> {
  const reply = await httpCall(host, 'POST', `/api/${channel}`, { body, headers })
  return { status: reply.status, body: reply.body.toString(encoding) }
}

/** An answer of the API: its `ok`, and `result` or `error`. */
export interface ApiReply {
  ok: boolean
  /** Each channel's own result type: the tests read what they need. */
  result?: any
  error?: { code: string; message: string }
}

/**
 * The API as one page calls it (`x-vramscope-page`): `post` a channel's argument, `json` its
 * reply, and `settle` a job: ask `job:status` with a wait until it is neither queued nor running,
 * cancelling it and failing past `timeoutMs`. `host` is read at each call (tests start it in before()).
 */
export function pageApi(host: () => HostAddress, page = 'page-1') {
  const post = (channel: string, arg: unknown) => postApi(host(), channel, JSON.stringify(arg), { 'x-vramscope-page': page }, 'latin1')
  const json = (r: { body: string }) => JSON.parse(r.body) as ApiReply
  async function settle(jobId: string, timeoutMs = 120_000): Promise<JobStatus> {
    const until = performance.now() + timeoutMs
    for (;;) {
      const status = json(await post('job:status', { jobId, waitMs: 100 })).result as JobStatus
      if (status.state !== 'running' && status.state !== 'queued') return status
      if (performance.now() > until) {
        await post('job:cancel', { jobId })
        throw new Error(`job ${jobId} (${status.phase}) did not end in ${timeoutMs / 1000} s`)
      }
    }
  }
  return { post, json, settle }
}
