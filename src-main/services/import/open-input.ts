// Any file vramscope reads, opened as a request trace plus whatever results come with it: a trace
// file (.vramscope / .arrow), a PyTorch memory snapshot (pickle or JSON), a torch.profiler (Kineto)
// trace (JSON, maybe gzip-compressed), an Nsight Systems export (SQLite), an Umpire replay log
// (JSON lines) or an RMM log (CSV). The content decides what a file is where it can (Arrow's
// continuation marker, a pickle's PROTO opcode, SQLite's header, an Umpire event line, a JSON
// object, traceEvents in it); the name decides only where the content cannot (a protocol 0 pickle is
// text, an empty file is nothing). Every problem with the file is an InputError naming it.
import { open, readFile, stat } from 'node:fs/promises'
import { basename, extname } from 'node:path'
import { constants as zlibConstants, gunzipSync } from 'node:zlib'

import { findUnknownFree } from '../analysis/inspect.ts'
import { InputError, notARegularFile } from '../input-error.ts'
import { importPytorchSnapshot, RECORDED_LAYOUT_NAME, type OverflowCounts } from './pytorch/index.ts'
import { importRmmLog, type BadLine } from './rmm.ts'
import { importKinetoTrace } from './kineto.ts'
import { importNsysSqlite, SQLITE_HEADER } from './nsys.ts'
import { importUmpireLog, looksLikeUmpireLog } from './umpire.ts'
import { withLayoutMetrics } from '../analysis/layout-metrics.ts'
import { LayoutOp } from '../../../src-shared/layout.ts'
import { DEVICE_PROPERTIES } from '../replay/device.ts'
import { readTrace, type TraceFileInfo } from '../trace/file.ts'
import type { RequestTrace } from '../trace/model.ts'
import type { StrategyResult } from '../../../src-shared/results.ts'
import { settingsOfProperties, snapshotConf } from '../../../src-shared/pytorch-conf.ts'

export type InputKind = 'trace' | 'pytorch-snapshot' | 'rmm-log' | 'kineto-trace' | 'nsys-sqlite' | 'umpire-log'

export interface InputProgress {
  /** What is being done: "read", "decode", "scan", "parse"... */
  phase: string
  bytesDone: number
  bytesTotal: number
}

export interface OpenOptions {
  onProgress?: (progress: InputProgress) => void
  signal?: AbortSignal
  /** Which device of a PyTorch snapshot to import: an ordinal or 'all' (default: device 0, else the first it has). */
  device?: number | 'all'
}

export interface OpenedInput {
  path: string
  kind: InputKind
  trace: RequestTrace
  /** Results stored in a trace file, or the recorded layout of a snapshot; metrics derived where missing. */
  strategies: StrategyResult[]
  /** Trace files: version, completeness, chunks. */
  file?: TraceFileInfo
  pytorch?: { format: 'pickle' | 'json'; devices: number[]; overflow: OverflowCounts }
  rmm?: { lines: number; badLines: BadLine[]; unknownFrees: number; liveAtEnd: number }
  /** Nsight Systems exports: the device imported and the devices with device-memory events. */
  nsys?: { device: number; devices: number[]; rows: number; leftOut: number }
}

/** The file could not be recognised as anything vramscope reads. */
export class UnknownInputError extends InputError {}

const SNIFF_BYTES = 4096
const PICKLE_EXTENSIONS = new Set(['.pickle', '.pkl', '.pt'])
const TRACE_EXTENSIONS = new Set(['.vramscope', '.arrow'])
const LOG_EXTENSIONS = new Set(['.csv', '.log', '.txt'])

/** What a file is, from its first bytes and, failing those, its name. */
export async function detectInputKind(path: string): Promise<InputKind> {
  let head: Uint8Array
  try {
    const problem = notARegularFile(await stat(path))
    if (problem) throw new UnknownInputError(path, '', problem)
    const handle = await open(path, 'r')
    try {
      const buffer = new Uint8Array(SNIFF_BYTES)
      const { bytesRead } = await handle.read(buffer, 0, SNIFF_BYTES, 0)
      head = buffer.subarray(0, bytesRead)
    } finally {
      await handle.close()
    }
  } catch (e) {
    if (e instanceof InputError) throw e
    throw new InputError(path, '', `cannot be read: ${(e as Error).message}`)
  }
  return kindOf(head, path)
}

export function kindOf(head: Uint8Array, path: string): InputKind {
  const extension = extname(path).toLowerCase()
  const byName = (): InputKind | undefined =>
    PICKLE_EXTENSIONS.has(extension) || extension === '.json'
      ? 'pytorch-snapshot'
      : TRACE_EXTENSIONS.has(extension)
        ? 'trace'
        : LOG_EXTENSIONS.has(extension)
          ? 'rmm-log'
          : undefined
  if (head.length === 0) {
    const kind = byName()
    if (!kind) throw new UnknownInputError(path, 'byte 0', 'the file is empty')
    return kind // each reader reports an empty file in its own words
  }
  const startsWith = (...bytes: number[]) => bytes.every((b, i) => head[i] === b)
  // An Arrow IPC stream begins with the continuation marker; "ARROW1" is the Arrow file format,
  // which the trace reader refuses with an explanation.
  if (startsWith(0xff, 0xff, 0xff, 0xff) || startsWith(0x41, 0x52, 0x52, 0x4f, 0x57, 0x31)) return 'trace'
  if (head[0] === 0x80 && head.length > 1 && head[1]! >= 2 && head[1]! <= 5) return 'pytorch-snapshot' // PROTO n
  // Any SQLite database: the importer says so where it is not an Nsight Systems export with memory events.
  if (startsWith(...Array.from(SQLITE_HEADER, (c) => c.charCodeAt(0)))) return 'nsys-sqlite'
  // Umpire's event lines are JSON objects too: they go first.
  if (!head.includes(0) && looksLikeUmpireLog(new TextDecoder('utf-8').decode(head))) return 'umpire-log'
  if (isJsonObject(head)) return isChromeTrace(head) ? 'kineto-trace' : 'pytorch-snapshot'
  // gzip: only a profiler trace is read compressed (decompressed as it is read).
  if (startsWith(0x1f, 0x8b) && isJsonObject(gunzippedHead(head)) && isChromeTrace(gunzippedHead(head))) return 'kineto-trace'
  if (startsWith(0x1f, 0x8b)) throw new UnknownInputError(path, 'byte 0', 'the file is gzip-compressed; decompress it first (gunzip)')
  // Before the name decides: torch.save writes a zip archive, often named .pt or .pickle.
  if (startsWith(0x50, 0x4b, 0x03, 0x04))
    throw new UnknownInputError(
      path,
      'byte 0',
      'this is a zip archive, as torch.save writes (a model or tensors), not a memory snapshot; record one with ' +
        'torch.cuda.memory._record_memory_history() and save it with torch.cuda.memory._dump_snapshot("snapshot.pickle")',
    )
  const named = byName()
  const text = !head.includes(0)
  // A text file is an RMM log only if it reads like one: RMM's header, or a headerless row of its columns.
  if (named === 'rmm-log' || (named === undefined && text && looksLikeCsv(head))) {
    if (text && looksLikeRmm(head)) return 'rmm-log'
    const first = firstLine(head)
    throw new UnknownInputError(
      path,
      'line 1',
      `not a file vramscope reads: ${text ? `a text file whose first line is "${first.length > 60 ? `${first.slice(0, 60)}…` : first}", not an RMM log (which starts with the header Thread,Time,Action,Pointer,Size,Stream)` : 'binary data, not a text log'}; ${READS}`,
    )
  }
  if (named) return named
  const shown = Array.from(head.subarray(0, 8), (b) => b.toString(16).padStart(2, '0')).join(' ')
  throw new UnknownInputError(path, 'byte 0', `not a file vramscope reads (it starts with bytes ${shown}); ${READS}`)
}

/** What vramscope opens, for the errors about what it does not. */
const READS =
  'vramscope reads .vramscope/.arrow traces, PyTorch memory snapshots (torch.cuda.memory._dump_snapshot pickles, or their JSON), torch.profiler traces recorded with profile_memory=True (JSON, or .json.gz), Nsight Systems SQLite exports recorded with --cuda-memory-usage=true, Umpire replay logs (UMPIRE_REPLAY=On) and RMM logging_resource_adaptor CSV logs'

/** Whether the bytes begin (after a BOM and white space) with "{". */
function isJsonObject(head: Uint8Array): boolean {
  let i = head[0] === 0xef && head[1] === 0xbb && head[2] === 0xbf ? 3 : 0
  while (i < head.length && (head[i] === 0x20 || head[i] === 0x09 || head[i] === 0x0a || head[i] === 0x0d)) i++
  return head[i] === 0x7b /* { */
}

/**
 * A Chrome trace as torch.profiler (Kineto) writes it: a "traceEvents" key, or the fields Kineto
 * puts before it (a long deviceProperties list can push traceEvents past the first bytes). A
 * PyTorch snapshot's JSON has none of these keys (segments, device_traces...).
 */
function isChromeTrace(head: Uint8Array): boolean {
  const text = new TextDecoder('utf-8').decode(head)
  return /"traceEvents"\s*:/.test(text) || (/"schemaVersion"\s*:/.test(text) && /"(deviceProperties|displayTimeUnit|distributedInfo)"\s*:/.test(text))
}

/** The start of gzip data, decompressed as far as it goes (empty when it is not gzip that decompresses). */
function gunzippedHead(head: Uint8Array): Uint8Array {
  try {
    return gunzipSync(head, { finishFlush: zlibConstants.Z_SYNC_FLUSH })
  } catch {
    return new Uint8Array(0)
  }
}

function firstLine(head: Uint8Array): string {
  const text = new TextDecoder('utf-8').decode(head).replace(/^\uFEFF/, '')
  return (text.split(/\r?\n/).find((l) => l.trim() !== '') ?? '').trim()
}

/** RMM's header (Thread,Time,Action,Pointer,Size,Stream in some order, maybe more), or a row of at least its six columns with an allocate/free action. */
function looksLikeRmm(head: Uint8Array): boolean {
  const fields = firstLine(head)
    .split(',')
    .map((f) => f.trim().toLowerCase())
  if (fields.includes('action') && fields.includes('pointer')) return true
  return fields.length >= 6 && fields.some((f) => f === 'allocate' || f === 'free' || f.startsWith('allocate failure'))
}

function looksLikeCsv(head: Uint8Array): boolean {
  const text = new TextDecoder('utf-8').decode(head)
  const firstLine = text.split(/\r?\n/, 1)[0] ?? ''
  return firstLine.includes(',')
}

/**
 * Recorded allocator settings PyTorch would refuse (a snapshot another tool wrote, or edited) are
 * the file's problem: one warning each, naming the file, the key and the value, once (a trace
 * file saved from the snapshot keeps it); the replays leave them out (snapshotConf).
 */
/** Stats beside a snapshot larger than this are not stats: left unread. */
const STATS_MAX_BYTES = 4 << 20

/** `X.stats.json` beside snapshot `X.pickle` (or `X.json`, `X.pkl`...): what record --pytorch writes with each snapshot. */
export function statsPathOf(path: string): string {
  return `${path.slice(0, path.length - extname(path).length)}.stats.json`
}

/**
 * The GPU named by the stats beside a snapshot (record --pytorch's, and the what-if suite's:
 * `device_total_bytes`, `device_name` or `versions.gpu`), put on the trace (DEVICE_PROPERTIES) so the device rule
 * reads it; a missing, large or unreadable file names none, silently (a snapshot needs no stats).
 */
async function readDeviceBeside(path: string, trace: RequestTrace): Promise<void> {
  const statsPath = statsPathOf(path)
  let stats: { device_total_bytes?: unknown; device_name?: unknown; versions?: { gpu?: unknown } }
  try {
    if ((await stat(statsPath)).size > STATS_MAX_BYTES) return
    stats = JSON.parse(await readFile(statsPath, 'utf8')) as typeof stats
  } catch {
    return
  }
  const bytes = stats?.device_total_bytes
  if (typeof bytes !== 'number' || !Number.isSafeInteger(bytes) || bytes <= 0) return
  const p = trace.meta.properties
  p[DEVICE_PROPERTIES.bytes] = String(bytes)
  p[DEVICE_PROPERTIES.from] = basename(statsPath)
  // record --pytorch writes device_name; the what-if suite's runs, versions.gpu.
  const name = typeof stats.device_name === 'string' ? stats.device_name : stats.versions?.gpu
  if (typeof name === 'string' && name.length > 0 && name.length <= 256) p[DEVICE_PROPERTIES.name] = name
}

function warnOfRefusedSettings(trace: RequestTrace): void {
  const refused = snapshotConf(settingsOfProperties(trace.meta.properties))?.refused ?? []
  const file = trace.meta.origin ?? trace.meta.source
  for (const problem of refused) {
    const warning = `${file}: recorded allocator_settings ${problem}; PyTorch refuses it, so it is replayed without it`
    if (!trace.meta.warnings.includes(warning)) trace.meta.warnings.push(warning)
  }
}

export async function openInput(path: string, options: OpenOptions = {}): Promise<OpenedInput> {
  const kind = await detectInputKind(path)
  const { onProgress, signal, device } = options
  switch (kind) {
    case 'trace': {
      const contents = await readTrace(path, { ...(signal && { signal }), ...(onProgress && { onProgress }) })
      const unknown = findUnknownFree(contents.trace)
      if (unknown)
        throw new InputError(
          path,
          `event ${unknown.event}`,
          `frees block ${unknown.id}, which ${unknown.freedBefore ? 'was freed already' : 'was never allocated'}: in a trace file every free names a live allocation`,
        )
      warnOfRefusedSettings(contents.trace)
      return { path, kind, trace: contents.trace, strategies: contents.strategies.map(withLayoutMetrics), file: contents.file }
    }
    case 'pytorch-snapshot': {
      const imported = await importPytorchSnapshot(path, {
        ...(signal && { signal }),
        ...(device !== undefined && { device }),
        ...(onProgress && { onProgress: (p) => onProgress({ phase: p.phase, bytesDone: p.bytesDone, bytesTotal: p.bytesTotal }) }),
      })
      warnOfRefusedSettings(imported.trace)
      await readDeviceBeside(path, imported.trace)
      return {
        path,
        kind,
        trace: imported.trace,
        strategies: imported.recorded.map(withLayoutMetrics),
        pytorch: { format: imported.format, devices: imported.devices, overflow: imported.overflow },
      }
    }
    case 'rmm-log': {
      const imported = await importRmmLog(path, {
        ...(signal && { signal }),
        ...(onProgress && { onProgress: (p) => onProgress({ phase: 'parse', bytesDone: p.bytesDone, bytesTotal: p.bytesTotal }) }),
      })
      return {
        path,
        kind,
        trace: imported.trace,
        strategies: [],
        rmm: { lines: imported.lines, badLines: imported.badLines, unknownFrees: imported.unknownFrees, liveAtEnd: imported.liveAtEnd },
      }
    }
    case 'kineto-trace': {
      // The counts (host events left out, unknown frees, the peak of Total Reserved) are the trace's kineto.* properties.
      const imported = await importKinetoTrace(path, {
        ...(signal && { signal }),
        ...(onProgress && { onProgress: (p) => onProgress({ phase: 'parse', bytesDone: p.bytesDone, bytesTotal: p.bytesTotal }) }),
      })
      return { path, kind, trace: imported.trace, strategies: [] }
    }
    case 'nsys-sqlite': {
      // The counts (rows left out, unknown frees, the reserved peak) are the trace's nsys.* properties.
      const imported = await importNsysSqlite(path, {
        ...(signal && { signal }),
        ...(device !== undefined && { device }),
        ...(onProgress && { onProgress: (p) => onProgress({ phase: 'query', bytesDone: p.rowsDone, bytesTotal: p.rowsTotal }) }),
      })
      return {
        path,
        kind,
        trace: imported.trace,
        strategies: [withLayoutMetrics(imported.recorded)],
        nsys: { device: imported.device, devices: [...imported.devices.keys()], rows: imported.rows, leftOut: imported.leftOut },
      }
    }
    case 'umpire-log': {
      // The counts (allocations on other resources, unknown frees) are the trace's umpire.* properties.
      const imported = await importUmpireLog(path, {
        ...(signal && { signal }),
        ...(device !== undefined && { device }),
        ...(onProgress && { onProgress: (p) => onProgress({ phase: 'parse', bytesDone: p.bytesDone, bytesTotal: p.bytesTotal }) }),
      })
      return { path, kind, trace: imported.trace, strategies: [] }
    }
  }
}

/**
 * Where PyTorch's driver put each segment, in the order they were reserved, from the recorded
 * layout a snapshot import keeps. Replaying with this placement reproduces PyTorch's choices
 * exactly: it breaks best-fit ties by address, so which of two equal free blocks it reuses depends
 * on where the segments lie (native/tests/cpu/pytorch_fidelity_test.cpp). Empty when there is none.
 */
export function recordedRegionPlacement(strategies: readonly StrategyResult[]): bigint[] {
  return regionAddresses(strategies.find((s) => s.name === RECORDED_LAYOUT_NAME))
}

/** The addresses of a result's regions, in the order they were reserved; empty without a layout. */
export function regionAddresses(result: StrategyResult | undefined): bigint[] {
  const layout = result?.layout
  if (!layout) return []
  const placement: bigint[] = []
  for (let i = 0; i < layout.op.length; i++) if (layout.op[i] === LayoutOp.regionReserve) placement.push(layout.address[i]!)
  return placement
}
