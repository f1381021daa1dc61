// `vramscope whatif FILE [--conf "PYTORCH_ALLOC_CONF"]... [--cap SIZE] [--json]`: the what-if lab
// (src-main/services/whatif/whatif.ts) on one trace. Without --conf a grid of configurations runs;
// each row gives peak reserved and allocated, segments, device calls, fragmentation at the peak,
// failures under the limit and the smallest limit that runs the whole trace, ranked, with the line
// to paste. JSON byte counts are integers.
import { stat } from 'node:fs/promises'

import { confLine, shownValue } from '../../../src-shared/pytorch-conf.ts'
import { whatifWords } from '../../../src-shared/whatif-report.ts'
import { plural } from '../../../src-shared/compare.ts'
import { InputError } from '../../services/input-error.ts'
import { formatBytes } from '../../services/units.ts'
import { DEFAULT_DEVICE_BYTES } from '../../services/replay/device.ts'
import { expandInputs, rankFiles, runJobWhatif, type JobReport } from '../../services/whatif/job.ts'
import { runWhatif, WhatifError, type WhatifOptions, type WhatifResult } from '../../services/whatif/whatif.ts'
import { formatValue, renderTable } from '../format.ts'
import { jobJson, jobText } from '../job-report.ts'
import { OptionError, openWithProgress, parseCapOption, parseConfOptions, printJson, progressFor, type CommonOptions, type Io } from '../shared.ts'

export interface WhatifCommandOptions extends CommonOptions {
  conf?: string[]
  cap?: string
  gpu?: string
  search: boolean
  strategies: boolean
}

export async function whatifCommand(io: Io, args: string | string[], options: WhatifCommandOptions): Promise<void> {
  const given = typeof args === 'string' ? [args] : args
  // One file: its report. Several, a folder or a pattern: a job of one rank a file (job.ts).
  const single = given.length === 1 && (await stat(given[0]!).catch(() => undefined))?.isFile()
  const file = given[0]!
  // Every argument is checked here, before the file is read, naming the argument.
  const gpu = parseCapOption('--gpu', options.gpu)
  const confs = parseConfOptions(options.conf, gpu ?? DEFAULT_DEVICE_BYTES)
  // A fraction (0.25) is set_per_process_memory_fraction's argument: of --gpu, else of the device
  // the file implies (checked here against the one assumed without it).
  const fraction = options.cap !== undefined && /^\s*(0?\.\d+|1(\.0*)?)\s*$/.test(options.cap) ? Number(options.cap) : undefined
  if (fraction !== undefined && !(Math.floor(fraction * (gpu ?? DEFAULT_DEVICE_BYTES)) >= 1))
    throw new OptionError(
      '--cap',
      `${shownValue(options.cap!.trim())} of ${gpu !== undefined ? `--gpu's ${gpu} bytes` : `the assumed device's ${DEFAULT_DEVICE_BYTES} bytes`} is 0 bytes, which leaves no room for anything`,
    )
  const cap = fraction !== undefined ? undefined : parseCapOption('--cap', options.cap)
  const lab: LabArguments = { confs, cap, fraction, gpu }
  if (!single) return whatifJobCommand(io, await expandInputs(given), options, lab)
  const input = await openWithProgress(io, options, file)
  const progress = progressFor(io, options)
  const interrupt = interruption(io)
  let result: WhatifResult
  try {
    result = await runWhatif(input, {
      ...labOptions(lab, options, interrupt.signal),
      onProgress: (p) => progress.update(`what-if ${p.label}`, p.done, p.total, 'replays'),
    })
  } catch (e) {
    // What is left to refuse once the file is open: 'recorded' on a file without settings, a fraction of the device it implies.
    labError(e, file, '')
  } finally {
    progress.clear()
    interrupt.release()
  }

  if (options.json) {
    // Its rank, as `whatif R0 R1 ...` would give it, so that `ranks` merges one such output a rank.
    const { rank, rankFrom } = (await rankFiles([file]))[0]!
    printJson(io, {
      file,
      rank,
      rankFrom,
      events: result.events,
      recordedConf: result.recordedConf ?? null,
      limit: result.limit,
      implied: result.implied ?? null,
      deviceBytes: result.deviceBytes,
      device: result.device,
      endsAtOom: result.endsAtOom,
      floor: result.floor,
      configs: result.rows.map((r) => ({
        rank: r.rank,
        conf: r.conf,
        kind: r.kind,
        label: r.label,
        line: r.line ?? null,
        strategy: r.strategy,
        params: r.params,
        peakReserved: r.peakReserved,
        peakAllocated: r.peakAllocated,
        peakRequested: r.peakRequested,
        segments: r.segments,
        maps: r.maps,
        deviceCalls: r.deviceCalls,
        fragmentationAtPeak: r.fragmentationAtPeak,
        failures: r.failures,
        firstFailureEvent: r.firstFailureEvent,
        oomReproduced: r.oomReproduced,
        smallestFittingBytes: r.smallestFittingBytes,
        growing: r.growing,
        notRanked: r.notRanked ?? null,
        notInPytorch: r.notInPytorch ?? null,
        replays: r.replays,
      })),
      leftOut: result.leftOut,
      fidelity: result.fidelity ?? null,
      recordedState: result.recordedState ?? null,
      replays: result.replays,
      eventsReplayed: result.eventsReplayed,
      elapsedMs: Math.round(result.elapsedMs),
      cores: result.cores,
      eventsPerSecondPerCore: Math.round(result.eventsPerSecondPerCore),
      warnings: input.trace.meta.warnings,
    })
    return
  }

  const words = whatifWords(result, formatBytes)
  const lines: string[] = []
  if (words.floor) lines.push(words.floor)
  lines.push(`${file}: ${formatValue(result.events, 'count')} events`)
  if (result.recordedConf !== undefined) lines.push(`recorded with ${confLine(result.recordedConf)}`)
  if (result.implied) {
    const i = result.implied
    lines.push(
      `out-of-memory recorded at event ${i.event}: ${formatBytes(i.size)} on stream ${i.stream}; ` +
        (i.source === 'device'
          ? `the device was full (${formatBytes(i.deviceFree ?? 0)} free)`
          : `the limit was at least ${formatBytes(i.lowBytes)} and below ${formatBytes(i.highBytes)}`),
    )
  }
  lines.push(words.device)
  lines.push(
    result.limit.bytes === null
      ? `limit: none (the whole device, ${formatBytes(result.deviceBytes)})`
      : `limit: ${formatBytes(result.limit.bytes)} ${result.limit.source === 'implied' ? '(implied by the recorded out-of-memory; --cap sets another)' : '(--cap)'}`,
  )
  lines.push('')
  const header = ['#', 'configuration', 'peak reserved', 'peak allocated', 'segments', 'device calls', 'frag. at peak', 'failures', 'smallest fitting']
  const table = result.rows.map((r) => [
    r.rank > 0 ? String(r.rank) : '-',
    `${r.label}${r.notInPytorch !== undefined ? ' (not in PyTorch)' : ''}${r.growing ? ' (reserved keeps growing)' : ''}`,
    formatBytes(r.peakReserved),
    formatBytes(r.peakAllocated),
    r.segments === 0 && r.maps > 0 ? `${formatValue(r.maps, 'count')} pages` : formatValue(r.segments, 'count'),
    formatValue(r.deviceCalls, 'count'),
    formatValue(r.fragmentationAtPeak, 'ratio'),
    r.failures === 0 ? '0' : `${formatValue(r.failures, 'count')}${r.oomReproduced > 0 ? ' (the recorded OOM)' : ''}`,
    r.smallestFittingBytes === null && !options.search ? '-' : words.smallest(r),
  ])
  lines.push(renderTable(header, table))
  lines.push('')
  for (const r of result.rows) if (r.notRanked) lines.push(`not ranked: ${r.label}: ${r.notRanked}`)
  for (const r of result.rows) if (r.notInPytorch) lines.push(`not in PyTorch: ${r.label}: ${r.notInPytorch}`)
  for (const r of result.leftOut) lines.push(`left out: ${r.label}: ${r.reason}`)
  lines.push(words.best)
  for (const note of words.notes) lines.push(note)
  const state = result.recordedState
  if (state)
    lines.push(
      `recorded state: the recording began with ${plural(state.segments, state.expandable ? 'mapped range' : 'segment')} of ${state.expandable ? 'expandable segments' : 'memory'} in use (${plural(state.blocks, 'live block')}); ` +
        `${state.rows.length === 0 ? 'no row' : plural(state.rows.length, 'row')} (PyTorch's policy ${state.expandable ? 'with' : 'without'} expandable segments) replayed from it, free space included; the others started empty, with the blocks allocated at t = 0`,
    )
  const f = result.fidelity
  if (f)
    lines.push(
      `fidelity of the recorded settings: peak reserved ${formatBytes(f.replayedPeakReserved)} replayed vs ${formatBytes(f.recordedPeakReserved)} recorded ` +
        `(${f.peakReservedError >= 0 ? '+' : ''}${(f.peakReservedError * 100).toFixed(2)} %), segments ${f.replayedSegments} vs ${f.recordedSegments}, ` +
        (f.firstSegmentDifference < 0
          ? 'the same segment events'
          : `segment events differ from the ${ordinal(f.firstSegmentDifference + 1)} of ${f.segmentEvents}`),
    )
  lines.push(
    `${formatValue(result.replays, 'count')} replays of ${formatValue(result.events, 'count')} events in ${(result.elapsedMs / 1000).toFixed(1)} s on ${result.cores} cores ` +
      `(${formatValue(result.eventsPerSecondPerCore, 'rate')} events/s per core)`,
  )
  for (const w of input.trace.meta.warnings) lines.push(`warning: ${w}`)
  io.stdout.write(`${lines.join('\n')}\n`)
}

function ordinal(n: number): string {
  const s = n % 100 >= 11 && n % 100 <= 13 ? 'th' : (['th', 'st', 'nd', 'rd'][n % 10] ?? 'th')
  return `${n}${s}`
}

/** Ctrl-C, or the caller's own signal (io.signal: an MCP request's), aborts the lab; `release` stops listening. */
function interruption(io: Io): { signal: AbortSignal; release(): void } {
  const abort = new AbortController()
  const onSignal = (): void => abort.abort(new Error('interrupted'))
  process.once('SIGINT', onSignal)
  io.signal?.addEventListener('abort', onSignal, { once: true })
  if (io.signal?.aborted) onSignal()
  return {
    signal: abort.signal,
    release: () => {
      process.off('SIGINT', onSignal)
      io.signal?.removeEventListener('abort', onSignal)
    },
  }
}

/** The lab's options from the command's arguments, the same for one file and for every rank. */
function labOptions(lab: LabArguments, options: WhatifCommandOptions, signal: AbortSignal): WhatifOptions {
  return {
    ...(lab.confs.length > 0 && { confs: lab.confs }),
    ...(lab.cap !== undefined && { capBytes: lab.cap }),
    ...(lab.fraction !== undefined && { capFraction: lab.fraction }),
    ...(lab.gpu !== undefined && { deviceBytes: lab.gpu }),
    search: options.search,
    strategies: options.strategies,
    signal,
  }
}

/** A lab's refusal as the CLI says it: an option error (`prefix` names the rank's file in a job), a bad file, else as it is. */
function labError(e: unknown, file: string, prefix: string): never {
  if (e instanceof WhatifError) throw new OptionError(e.argument, `${prefix}${e.message.replace(/^--[a-z]+:? /, '')}`)
  if ((e as { code?: unknown }).code === 'INVALID_ARGUMENT') throw new InputError(file, '', (e as Error).message)
  throw e
}

interface LabArguments {
  confs: string[]
  cap: number | undefined
  fraction: number | undefined
  gpu: number | undefined
}

/**
 * `whatif R0 R1 ...` (or a folder, or a pattern): every rank under every configuration, one rank
 * open at a time; per configuration whether it fits every rank, the smallest device that fits them
 * all and the worst rank, ranked on that (services/whatif/job.ts).
 */
async function whatifJobCommand(io: Io, files: string[], options: WhatifCommandOptions, lab: LabArguments): Promise<void> {
  const ranked = await rankFiles(files)
  const progress = progressFor(io, options)
  const interrupt = interruption(io)
  let report: JobReport
  try {
    report = await runJobWhatif(
      ranked,
      (file) => openWithProgress(io, options, file),
      labOptions(lab, options, interrupt.signal),
      (r, i, p) => progress.update(`rank ${r.rank} (${i + 1} of ${ranked.length}): what-if ${p.label}`, p.done, p.total, 'replays'),
    )
  } catch (e) {
    const file = (e as { failedFile?: string }).failedFile ?? files[0]!
    labError(e, file, `${file}: `)
  } finally {
    progress.clear()
    interrupt.release()
  }
  if (options.json) return printJson(io, jobJson(report))
  io.stdout.write(jobText(report, options))
}
