// What the CLI's commands share: the output streams, progress on a terminal, option parsing that
// fails as bad input (exit code 2), and opening and replaying a file with progress shown.
import { InputError } from '../services/input-error.ts'
import { openInput, type OpenedInput } from '../services/import/open-input.ts'
import { buildModel, recordedConf, replayInput, type ReplayedInput } from '../services/replay/replay-input.ts'
import { DEFAULT_DEVICE_BYTES } from '../services/replay/device.ts'
import { ConfError, confModel, formatPytorchConf, parsePytorchConf, shownValue, type PytorchConf } from '../../src-shared/pytorch-conf.ts'
import { parseStrategySpecs, type StrategySpec } from '../services/replay/strategy-spec.ts'
import type { StrategyResult } from '../../src-shared/results.ts'
import { parseByteSize } from '../services/units.ts'
import { ProgressBar, type ProgressListener } from './progress.ts'

/** A bad option value: bad input, like a bad file (exit code 2); the message starts with the option. */
export class OptionError extends InputError {
  constructor(option: string, problem: string) {
    super(option, '', problem)
  }
}

export interface CommonOptions {
  json?: boolean
  /** --device: which device of a PyTorch snapshot to import ('all', or an ordinal; default the first). */
  device?: string
}

/** --device's text as the importer takes it. */
export function parseDevice(text: string | undefined): number | 'all' | undefined {
  if (text === undefined) return undefined
  if (text === 'all') return 'all'
  if (!/^\d+$/.test(text) || Number(text) > 65535) throw new OptionError('--device', `'${text}' is neither 'all' nor a device ordinal from 0 to 65535`)
  return Number(text)
}

/** Options of every command that can replay. */
export interface ReplayingOptions extends CommonOptions {
  strategies?: string[]
  /** PYTORCH_ALLOC_CONF strings, each a PyTorch-model target ('recorded': the snapshot's own). */
  conf?: string[]
  cap?: string
  /** The device's memory (replay's --gpu); default: what the file implies, else an assumed H100 80GB. */
  gpu?: string
  recordedPlacement: boolean
  /** false: PyTorch-policy strategies of a late recording start empty, not from its recorded state (replay's --no-recorded-state). */
  recordedState?: boolean
  resetAtMarkers: boolean
}

export interface Io {
  stdout: NodeJS.WriteStream
  stderr: NodeJS.WriteStream
  /** Every progress update of a long step, bar or not (the MCP server's progress notifications). */
  onProgress?: ProgressListener
  /** Ends a long step early as Ctrl-C does (a read, a replay, the lab): the MCP server's cancellation. */
  signal?: AbortSignal
}

export function progressFor(io: Io, options: CommonOptions): ProgressBar {
  return new ProgressBar(io.stderr, Boolean(io.stderr.isTTY) && !options.json, io.onProgress)
}

/** Writes a value as JSON on stdout: bigints as decimal strings, typed arrays as arrays. */
export function printJson(io: Io, value: unknown): void {
  io.stdout.write(
    `${JSON.stringify(
      value,
      (_key, v: unknown) => {
        if (typeof v === 'bigint') return v.toString()
        if (ArrayBuffer.isView(v) && !(v instanceof DataView))
          return Array.from(v as unknown as ArrayLike<number | bigint>, (x) => (typeof x === 'bigint' ? x.toString() : x))
        if (typeof v === 'number' && !Number.isFinite(v)) return null
        return v
      },
      2,
    )}\n`,
  )
}

/** A size option (--cap 24GiB): bytes, or bad input naming the option (its value echoed by a bounded prefix). */
export function parseCapOption(option: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined
  let bytes: number
  try {
    bytes = parseByteSize(text)
  } catch (e) {
    throw new OptionError(option, (e as Error).message)
  }
  if (bytes === 0) throw new OptionError(option, `a ${option === '--cap' ? 'cap' : 'size'} of 0 bytes leaves no room for anything`)
  return bytes
}

/**
 * --conf values, checked once here, before any file is read: each in PyTorch's syntax, with the
 * model's limit from a per_process_memory_fraction of `deviceBytes` above 0 B, and each
 * configuration once. 'recorded' is the file's own settings, resolved once it is open.
 */
export function parseConfOptions(values: readonly string[] | undefined, deviceBytes = DEFAULT_DEVICE_BYTES): string[] {
  const confs = values ?? []
  const seen = new Map<string, string>()
  for (const c of confs) {
    let printed = c
    if (c !== 'recorded') {
      let conf: PytorchConf
      try {
        conf = parsePytorchConf(c)
        confModel(conf, 0, deviceBytes)
      } catch (e) {
        if (e instanceof ConfError) throw new OptionError('--conf', `'${shownValue(c)}': ${e.message}`)
        throw e
      }
      printed = formatPytorchConf(conf)
    }
    const before = seen.get(printed)
    if (before !== undefined)
      throw new OptionError('--conf', `'${shownValue(c)}' is the same configuration as '${shownValue(before)}' given before it: give each configuration once`)
    seen.set(printed, c)
  }
  return [...confs]
}

function parseCap(text: string | undefined): number | undefined {
  return parseCapOption('--cap', text)
}

function parseStrategiesOption(values: string[] | undefined): StrategySpec[] | undefined {
  if (values === undefined || values.length === 0) return undefined
  return parseStrategySpecs(values, '--strategies')
}

export interface ReplayRequest {
  /** Strategies to replay (none given: use the results the file holds). */
  specs: StrategySpec[] | undefined
  /** --conf values, checked ('recorded' resolved once the file is open). */
  confs: string[]
  cap: number | undefined
  /** --gpu: the device's memory in bytes. */
  gpu: number | undefined
}

/** --strategies, --conf, --cap and --gpu, checked before any file is read so that a bad option fails first. */
export function parseReplayOptions(options: ReplayingOptions): ReplayRequest {
  // --gpu is parsed as whatif parses it.
  const gpu = parseCapOption('--gpu', options.gpu)
  return { specs: parseStrategiesOption(options.strategies), confs: parseConfOptions(options.conf, gpu), cap: parseCap(options.cap), gpu }
}

/** A --conf value as a target of the PyTorch model, labelled with the configuration as written. */
function confSpec(input: OpenedInput, text: string): StrategySpec {
  let conf = text
  if (text === 'recorded') {
    const recorded = recordedConf(input.trace)
    if (recorded === undefined) throw new OptionError('--conf', `recorded: ${input.path} carries no allocator settings (only PyTorch snapshots do)`)
    conf = recorded
  }
  const parsed = parsePytorchConf(conf)
  const model = buildModel(parsed, 0, DEFAULT_DEVICE_BYTES)
  if (model.notModelled.length > 0)
    throw new OptionError('--conf', `'${shownValue(text)}': this build's model of PyTorch lacks ${model.notModelled.join(', ')}`)
  const printed = formatPytorchConf(parsed)
  // As written: a configuration that only restates a default is still that configuration.
  return {
    label: `pytorch (${text === 'recorded' ? 'recorded: ' : ''}${printed || 'defaults'})`,
    strategy: model.strategy,
    params: model.params,
    conf: printed,
  }
}

/** Commander collects a repeated option into a list. */
export function collect(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), value]
}

export async function openWithProgress(io: Io, options: CommonOptions, path: string): Promise<OpenedInput> {
  const progress = progressFor(io, options)
  try {
    const device = parseDevice(options.device)
    return await openInput(path, {
      onProgress: (p) => progress.update(`${p.phase} ${path}`, p.bytesDone, p.bytesTotal),
      ...(device !== undefined && { device }),
      // The caller's signal (an MCP request's) stops the read, as it stops a replay below.
      ...(io.signal && { signal: io.signal }),
    })
  } finally {
    progress.clear()
  }
}

async function replayWithProgress(
  io: Io,
  options: ReplayingOptions,
  input: OpenedInput,
  specs: StrategySpec[],
  cap: number | undefined,
  keepLayout = false,
  gpu?: number,
): Promise<ReplayedInput> {
  const progress = progressFor(io, options)
  try {
    return await replayInput(input, specs, {
      ...(cap !== undefined && { cap }),
      ...(gpu !== undefined && { deviceBytes: gpu }),
      layout: keepLayout,
      recordedPlacement: options.recordedPlacement,
      ...(options.recordedState === false && { recordedState: false }),
      resetAtMarkers: options.resetAtMarkers,
      ...(io.signal && { signal: io.signal }),
      // Several strategies replay side by side: one bar over all their events.
      onProgress: (p) =>
        p.targets === 1
          ? progress.update(`replay ${p.label}`, p.eventsDone, p.eventsTotal, 'events')
          : progress.update(
              `replay ${p.targets} strategies side by side`,
              Math.round(p.fraction * p.eventsTotal * p.targets),
              p.eventsTotal * p.targets,
              'events',
            ),
    })
  } catch (e) {
    // Arguments were checked before the replay started, so what the replay refuses is the trace.
    if ((e as { code?: unknown }).code === 'INVALID_ARGUMENT') throw new InputError(input.path, '', (e as Error).message)
    throw e
  } finally {
    progress.clear()
  }
}

export interface InputResults {
  input: OpenedInput
  /** The replay's results; undefined when no strategies were given. */
  replayed: ReplayedInput | undefined
  /** Results the file holds that no strategy replayed now replaces (by name): a recorded layout, earlier replays. */
  kept: StrategyResult[]
  /** kept, then the replayed results. */
  strategies: StrategyResult[]
}

/** Opens a file and replays it through `request.specs` if any, with progress shown. */
export async function openAndReplay(io: Io, options: ReplayingOptions, file: string, request: ReplayRequest, keepLayout = false): Promise<InputResults> {
  const input = await openWithProgress(io, options, file)
  const specs = [...(request.specs ?? []), ...request.confs.map((c) => confSpec(input, c))]
  if (specs.length === 0) return { input, replayed: undefined, kept: input.strategies, strategies: input.strategies }
  const replayed = await replayWithProgress(io, options, input, specs, request.cap, keepLayout, request.gpu)
  const kept = input.strategies.filter((s) => !replayed.results.some((r) => r.name === s.name))
  return { input, replayed, kept, strategies: [...kept, ...replayed.results] }
}
