// `vramscope mcp`, started as an MCP client starts it (node bin/vramscope.mjs mcp --allow DIR, a
// child process on stdio) and spoken to with the SDK's own client: the five tools and their input
// schemas, info and whatif answering with the same JSON as the CLI's --json on a real H200 snapshot
// (test/fixtures/pytorch/field-gpu.tar.gz), a file outside the allowed folder refused by name (a
// symlink inside pointing out of it included), a bad option a tool error after which the server
// still answers, progress notifications for a call with a progress token, and a cancelled whatif or replay
// ended early.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'

import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'

import { formatBytes } from '../../src-main/services/units.ts'
import { BIN, fixture, vramscopeJson } from '../helpers/cli.ts'

const allowed = mkdtempSync(join(tmpdir(), 'vramscope-mcp-'))
const outside = mkdtempSync(join(tmpdir(), 'vramscope-mcp-outside-'))
execFileSync('tar', ['xzf', fixture('pytorch/field-gpu.tar.gz'), '-C', allowed, 'field/ddp_rank0__default.pickle', 'field/big__default.pickle'])
const snapshot = join(allowed, 'field', 'ddp_rank0__default.pickle')
// The largest of the field snapshots: its what-if grid runs about a hundred replays, long enough to cancel.
const big = join(allowed, 'field', 'big__default.pickle')
const secret = join(outside, 'secret.pickle')
writeFileSync(secret, 'not for the agent')
symlinkSync(secret, join(allowed, 'link.pickle'))

const client = new Client({ name: 'vramscope-test', version: '0' })
let stderr = ''

/** A tool's answer: its text contents, and its structured content (the CLI's JSON). */
/** Waits until the server's stderr matches. */
async function stderrMatches(pattern: RegExp, ms: number): Promise<void> {
  const until = Date.now() + ms
  while (!pattern.test(stderr)) {
    if (Date.now() > until) assert.fail(`the server's stderr never matched ${pattern}:\n${stderr}`)
    await new Promise((r) => setTimeout(r, 20))
  }
}

async function call(name: string, args: Record<string, unknown>): Promise<CallToolResult> {
  return (await client.callTool({ name, arguments: args })) as CallToolResult
}
const texts = (r: CallToolResult): string[] => r.content.map((c) => (c.type === 'text' ? c.text : `(${c.type})`))

/** A what-if result without what depends on the run (wall time and the rate from it). */
function timeless(json: Record<string, unknown>): Record<string, unknown> {
  const { elapsedMs: _e, eventsPerSecondPerCore: _r, ...rest } = json
  // The static plan's milliseconds (floor.plannedMs) are a timing too.
  const floor = rest['floor'] as Record<string, unknown> | undefined
  return floor ? { ...rest, floor: { ...floor, plannedMs: 0 } } : rest
}

describe('vramscope mcp', { timeout: 300_000 }, () => {
  before(async () => {
    const transport = new StdioClientTransport({ command: process.execPath, args: [BIN, 'mcp', '--allow', allowed], stderr: 'pipe' })
    transport.stderr?.on('data', (d: Buffer) => (stderr += d.toString()))
    await client.connect(transport)
  })
  after(async () => {
    await client.close()
    rmSync(allowed, { recursive: true, force: true })
    rmSync(outside, { recursive: true, force: true })
  })

  it('lists the five tools, each with its input schema', async () => {
    const { tools } = await client.listTools()
    assert.deepEqual(tools.map((t) => t.name).sort(), ['diff', 'info', 'replay', 'top', 'whatif'])
    const schema = (name: string) => tools.find((t) => t.name === name)!.inputSchema as { properties: Record<string, { type?: string }>; required?: string[] }
    for (const name of ['info', 'top', 'whatif', 'replay']) assert.deepEqual(schema(name).required, ['file'], name)
    assert.deepEqual(schema('diff').required?.sort(), ['a', 'b'])
    assert.equal(schema('whatif').properties['conf']?.type, 'array')
    assert.deepEqual(Object.keys(schema('whatif').properties).sort(), ['cap', 'conf', 'file', 'gpu', 'search', 'strategies'])
    assert.deepEqual(Object.keys(schema('top').properties).sort(), ['at', 'by', 'file', 'limit', 'strategy'])
    assert.deepEqual(Object.keys(schema('replay').properties).sort(), ['cap', 'conf', 'file', 'gpu', 'strategies'])
    for (const t of tools) assert.ok(t.description && t.description.length > 20, `${t.name} has a description`)
    assert.match(stderr, /serving on stdio/)
  })

  it("info answers with the CLI's --json and a sentence", async () => {
    const r = await call('info', { file: snapshot })
    assert.equal(r.isError, undefined, texts(r).join('\n'))
    const cli = await vramscopeJson(['info', snapshot])
    assert.deepEqual(r.structuredContent, cli)
    assert.deepEqual(JSON.parse(texts(r)[1]!), cli)
    assert.match(texts(r)[0]!, /ddp_rank0__default\.pickle: PyTorch memory snapshot .*, [\d]+ events, peak requested [\d.]+ [KMG]iB/)
  })

  it("whatif with the recorded configuration answers with the CLI's --json, naming the best configuration and the smallest fitting limit", async () => {
    const r = await call('whatif', { file: snapshot, conf: ['recorded'] })
    assert.equal(r.isError, undefined, texts(r).join('\n'))
    const cli = await vramscopeJson(['whatif', snapshot, '--conf', 'recorded'])
    const json = r.structuredContent as Record<string, unknown>
    assert.deepEqual(timeless(json), timeless(cli))
    const configs = json['configs'] as { label: string; smallestFittingBytes: number | null }[]
    assert.equal(configs.length, 1)
    assert.ok(texts(r)[0]!.startsWith(`Best configuration: ${configs[0]!.label}`), texts(r)[0])
    const smallest = configs[0]!.smallestFittingBytes
    assert.ok(smallest !== null, 'the search found a smallest fitting limit')
    assert.ok(texts(r)[0]!.includes(`The smallest device limit that runs the whole trace is ${formatBytes(smallest)}, under it.`), texts(r)[0])
    const floor = json['floor'] as { peakLiveRoundedBytes: number; plannedBytes: number }
    assert.ok(texts(r)[0]!.includes(`The floor: ${formatBytes(floor.peakLiveRoundedBytes)} live at the peak`), texts(r)[0])
  })

  it('top names the largest group, with --limit keeping that many groups', async () => {
    const r = await call('top', { file: snapshot, limit: 2 })
    assert.equal(r.isError, undefined, texts(r).join('\n'))
    const cli = await vramscopeJson<{ groups: { key: string }[] }>(['top', snapshot])
    const json = r.structuredContent as { groups: { key: string }[] }
    assert.deepEqual(json.groups, cli.groups.slice(0, 2))
    assert.ok(texts(r)[0]!.startsWith(`The largest group is ${cli.groups[0]!.key}:`), texts(r)[0])
  })

  it("replay and diff answer with the CLI's --json", async () => {
    const replay = await call('replay', { file: snapshot, conf: ['recorded'], strategies: ['slab'] })
    assert.equal(replay.isError, undefined, texts(replay).join('\n'))
    const cli = await vramscopeJson<{ strategies: { name: string; summary: Record<string, number> }[] }>([
      'replay',
      snapshot,
      '--conf',
      'recorded',
      '-s',
      'slab',
    ])
    const json = replay.structuredContent as typeof cli
    assert.deepEqual(
      json.strategies.map((s) => [s.name, s.summary['peakReserved']]),
      cli.strategies.map((s) => [s.name, s.summary['peakReserved']]),
    )
    assert.match(texts(replay)[0]!, /^Peak reserved: .*slab [\d.]+ [KMG]iB/)
    const diff = await call('diff', { a: snapshot, b: snapshot })
    assert.equal(diff.isError, undefined, texts(diff).join('\n'))
    assert.deepEqual(diff.structuredContent, await vramscopeJson(['diff', snapshot, snapshot]))
  })

  it('refuses a file outside the allowed folders, naming it and the folders, a symlink out of them too', async () => {
    const r = await call('info', { file: secret })
    assert.equal(r.isError, true)
    assert.match(texts(r)[0]!, new RegExp(`${secret.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} is outside the folders this server may read: .*vramscope-mcp-`))
    const link = await call('info', { file: join(allowed, 'link.pickle') })
    assert.equal(link.isError, true)
    assert.match(texts(link)[0]!, /link\.pickle \(.*secret\.pickle\) is outside the folders/)
    // A folder inside (a job of ranks) is read file by file: a symlink in it out of the folders is refused too.
    const job = join(allowed, 'job')
    mkdirSync(job)
    copyFileSync(snapshot, join(job, 'rank0.pickle'))
    symlinkSync(secret, join(job, 'rank1.pickle'))
    const folder = await call('info', { file: job })
    assert.equal(folder.isError, true)
    assert.match(texts(folder)[0]!, /job\/rank1\.pickle \(.*secret\.pickle\) is outside the folders/)
    rmSync(job, { recursive: true })
    const diff = await call('diff', { a: snapshot, b: secret })
    assert.equal(diff.isError, true)
    assert.match(texts(diff)[0]!, /secret\.pickle is outside/)
  })

  it("a bad option is a tool error with the CLI's message, and the server answers the next call", async () => {
    const r = await call('whatif', { file: snapshot, cap: 'lots' })
    assert.equal(r.isError, true)
    assert.match(texts(r)[0]!, /--cap/)
    const top = await call('top', { file: snapshot, at: 'never' })
    assert.equal(top.isError, true)
    assert.match(texts(top)[0]!, /--at: 'never': give peak, oom or an event index/)
    const missing = await call('info', { file: join(allowed, 'nothing.pickle') })
    assert.equal(missing.isError, true)
    assert.match(texts(missing)[0]!, /nothing\.pickle: no such file or folder/)
    const again = await call('info', { file: snapshot })
    assert.equal(again.isError, undefined)
    assert.equal((again.structuredContent as { file: string }).file, snapshot)
  })

  it('sends progress notifications, growing, where the call has a progress token', async () => {
    const seen: { progress: number; message?: string }[] = []
    const r = (await client.callTool({ name: 'whatif', arguments: { file: snapshot } }, undefined, {
      onprogress: (p) => seen.push(p),
    })) as CallToolResult
    assert.equal(r.isError, undefined, texts(r).join('\n'))
    assert.ok(seen.length >= 1, 'at least one progress notification')
    for (let i = 1; i < seen.length; i++) assert.ok(seen[i]!.progress > seen[i - 1]!.progress, `progress grows: ${JSON.stringify(seen)}`)
    assert.ok(
      seen.some((p) => /^(what-if .*: \d+ of \d+ replays|\w+ .*ddp_rank0__default\.pickle: [\d.]+ [KMG]?i?B of)/.test(p.message ?? '')),
      JSON.stringify(seen),
    )
  })

  it('a cancelled whatif ends early, and the server answers the next call', async () => {
    const abort = new AbortController()
    const started = Date.now()
    const cancelled = client.callTool({ name: 'whatif', arguments: { file: big } }, undefined, {
      signal: abort.signal,
      // Cancelled once the replays have begun: the first of about a hundred.
      onprogress: (p) => {
        if (/^what-if /.test(p.message ?? '')) abort.abort(new Error('enough'))
      },
    })
    await assert.rejects(cancelled, /enough/)
    await stderrMatches(/vramscope mcp: whatif cancelled, ended early/, 60_000)
    const r = await call('info', { file: snapshot })
    assert.equal(r.isError, undefined)
    assert.ok(Date.now() - started < 60_000)
  })

  it('a cancelled replay ends early too (its read and its replay take the request signal), and the server answers the next call', async () => {
    const abort = new AbortController()
    const cancelled = client.callTool(
      {
        name: 'replay',
        arguments: {
          file: big,
          strategies: ['caching:preset=pytorch', 'caching:preset=pow2', 'slab', 'buddy', 'vmm_growable', 'stitching', 'rmm_pool', 'arena'],
        },
      },
      undefined,
      {
        signal: abort.signal,
        // Cancelled at its first progress (reading the file): what is left, the rest of the read
        // and every replay, is far longer than the cancel takes to arrive.
        onprogress: () => abort.abort(new Error('enough')),
      },
    )
    await assert.rejects(cancelled, /enough/)
    await stderrMatches(/vramscope mcp: replay cancelled, ended early/, 60_000)
    const r = await call('info', { file: snapshot })
    assert.equal(r.isError, undefined)
  })
})
