// `vramscope record`: a recording of real GPU memory use, streamed into a trace file that opens
// whatever happens to the program or the recorder.
//   vramscope record -o run.vramscope -- python train.py      any CUDA program, through the interposer
//   vramscope record --workload training [--strategy S] [-p KEY=VALUE]... -o run.vramscope
//   vramscope record --pytorch [-o DIR] -- python train.py    a PyTorch program at tensor level too (pytorch.ts)
// Without an NVIDIA GPU and driver it says so and exits 2.
import { InputError } from '../../services/input-error.ts'
import { findInterceptLibrary, interceptLibraryIfBuilt, nvidiaDriverPresent, recordProgram } from '../../services/record/program.ts'
import { defaultPytorchOutDir, recordPytorch, type PytorchRecording } from '../../services/record/pytorch.ts'
import { recordWorkloadInChild, type WorkloadSpec } from '../../services/record/workload.ts'
import { parseStrategySpecs } from '../../services/replay/strategy-spec.ts'
import { formatBytes, parseByteSize } from '../../services/units.ts'
import { OptionError, printJson, type CommonOptions, type Io } from '../shared.ts'

export const NO_GPU_MESSAGE = 'recording needs an NVIDIA GPU and driver; import and replay work without one'

/** No GPU or driver here: exit 2 with NO_GPU_MESSAGE (and the reason when one is known). */
export class NoGpuError extends Error {
  constructor(readonly reason?: string) {
    super(`vramscope record: ${NO_GPU_MESSAGE}${reason ? ` (${reason})` : ''}`)
  }
}

export interface RecordOptions extends CommonOptions {
  output?: string
  pytorch?: boolean
  maxEntries?: string
  snapshotEvery?: string
  workload?: string
  strategy?: string
  param?: string[]
  cap?: string
  device?: string
  stack?: string
  skipDriverCheck?: boolean
}

function parseParams(values: readonly string[] = []): Record<string, string> {
  const out: Record<string, string> = {}
  for (const value of values) {
    const eq = value.indexOf('=')
    if (eq <= 0) throw new OptionError('--param', `'${value}' is not KEY=VALUE`)
    out[value.slice(0, eq)] = value.slice(eq + 1)
  }
  return out
}

function parseCount(option: string, text: string | undefined, max: number): number | undefined {
  if (text === undefined) return undefined
  if (!/^\d+$/.test(text) || Number(text) > max) throw new OptionError(option, `'${text}' is not a whole number from 0 to ${max}`)
  return Number(text)
}

export async function recordCommand(io: Io, command: string[], options: RecordOptions): Promise<void> {
  if (options.pytorch && options.workload !== undefined)
    throw new OptionError('--pytorch', `records a PyTorch program given after --, not a built-in workload (got --workload ${options.workload})`)
  if (options.workload !== undefined && command.length > 0)
    throw new OptionError('--workload', `records a built-in workload; give either it or a program after --, not both (got '${command.join(' ')}')`)
  if (options.workload === undefined && command.length === 0)
    throw new OptionError('record', 'nothing to record: give a program after -- (vramscope record -o run.vramscope -- python train.py) or --workload NAME')
  if (!options.pytorch)
    for (const [flag, value] of [
      ['--max-entries', options.maxEntries],
      ['--snapshot-every', options.snapshotEvery],
    ] as const)
      if (value !== undefined) throw new OptionError(flag, 'applies to --pytorch only')
  if (options.workload !== undefined) return recordWorkloadCommand(io, { ...options, output: requireOutput(options) })
  if (options.strategy !== undefined || options.param !== undefined || options.cap !== undefined)
    throw new OptionError(
      options.strategy !== undefined ? '--strategy' : options.param !== undefined ? '--param' : '--cap',
      'applies to --workload only; a program uses its own allocator',
    )
  const stackDepth = parseCount('--stack', options.stack, 32)
  if (options.pytorch) return recordPytorchCommand(io, command, options, stackDepth)
  const output = requireOutput(options)
  if (!options.skipDriverCheck && !nvidiaDriverPresent()) throw new NoGpuError('no /dev/nvidiactl, no /proc/driver/nvidia')
  const library = findInterceptLibrary()
  const recording = await recordProgram({ command, output, library, stackDepth, stdio: options.json ? 'stderr' : 'inherit' })
  const ended = recording.signal ? `was ended by ${recording.signal}` : `exited with code ${recording.exitCode}`
  if (options.json) {
    printJson(io, {
      output: recording.output,
      command: recording.command,
      exitCode: recording.exitCode,
      signal: recording.signal,
      recorded: recording.recorded,
      events: recording.events,
      summary: recording.summary,
    })
    return
  }
  const s = recording.summary
  io.stderr.write(
    `vramscope record: the program ${ended}; ${recording.output}: ${recording.events} events ` +
      `(${s.allocations} allocations, ${s.frees} frees, ${s.outOfMemory} out of memory, ${s.maps} maps) from ${s.threads} thread${s.threads === 1 ? '' : 's'}` +
      `${recording.recorded ? '' : '; no CUDA memory call was seen'}\n`,
  )
}

function requireOutput(options: RecordOptions): string {
  if (options.output === undefined)
    throw new OptionError('-o, --output', 'required: the .vramscope file to record into (only --pytorch has a default, a folder)')
  return options.output
}

async function recordPytorchCommand(io: Io, command: string[], options: RecordOptions, stackDepth: number | undefined): Promise<void> {
  const maxEntries = parseCount('--max-entries', options.maxEntries, Number.MAX_SAFE_INTEGER)
  if (maxEntries === 0) throw new OptionError('--max-entries', 'must be at least 1 (leave it out for every event)')
  const everySeconds = parseCount('--snapshot-every', options.snapshotEvery, 86_400)
  if (!options.skipDriverCheck && !nvidiaDriverPresent()) throw new NoGpuError('no /dev/nvidiactl, no /proc/driver/nvidia')
  const library = interceptLibraryIfBuilt() // none: recordPytorch warns, snapshots only
  const outDir = options.output ?? defaultPytorchOutDir(command)
  const stdio = options.json ? 'stderr' : 'inherit'
  const recording = await recordPytorch({ command, outDir, library, maxEntries, everySeconds, stackDepth, stdio })
  if (options.json) return printJson(io, pytorchRecordingJson(recording))
  io.stderr.write(pytorchRecordingText(recording))
}

export function pytorchRecordingJson(r: PytorchRecording) {
  return { output: r.outDir, job: r.job, command: r.command, exitCode: r.exit.exitCode, signal: r.exit.signal, processes: r.processes, warnings: r.warnings }
}

export function pytorchRecordingText(r: PytorchRecording): string {
  const ended = r.exit.signal ? `was ended by ${r.exit.signal}` : `exited with code ${r.exit.exitCode}`
  const lines = [`vramscope record --pytorch: the program ${ended}; ${r.outDir}:`]
  for (const p of r.processes) {
    const what = [
      p.snapshot ? `${p.snapshot} (written at ${p.reason ?? 'an unknown moment'})` : 'no snapshot',
      p.oomSnapshot && p.oomSnapshot !== p.snapshot ? `${p.oomSnapshot} (at its out-of-memory)` : p.outOfMemory ? 'ran out of memory' : '',
      p.peakReservedBytes !== null ? `peak reserved ${formatBytes(p.peakReservedBytes)}` : '',
      p.conf ? `PYTORCH_ALLOC_CONF=${p.conf}` : '',
      p.driver ? `${p.driver}${p.driverEvents !== null ? ` (${p.driverEvents} driver events)` : ''}` : '',
    ].filter(Boolean)
    lines.push(`  ${p.name}: ${what.join('; ')}`)
  }
  if (r.processes.length === 0) lines.push('  nothing: no process initialised CUDA through torch')
  for (const w of r.warnings) lines.push(`  warning: ${w}`)
  const first = r.processes.find((p) => p.snapshot)
  if (first) lines.push(`open one with: vramscope top ${JSON.stringify(`${r.outDir}/${first.snapshot}`)} (or the app); the list is in ${r.job}`)
  return `${lines.join('\n')}\n`
}

async function recordWorkloadCommand(io: Io, options: RecordOptions & { output: string }): Promise<void> {
  const spec: WorkloadSpec = { workload: options.workload!, workloadParams: parseParams(options.param) }
  if (options.strategy !== undefined) {
    const specs = parseStrategySpecs([options.strategy], '--strategy')
    if (specs.length !== 1) throw new OptionError('--strategy', `one strategy, got ${specs.length}`)
    spec.strategy = specs[0]!.strategy
    spec.strategyParams = specs[0]!.params
  }
  if (options.cap !== undefined) {
    try {
      spec.capacity = parseByteSize(options.cap)
    } catch (e) {
      throw new OptionError('--cap', (e as Error).message)
    }
  }
  spec.device = parseCount('--device', options.device, 1024)
  const run = await recordWorkloadInChild(spec, options.output)
  switch (run.kind) {
    case 'no-device':
      throw new NoGpuError(run.reason)
    case 'bad-input':
      throw new InputError(options.workload!, '', run.message)
    case 'crashed':
      // The trace streamed so far is kept: it opens (complete: false) up to the last flush.
      throw new RecorderCrashError(`vramscope record: ${run.message}; the partial recording is in ${options.output}`)
    case 'cancelled':
      // The CLI gives no signal, so only a recorder whose stdin closed early ends here.
      throw new RecorderCrashError(`vramscope record: the recording was cancelled; the partial recording is in ${run.output}`)
    case 'done': {
      const o = run.outcome
      if (options.json) return printJson(io, { output: options.output, workload: options.workload, ...o })
      io.stderr.write(
        `vramscope record: ${options.workload} on ${o.strategy} (${o.backing}) on ${o.device}: ${o.allocations} allocations, ${o.steps} steps, ` +
          `${o.verifiedBytes} bytes verified, ${o.corruptedBytes} corrupted${o.outOfMemory ? '; ended by out of memory' : ''}` +
          `${o.stoppedBy && !o.outOfMemory ? `; stopped: ${o.stoppedBy}` : ''} -> ${options.output} (${o.events} events)\n`,
      )
      if (o.corruptedBytes > 0 || (o.stoppedBy && !o.outOfMemory))
        throw new RecorderCrashError(`vramscope record: the workload did not run cleanly (see above); the recording is in ${options.output}`)
    }
  }
}

/** The recorder failed (a CUDA error, a crash): exit 1, the partial file kept. */
export class RecorderCrashError extends Error {}
