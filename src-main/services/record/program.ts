// `vramscope record -- PROGRAM ARGS`: runs any CUDA program with libvramscope_intercept.so
// preloaded and turns the log it appends to (intercept-log.ts) into a trace file as the program
// runs, through the streaming TraceWriter: whatever happens to the program (a crash, a kill, a
// CUDA error), the file opens, holding every call up to the interposer's last flush (50 ms) and
// the recorder's own (250 ms). The program runs in its own process; this one only reads its log.
import { spawn } from 'node:child_process'
import { constants, existsSync } from 'node:fs'
import { access, mkdtemp, open, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { delimiter, dirname, isAbsolute, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

import { addonCandidates } from '../../native.ts'
import { InputError } from '../input-error.ts'
import { TraceWriter } from '../trace/file.ts'
import { InterceptConverter, type InterceptSummary } from '../import/intercept-converter.ts'
import { InterceptLogReader } from '../import/intercept-log.ts'

export const INTERCEPT_LIBRARY_NAME = 'libvramscope_intercept.so'

/** Where the interposer may be: $VRAMSCOPE_INTERCEPT, beside the addon, in a native build directory. */
export function interceptCandidates(): string[] {
  const fromEnv = process.env['VRAMSCOPE_INTERCEPT']
  if (fromEnv) return [resolve(fromEnv)]
  const root = fileURLToPath(new URL('../../..', import.meta.url))
  return [
    ...addonCandidates().map((addon) => join(dirname(addon), INTERCEPT_LIBRARY_NAME)),
    join(root, 'build', 'Release', INTERCEPT_LIBRARY_NAME),
    join(root, 'native', 'build', INTERCEPT_LIBRARY_NAME),
  ]
}

export function findInterceptLibrary(): string {
  const candidates = interceptCandidates()
  const found = candidates.find((path) => existsSync(path))
  if (!found)
    throw new InputError(
      INTERCEPT_LIBRARY_NAME,
      '',
      `not built (looked in ${candidates.join(', ')}); \`npm run build:addon\` builds it beside the addon, or set VRAMSCOPE_INTERCEPT to its path`,
    )
  return found
}

/** The interposer where it is built, else undefined (a recording of snapshots alone). */
export function interceptLibraryIfBuilt(): string | undefined {
  return interceptCandidates().find((path) => existsSync(path))
}

/** Whether this machine shows an NVIDIA driver (a device node or the kernel module's version). */
export function nvidiaDriverPresent(): boolean {
  return existsSync('/dev/nvidiactl') || existsSync('/proc/driver/nvidia/version')
}

async function resolveCommand(command: string, cwd?: string): Promise<string> {
  const executable = async (path: string) => {
    try {
      await access(path, constants.X_OK)
      return true
    } catch {
      return false
    }
  }
  if (command.includes('/')) {
    const path = isAbsolute(command) ? command : resolve(cwd ?? '.', command)
    if (await executable(path)) return path
    throw new InputError(command, '', 'no such executable')
  }
  for (const dir of (process.env['PATH'] ?? '').split(delimiter)) {
    if (dir && (await executable(join(dir, command)))) return join(dir, command)
  }
  throw new InputError(command, '', 'command not found on PATH')
}

export interface RecordProgramOptions {
  command: readonly string[]
  output: string
  library: string
  /** Native frames captured per call (0: none; at most 32). */
  stackDepth?: number
  /** How often the log is read (ms); default 100. */
  pollMs?: number
  /** The program's stdio: 'inherit' (the CLI), 'stderr' (its stdout onto this one's stderr, where stdout carries JSON) or 'ignore'. */
  stdio?: RecordedStdio
  onProgress?: (events: number) => void
}

export interface ProgramRecording {
  output: string
  command: string[]
  pid: number | undefined
  exitCode: number | null
  signal: NodeJS.Signals | null
  /** Whether the program made any CUDA memory call the interposer saw. */
  recorded: boolean
  events: number
  logBytes: number
  /** Bytes of a record cut short at the end of the log (the program was killed mid-write). */
  tornBytes: number
  summary: InterceptSummary
}

/**
 * Follows one interposer log as its program appends to it, into one trace file: `drain()` reads
 * what is new (nothing until the log exists), `finish()` closes the trace with what the log
 * showed. The log's records are whole or, at its very end, a record cut short (dropped, warned).
 */
export class InterceptLogFollower {
  readonly writer: TraceWriter
  private readonly converter: InterceptConverter
  private readonly reader: InterceptLogReader
  private started = false
  private offset = 0
  private handle: Awaited<ReturnType<typeof open>> | undefined
  private readonly piece = new Uint8Array(1 << 20)

  private constructor(
    readonly logPath: string,
    writer: TraceWriter,
  ) {
    this.writer = writer
    this.converter = new InterceptConverter(writer)
    this.reader = new InterceptLogReader(logPath)
  }

  static async create(logPath: string, output: string, properties: Record<string, string>): Promise<InterceptLogFollower> {
    const writer = await TraceWriter.create(output, { source: 'recording', warnings: [], properties: { recorder: INTERCEPT_LIBRARY_NAME, ...properties } })
    return new InterceptLogFollower(logPath, writer)
  }

  /** Whether the log has shown its header (the program made a CUDA memory call). */
  get recorded(): boolean {
    return this.started
  }
  get events(): number {
    return this.writer.eventCount
  }

  async drain(): Promise<void> {
    if (!this.handle) {
      try {
        this.handle = await open(this.logPath, 'r')
      } catch {
        return // the program has made no CUDA memory call yet
      }
    }
    for (;;) {
      const { bytesRead } = await this.handle.read(this.piece, 0, this.piece.length, this.offset)
      if (bytesRead === 0) break
      this.offset += bytesRead
      const records = this.reader.push(this.piece.subarray(0, bytesRead))
      if (!this.started && this.reader.header) {
        this.converter.start(this.reader.header)
        this.started = true
      }
      this.converter.add(records)
    }
  }

  /** Reads the rest of the log and closes the trace, with the program's end (`exit`: a code or a signal). */
  async finish(exit: string, signal: NodeJS.Signals | null): Promise<{ summary: InterceptSummary; logBytes: number; tornBytes: number }> {
    await this.drain()
    await this.handle?.close()
    this.handle = undefined
    if (!this.started)
      this.writer.warn(
        'no CUDA memory call was recorded: the program made none, or reached CUDA in a way the interposer does not see (a statically linked driver, another process)',
      )
    if (signal) this.writer.warn(`the program was ended by ${signal}: calls in its last 50 ms may be missing`)
    if (this.reader.pendingBytes > 0) this.writer.warn(`the interposer log ends with ${this.reader.pendingBytes} bytes of a record cut short; dropped`)
    this.writer.property('exit', exit)
    const summary = this.converter.finish()
    await this.writer.close()
    return { summary, logBytes: this.reader.bytes, tornBytes: this.reader.pendingBytes }
  }
}

export type RecordedStdio = 'inherit' | 'stderr' | 'ignore'

export interface ProgramExit {
  pid: number | undefined
  exitCode: number | null
  signal: NodeJS.Signals | null
}

/**
 * Runs a program to its end with `env` added to this process's environment, calling `tick` every
 * `pollMs` (one at a time) while it runs. Ctrl-C reaches the program (same process group) and the
 * recorder stays to finish its files; a SIGTERM to the recorder is passed on to the program.
 */
export async function runRecorded(
  command: readonly string[],
  env: Record<string, string>,
  options: {
    stdio?: RecordedStdio
    pollMs?: number
    /** The program's working directory (default this process's). */
    cwd?: string
    /** The program's stdout and stderr into this file (stdin closed), in place of `stdio`. */
    outputFile?: string
    /** Aborting sends the program SIGTERM (and SIGKILL 10 s later if it is still running). */
    signal?: AbortSignal
  },
  tick: () => Promise<void>,
): Promise<ProgramExit> {
  const [name, ...args] = command
  if (name === undefined) throw new InputError('record', '', 'no program given after --')
  const executable = await resolveCommand(name, options.cwd)
  const output = options.outputFile !== undefined ? await open(options.outputFile, 'a') : undefined
  const stdio =
    output !== undefined
      ? (['ignore', output.fd, output.fd] as const)
      : options.stdio === 'stderr'
        ? (['inherit', 2, 'inherit'] as const)
        : (options.stdio ?? 'inherit')
  let child
  try {
    child = spawn(executable, args, {
      stdio: [...(typeof stdio === 'string' ? [stdio, stdio, stdio] : stdio)],
      env: { ...process.env, ...env },
      ...(options.cwd !== undefined && { cwd: options.cwd }),
    })
  } finally {
    await output?.close() // the child holds its own copy
  }
  const keep = () => undefined
  const forward = (signal: NodeJS.Signals) => child.kill(signal)
  process.on('SIGINT', keep)
  process.on('SIGTERM', forward)
  let killer: NodeJS.Timeout | undefined
  const abort = () => {
    child.kill('SIGTERM')
    killer = setTimeout(() => child.kill('SIGKILL'), 10_000)
    killer.unref()
  }
  if (options.signal?.aborted) abort()
  else options.signal?.addEventListener('abort', abort, { once: true })
  let reading = Promise.resolve()
  const timer = setInterval(() => {
    reading = reading.then(tick).catch(() => undefined)
  }, options.pollMs ?? 100)
  let exitCode: number | null = null
  let signal: NodeJS.Signals | null = null
  try {
    ;[exitCode, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((done, fail) => {
      child.once('error', fail)
      child.once('exit', (code, sig) => done([code, sig]))
    })
  } finally {
    clearInterval(timer)
    clearTimeout(killer)
    options.signal?.removeEventListener('abort', abort)
    process.off('SIGINT', keep)
    process.off('SIGTERM', forward)
  }
  await reading
  return { pid: child.pid, exitCode, signal }
}

export async function recordProgram(options: RecordProgramOptions): Promise<ProgramRecording> {
  const scratch = await mkdtemp(join(tmpdir(), 'vramscope-record-'))
  const logPath = join(scratch, 'calls.log')
  try {
    const follower = await InterceptLogFollower.create(logPath, options.output, { command: options.command.join(' ') })
    const preload = [options.library, process.env['LD_PRELOAD']].filter(Boolean).join(' ')
    const exit = await runRecorded(
      options.command,
      { LD_PRELOAD: preload, VRAMSCOPE_INTERCEPT_LOG: logPath, VRAMSCOPE_INTERCEPT_STACK: String(options.stackDepth ?? 0) },
      options,
      async () => {
        await follower.drain()
        options.onProgress?.(follower.events)
      },
    )
    const { summary, logBytes, tornBytes } = await follower.finish(exit.signal ?? String(exit.exitCode), exit.signal)
    return {
      output: options.output,
      command: [...options.command],
      ...exit,
      recorded: follower.recorded,
      events: follower.events,
      logBytes,
      tornBytes,
      summary,
    }
  } finally {
    await rm(scratch, { recursive: true, force: true })
  }
}
