// `vramscope mcp [--allow DIR]...`: a Model Context Protocol server on stdin/stdout, so that an agent
// can ask what a snapshot holds, what used memory at the peak, which PYTORCH_ALLOC_CONF fits, how
// strategies compare and how two files differ. Each tool runs the CLI's own command in this process
// (`runCli` with the tool's arguments and --json, its stdout and stderr captured), so the answer is
// the CLI's `--json` output, and a command's refusal (a bad file or option) is the tool's error
// result with the CLI's message. Files are read only under the folders given with --allow (default
// the working directory), checked after symlinks are resolved.
import { realpath, stat } from 'node:fs/promises'
import { isAbsolute, resolve, sep } from 'node:path'

import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js'
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js'
import type { CallToolResult, ProgressToken, ServerNotification, ServerRequest } from '@modelcontextprotocol/sdk/types.js'
import { z } from 'zod'

import { formatBytes } from '../../services/units.ts'
import { expandInputs } from '../../services/whatif/job.ts'
import type { ProgressListener } from '../progress.ts'
import { OptionError, type Io } from '../shared.ts'

export interface McpCommandOptions {
  /** --allow: folders whose files the tools may read (default: the working directory). */
  allow?: string[]
}

/** The CLI itself (main.ts's runCli), handed in so that this module does not import main.ts. */
export type RunCli = (argv: readonly string[], io: Io) => Promise<number>

/** The package's version, as the server names itself to clients. */
export interface McpServerInfo {
  version: string
}

/** A write stream that keeps what is written; not a terminal, so commands draw no progress bar. */
function captured(): { stream: NodeJS.WriteStream; text: () => string } {
  const chunks: string[] = []
  const stream = {
    isTTY: false,
    columns: 120,
    write(chunk: string | Uint8Array, ...rest: unknown[]): boolean {
      chunks.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8'))
      const done = rest.find((r) => typeof r === 'function') as (() => void) | undefined
      done?.()
      return true
    },
  }
  return { stream: stream as unknown as NodeJS.WriteStream, text: () => chunks.join('') }
}

/** The allowed folders, each resolved to its real path; one that is missing or not a folder is a bad --allow. */
async function allowedFolders(given: readonly string[] | undefined): Promise<string[]> {
  const folders = given === undefined || given.length === 0 ? [process.cwd()] : given
  const out: string[] = []
  for (const f of folders) {
    const real = await realpath(resolve(f)).catch(() => undefined)
    if (real === undefined) throw new OptionError('--allow', `'${f}': no such folder`)
    if (!(await stat(real)).isDirectory()) throw new OptionError('--allow', `'${f}' is not a folder`)
    if (!out.includes(real)) out.push(real)
  }
  return out
}

/** A refusal the tool returns as its error result (the server goes on). */
class ToolRefusal extends Error {}

const within = (real: string, folders: readonly string[]): boolean => folders.some((f) => real === f || real.startsWith(f.endsWith(sep) ? f : `${f}${sep}`))

const outside = (path: string, real: string, folders: readonly string[]): ToolRefusal =>
  new ToolRefusal(
    `${path}${real !== path ? ` (${real})` : ''} is outside the folders this server may read: ${folders.join(', ')} (start vramscope mcp with --allow FOLDER to add one)`,
  )

/**
 * `path` resolved (symlinks included) when it lies in an allowed folder; otherwise a refusal naming
 * it and the folders. A folder (a job of ranks) is checked file by file, as the command will read
 * it, so that a symlink in it cannot reach out.
 */
async function allowedPath(path: string, folders: readonly string[]): Promise<string> {
  const absolute = isAbsolute(path) ? path : resolve(path)
  const real = await realpath(absolute).catch(() => undefined)
  if (real === undefined) throw new ToolRefusal(`${path}: no such file or folder`)
  if (!within(real, folders)) throw outside(path, real, folders)
  if ((await stat(real)).isDirectory()) {
    // What the folder gives is the command's to refuse (none, a bad job.json), in its own words.
    const files = await expandInputs([real]).catch(() => [] as string[])
    for (const f of files) {
      const r = await realpath(f).catch(() => f)
      if (!within(r, folders)) throw outside(f, r, folders)
    }
  }
  return real
}

type Json = Record<string, unknown>

type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>

/** The least time between two progress notifications of one call, as the terminal's bar redraws. */
const PROGRESS_MS = 100

/**
 * The command's progress as notifications/progress for the client's token: a step's done/total
 * (bytes read, events or replays) in the message, and a progress that only grows, as MCP asks,
 * over the steps one after another (reading, then replaying), at most ten a second.
 */
function progressSender(extra: Extra, token: ProgressToken): ProgressListener {
  let base = 0
  let last: { label: string; done: number; total: number } | undefined
  let sent = 0
  let shown = -1
  return (label, done, total, unit) => {
    // A new step (another label, or a count started again): what the last one reached stays counted.
    if (last && (label !== last.label || done < last.done)) base += Math.max(last.total, last.done)
    last = { label, done, total }
    const now = Date.now()
    if (now - sent < PROGRESS_MS && done < total) return
    const progress = base + done
    if (progress <= shown) return
    sent = now
    shown = progress
    const amount = unit === 'bytes' ? `${formatBytes(done)} of ${formatBytes(total)}` : `${done} of ${total} ${unit}`
    extra
      .sendNotification({ method: 'notifications/progress', params: { progressToken: token, progress, message: `${label}: ${amount}` } })
      .catch(() => undefined)
  }
}

/** The short answer that comes before the JSON: one or two sentences an agent can repeat. */
type Summary = (json: Json) => string

const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined)
const bytes = (v: unknown): string => {
  const n = num(v)
  return n === undefined ? 'unknown' : formatBytes(n)
}

function infoSummary(json: Json): string {
  const ranks = json['ranks'] as Json[] | undefined
  if (ranks) {
    const fields = ((json['differs'] as Json | undefined)?.['fields'] as Json[] | undefined) ?? []
    return `${ranks.length} ranks; ${fields.length === 0 ? 'they are alike in every field compared' : `they differ in ${fields.map((f) => String(f['field'])).join(', ')}`}.`
  }
  const oom = json['oom'] as Json | undefined
  return (
    `${String(json['file'])}: ${String(json['format'])}, ${num(json['events']) ?? 0} events, peak requested ${bytes(json['peakRequested'])}` +
    `${oom ? `; ${num(oom['count']) ?? 1} out-of-memory recorded` : ''}.`
  )
}

function topSummary(json: Json): string {
  const ranks = json['ranks'] as Json[] | undefined
  const groups = ((ranks ? (json['differs'] as Json | undefined)?.['groups'] : json['groups']) as Json[] | undefined) ?? []
  const first = groups[0]
  if (!first) return 'Nothing was live at that moment.'
  const share = num(first['share'])
  return (
    `The largest group${ranks ? ` over ${ranks.length} ranks` : ''} is ${String(first['key'])}: ${bytes(first['bytes'])}` +
    `${share !== undefined ? ` (${(share * 100).toFixed(1)} % of what was live)` : ''}, of ${groups.length} group${groups.length === 1 ? '' : 's'}.`
  )
}

function whatifSummary(json: Json): string {
  const configs = (json['configs'] as Json[] | undefined) ?? []
  const ranked = configs.filter((c) => (num(c['rank']) ?? 0) > 0).sort((a, b) => num(a['rank'])! - num(b['rank'])!)
  const best = ranked[0]
  if (!best) return `No configuration could be ranked (${configs.length} replayed).`
  const job = json['ranks'] !== undefined
  const whole = job ? 'the whole job (every rank)' : 'the whole trace'
  // A recording that ended at its out-of-memory: each smallest limit is a lower bound, as the CLI says.
  const atLeast = json['endsAtOom'] === true ? 'at least ' : ''
  const line = typeof best['line'] === 'string' ? ` (${best['line']})` : ''
  const peak = job ? '' : `, peak reserved ${bytes(best['peakReserved'])}, ${num(best['failures']) ?? 0} failures`
  const own = num(best['smallestFittingBytes'])
  // The static plan is a bound, not a configuration: the least a real one runs the trace in leaves it out.
  const least = configs
    .filter((c) => num(c['smallestFittingBytes']) !== undefined && !(c['kind'] === 'strategy' && c['conf'] === 'planned'))
    .sort((a, b) => num(a['smallestFittingBytes'])! - num(b['smallestFittingBytes'])!)[0]
  const fits =
    least === undefined
      ? 'No smallest fitting limit was found (the search was skipped, or nothing fits).'
      : own !== undefined && own <= num(least['smallestFittingBytes'])!
        ? `The smallest device limit that runs ${whole} is ${atLeast}${formatBytes(own)}, under it.`
        : `${own !== undefined ? `It runs ${whole} in ${atLeast}${formatBytes(own)}; ` : ''}the smallest device limit that runs ${whole} is ${atLeast}${bytes(least['smallestFittingBytes'])}, under ${String(least['label'])}.`
  const floor = json['floor'] as Json | undefined
  const floorText =
    floor && num(floor['peakLiveRoundedBytes']) !== undefined
      ? ` The floor: ${bytes(floor['peakLiveRoundedBytes'])} live at the peak, which no allocator reserves less than${num(floor['plannedBytes']) ? `; a static plan of every block's lifetime reserves ${bytes(floor['plannedBytes'])}` : ''}.`
      : ''
  return `Best configuration: ${String(best['label'])}${line}${peak}. ${fits}${floorText}`
}

function replaySummary(json: Json): string {
  const strategies = (json['strategies'] as Json[] | undefined) ?? []
  const winners = (json['winners'] as Record<string, string[]> | undefined)?.['peakReserved']
  const peaks = strategies.map((s) => `${String(s['name'])} ${bytes((s['summary'] as Json | undefined)?.['peakReserved'])}`)
  return `Peak reserved: ${peaks.join(', ')}.${winners && winners.length > 0 ? ` Lowest: ${winners.join(', ')}.` : ''}`
}

function diffSummary(json: Json): string {
  const strategies = (json['strategies'] as Json[] | undefined) ?? []
  const trace = (json['trace'] as Json[] | undefined) ?? []
  const peak = trace.find((r) => r['key'] === 'peakRequested' || r['label'] === 'peak requested')
  return (
    `${peak ? `Peak requested: ${bytes(peak['a'])} in a, ${bytes(peak['b'])} in b. ` : ''}` +
    `${strategies.length} strateg${strategies.length === 1 ? 'y' : 'ies'} compared${strategies.length === 0 ? ' (neither file holds results; give strategies to replay both)' : ''}.`
  )
}

/** Options as the CLI's flags: a string once, a list once a value, a false boolean as its --no- flag. */
function flag(argv: string[], name: string, value: string | number | string[] | undefined): void {
  if (value === undefined) return
  // --name=value, so that a value starting with a dash stays a value.
  for (const v of Array.isArray(value) ? value : [value]) argv.push(`--${name}=${String(v)}`)
}

const fileArg = z.string().describe('a PyTorch snapshot (.pickle or .json), .vramscope trace or RMM log (.csv); a folder: a job of one rank a file')
const capArg = z.string().describe('the device limit, such as 24GiB')
const gpuArg = z.string().describe("the device's memory, such as 80GiB (default: what the file implies, else an H100 80GB)")
const strategiesArg = z
  .array(z.string())
  .describe('strategies to replay, parameters after colons, such as "caching:preset=pytorch" or "slab,buddy:pool_size=4GiB"')

export async function mcpCommand(io: Io, options: McpCommandOptions, runCli: RunCli, info: McpServerInfo): Promise<void> {
  const folders = await allowedFolders(options.allow)
  const server = new McpServer({ name: 'vramscope', version: info.version })

  /** Runs one CLI command with --json; its JSON and a short answer, or its message as the tool's error. */
  const call = async (paths: string[], build: (real: string[]) => string[], summary: Summary, extra: Extra, limit?: number): Promise<CallToolResult> => {
    const refused = (text: string): CallToolResult => ({ isError: true, content: [{ type: 'text', text }] })
    const real: string[] = []
    try {
      for (const p of paths) real.push(await allowedPath(p, folders))
    } catch (e) {
      if (e instanceof ToolRefusal) return refused(e.message)
      throw e
    }
    if (extra.signal.aborted) return refused('cancelled')
    const out = captured()
    const err = captured()
    // The checked real paths stand in for the given ones, so what is read is what was checked.
    const argv = build(real)
    const code = await runCli([...argv, '--json'], {
      stdout: out.stream,
      stderr: err.stream,
      signal: extra.signal,
      ...(extra._meta?.progressToken !== undefined && { onProgress: progressSender(extra, extra._meta.progressToken) }),
    })
    // Cancelled: the client has stopped waiting (the SDK sends no answer); the log says it ended.
    if (extra.signal.aborted) {
      io.stderr.write(`vramscope mcp: ${argv[0]!} cancelled, ended ${code === 0 ? 'already done' : 'early'}\n`)
      return refused('cancelled')
    }
    if (code !== 0) return refused(err.text().trim() || `vramscope ${argv[0]!} failed with exit code ${code}`)
    let json: Json
    try {
      json = JSON.parse(out.text()) as Json
    } catch {
      return refused(`vramscope ${argv[0]} printed no JSON: ${out.text().slice(0, 400)}`)
    }
    // The answer is of every group; the JSON keeps the first `limit` of them.
    const answer = summary(json)
    let note = ''
    if (limit !== undefined && Array.isArray(json['groups']) && json['groups'].length > limit) {
      note = ` The JSON below holds the first ${limit}.`
      json = { ...json, groups: json['groups'].slice(0, limit) }
    }
    const warnings = err.text().trim()
    return {
      content: [
        { type: 'text', text: `${answer}${note}${warnings ? `\n${warnings}` : ''}` },
        { type: 'text', text: JSON.stringify(json, null, 2) },
      ],
      structuredContent: json,
    }
  }

  server.registerTool(
    'info',
    {
      description:
        'What a trace file, PyTorch memory snapshot or RMM log holds (events, peak requested, a recorded out-of-memory): `vramscope info FILE --json`',
      inputSchema: {
        file: fileArg,
        device: z.string().optional().describe("which device of a PyTorch snapshot: an ordinal or 'all'"),
      },
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    async (a, extra) =>
      call(
        [a.file],
        ([file]) => {
          const argv = ['info', file!]
          flag(argv, 'device', a.device)
          return argv
        },
        infoSummary,
        extra,
      ),
  )

  server.registerTool(
    'top',
    {
      description:
        'What was using memory at the peak, at an out-of-memory or at an event: live blocks grouped by the frame of the code (or tag, stream), largest first: `vramscope top FILE --json`',
      inputSchema: {
        file: fileArg,
        at: z.string().optional().describe("'peak' (default), 'oom' (the first recorded out-of-memory) or an event index"),
        by: z.enum(['frame', 'tag', 'stream']).optional().describe('how blocks are grouped (default frame)'),
        limit: z.number().int().min(1).optional().describe('groups to return (default: all)'),
        strategy: z
          .string()
          .optional()
          .describe("count the blocks as this strategy lays them out, such as caching:preset=pytorch; 'recorded': the recorded layout"),
      },
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    async (a, extra) =>
      call(
        [a.file],
        ([file]) => {
          const argv = ['top', file!]
          flag(argv, 'at', a.at)
          flag(argv, 'by', a.by)
          flag(argv, 'limit', a.limit)
          flag(argv, 'strategy', a.strategy)
          return argv
        },
        topSummary,
        extra,
        a.limit,
      ),
  )

  server.registerTool(
    'whatif',
    {
      description:
        'Which PYTORCH_ALLOC_CONF would fix an out-of-memory and how much GPU the job needs: replays the snapshot under many allocator configurations (or those given) and ranks them: `vramscope whatif FILE --json`',
      inputSchema: {
        file: fileArg,
        conf: z
          .array(z.string())
          .optional()
          .describe('PYTORCH_ALLOC_CONF strings such as "expandable_segments:True"; "recorded": the snapshot\'s own; none: a grid'),
        cap: z
          .string()
          .optional()
          .describe('the device limit: a size such as 24GiB or a per_process_memory_fraction such as 0.25 (default: what a recorded out-of-memory implies)'),
        gpu: gpuArg.optional(),
        search: z.boolean().optional().describe('search for the smallest limit that runs the whole trace (default true)'),
        strategies: z.boolean().optional().describe("grid: include vramscope's other strategies (default true)"),
      },
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    async (a, extra) =>
      call(
        [a.file],
        ([file]) => {
          const argv = ['whatif', file!]
          flag(argv, 'conf', a.conf)
          flag(argv, 'cap', a.cap)
          flag(argv, 'gpu', a.gpu)
          if (a.search === false) argv.push('--no-search')
          if (a.strategies === false) argv.push('--no-strategies')
          return argv
        },
        whatifSummary,
        extra,
      ),
  )

  server.registerTool(
    'replay',
    {
      description:
        'Replays a trace through allocator strategies or PyTorch configurations and compares peak, waste, fragmentation, failures and device calls: `vramscope replay FILE --json`',
      inputSchema: {
        file: z.string().describe('a PyTorch snapshot (.pickle or .json), .vramscope trace or RMM log (.csv)'),
        strategies: strategiesArg.optional(),
        conf: z.array(z.string()).optional().describe('PYTORCH_ALLOC_CONF strings replayed through the PyTorch model; "recorded": the snapshot\'s own'),
        cap: capArg.optional(),
        gpu: gpuArg.optional(),
      },
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    async (a, extra) =>
      call(
        [a.file],
        ([file]) => {
          const argv = ['replay', file!]
          flag(argv, 'strategies', a.strategies)
          flag(argv, 'conf', a.conf)
          flag(argv, 'cap', a.cap)
          flag(argv, 'gpu', a.gpu)
          return argv
        },
        replaySummary,
        extra,
      ),
  )

  server.registerTool(
    'diff',
    {
      description:
        'Two traces or two result files side by side, with the differences (replayed first through strategies if given): `vramscope diff A B --json`',
      inputSchema: {
        a: z.string().describe('the first trace or result file'),
        b: z.string().describe('the second trace or result file'),
        strategies: strategiesArg.optional(),
        cap: capArg.optional(),
      },
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    async (a, extra) =>
      call(
        [a.a, a.b],
        ([first, second]) => {
          const argv = ['diff', first!, second!]
          flag(argv, 'strategies', a.strategies)
          flag(argv, 'cap', a.cap)
          return argv
        },
        diffSummary,
        extra,
      ),
  )

  const transport = new StdioServerTransport(process.stdin, io.stdout)
  const closed = new Promise<void>((done) => {
    transport.onclose = () => done()
  })
  await server.connect(transport)
  // The client closing its end of stdin ends the server.
  process.stdin.once('end', () => void server.close())
  io.stderr.write(`vramscope mcp: serving on stdio; files under ${folders.join(', ')}\n`)
  await closed
}
