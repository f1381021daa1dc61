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

/** Whether this machine shows an NVIDIA driver (a device node or the kernel module's version). */
export function nvidiaDriverPresent(): boolean {
  return existsSync('/dev/nvidiactl') || existsSync('/proc/driver/nvidia/version')
}

async function resolveCommand(command: string): Promise<string> {
  const executable = async (path: string) => {
    try {
      await access(path, constants.X_OK)
      return true
    } catch {
      return false
    }
  }
  if (command.includes('/')) {
    const path = isAbsolute(command) ? command : resolve(command)
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
  /** The program's stdio: 'inherit' (the CLI) or 'ignore'. */
  stdio?: 'inherit' | 'ignore'
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

export async function recordProgram(options: RecordProgramOptions): Promise<ProgramRecording> {
  const [command, ...args] = options.command
  if (command === undefined) throw new InputError('record', '', 'no program given after --')
  const executable = await resolveCommand(command)
  const scratch = await mkdtemp(join(tmpdir(), 'vramscope-record-'))
  const logPath = join(scratch, 'calls.log')
  const writer = await TraceWriter.create(options.output, {
    source: 'recording',
    warnings: [],
    properties: { recorder: INTERCEPT_LIBRARY_NAME, command: options.command.join(' ') },
  })
  const converter = new InterceptConverter(writer)
  const reader = new InterceptLogReader(logPath)
  let started = false
  let offset = 0
  let handle: Awaited<ReturnType<typeof open>> | undefined
  const piece = new Uint8Array(1 << 20)

  const drain = async () => {
    if (!handle) {
      try {
        handle = await open(logPath, 'r')
      } catch {
        return // the program has made no CUDA memory call yet
      }
    }
    for (;;) {
      const { bytesRead } = await handle.read(piece, 0, piece.length, offset)
      if (bytesRead === 0) break
      offset += bytesRead
      const records = reader.push(piece.subarray(0, bytesRead))
      if (!started && reader.header) {
        converter.start(reader.header)
        started = true
      }
      converter.add(records)
    }
    options.onProgress?.(writer.eventCount)
  }

  const preload = [options.library, process.env['LD_PRELOAD']].filter(Boolean).join(' ')
  const child = spawn(executable, args, {
    stdio: options.stdio ?? 'inherit',
    env: {
      ...process.env,
      LD_PRELOAD: preload,
      VRAMSCOPE_INTERCEPT_LOG: logPath,
      VRAMSCOPE_INTERCEPT_STACK: String(options.stackDepth ?? 0),
    },
  })
  // Ctrl-C reaches the program (same process group); the recorder stays to finish the file.
  const keep = () => undefined
  const forward = (signal: NodeJS.Signals) => child.kill(signal)
  process.on('SIGINT', keep)
  process.on('SIGTERM', forward)
  let reading = Promise.resolve()
  const timer = setInterval(() => {
    reading = reading.then(drain).catch(() => undefined)
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
    process.off('SIGINT', keep)
    process.off('SIGTERM', forward)
  }
  await reading
  await drain()
  await handle?.close()
  if (!started)
    writer.warn(
      'no CUDA memory call was recorded: the program made none, or reached CUDA in a way the interposer does not see (a statically linked driver, another process)',
    )
  if (signal) writer.warn(`the program was ended by ${signal}: calls in its last 50 ms may be missing`)
  if (reader.pendingBytes > 0) writer.warn(`the interposer log ends with ${reader.pendingBytes} bytes of a record cut short; dropped`)
  writer.property('exit', signal ?? String(exitCode))
  const summary = converter.finish()
  await writer.close()
  await rm(scratch, { recursive: true, force: true })
  return {
    output: options.output,
    command: [...options.command],
    pid: child.pid,
    exitCode,
    signal,
    recorded: started,
    events: writer.eventCount,
    logBytes: reader.bytes,
    tornBytes: reader.pendingBytes,
    summary,
  }
}
