// `vramscope record`: a recording of real GPU memory use, streamed into a trace file that opens
// whatever happens to the program or the recorder.
//   vramscope record -o run.vramscope -- python train.py      any CUDA program, through the interposer
//   vramscope record --workload training [--strategy S] [-p KEY=VALUE]... -o run.vramscope
// Without an NVIDIA GPU and driver it says so and exits 2.
import { InputError } from '../../services/input-error.ts'
import { findInterceptLibrary, nvidiaDriverPresent, recordProgram } from '../../services/record/program.ts'
import { recordWorkloadInChild, type WorkloadSpec } from '../../services/record/workload.ts'
import { parseStrategySpecs } from '../../services/replay/strategy-spec.ts'
import { parseByteSize } from '../../services/units.ts'
import { OptionError, printJson, type CommonOptions, type Io } from '../shared.ts'

export const NO_GPU_MESSAGE = 'recording needs an NVIDIA GPU and driver; import and replay work without one'

/** No GPU or driver here: exit 2 with NO_GPU_MESSAGE (and the reason when one is known). */
export class NoGpuError extends Error {
  constructor(readonly reason?: string) {
    super(`vramscope record: ${NO_GPU_MESSAGE}${reason ? ` (${reason})` : ''}`)
  }
}

export interface RecordOptions extends CommonOptions {
  output: string
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
  if (options.workload !== undefined && command.length > 0)
    throw new OptionError('--workload', `records a built-in workload; give either it or a program after --, not both (got '${command.join(' ')}')`)
  if (options.workload === undefined && command.length === 0)
    throw new OptionError('record', 'nothing to record: give a program after -- (vramscope record -o run.vramscope -- python train.py) or --workload NAME')
  if (options.workload !== undefined) return recordWorkloadCommand(io, options)
  if (options.strategy !== undefined || options.param !== undefined || options.cap !== undefined)
    throw new OptionError(
      options.strategy !== undefined ? '--strategy' : options.param !== undefined ? '--param' : '--cap',
      'applies to --workload only; a program uses its own allocator',
    )
  const stackDepth = parseCount('--stack', options.stack, 32)
  if (!options.skipDriverCheck && !nvidiaDriverPresent()) throw new NoGpuError('no /dev/nvidiactl, no /proc/driver/nvidia')
  const library = findInterceptLibrary()
  const recording = await recordProgram({ command, output: options.output, library, stackDepth })
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

async function recordWorkloadCommand(io: Io, options: RecordOptions): Promise<void> {
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
