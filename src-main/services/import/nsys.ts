// Imports an Nsight Systems report exported to SQLite (`nsys profile --cuda-memory-usage=true`, then
// `nsys export --type sqlite`) into a request trace (source "nsys-sqlite") and the device-level
// layout the program had, "cuda (recorded)", as a recording under the interposer has it
// (intercept-converter.ts): each allocation a region of its own at its real address.
// The database is read with Node's own SQLite (node:sqlite), never by hand. The rows read are those
// of CUDA_GPU_MEMORY_USAGE_EVENTS (start ns, deviceId, address, bytes, memKind, memoryOperationType,
// streamId, and the local memory-pool columns of cudaMallocAsync), named by the enum tables
// ENUM_CUDA_MEM_KIND and ENUM_CUDA_DEV_MEM_EVENT_OPER (id, name, label); they are queried in time
// order and walked one row at a time (an iterator, not every row at once).
// Device memory of one device is imported: the device asked for, else the one with the most
// events; pageable, pinned, managed, array and static memory are counted and left out. These are
// the CUDA-level calls (a caching allocator's segments, not its tensors), so the request trace is
// those calls, as nothing finer is in the file, and the layout's reserved peak is the recorded one.
import { stat } from 'node:fs/promises'

import { LayoutOp, allocateLayout } from '../../../src-shared/layout.ts'
import type { StrategyResult } from '../../../src-shared/results.ts'
import { InputError, notARegularFile } from '../input-error.ts'
import { EventsBuilder, LayoutChunks } from '../trace/events-builder.ts'
import { EventKind, type RequestTrace } from '../trace/model.ts'
import { RECORDED_CUDA_NAME } from './intercept-converter.ts'

export const NSYS_SOURCE = 'nsys-sqlite'
export const MEMORY_TABLE = 'CUDA_GPU_MEMORY_USAGE_EVENTS'
const KIND_TABLE = 'ENUM_CUDA_MEM_KIND'
const OPERATION_TABLE = 'ENUM_CUDA_DEV_MEM_EVENT_OPER'
/** The first 16 bytes of every SQLite database. */
export const SQLITE_HEADER = 'SQLite format 3\0'
/** Columns the import cannot do without. */
const REQUIRED = ['start', 'deviceId', 'address', 'bytes', 'memKind', 'memoryOperationType'] as const
const POOL_COLUMNS = ['localMemoryPoolAddress', 'localMemoryPoolReleaseThreshold', 'localMemoryPoolSize', 'localMemoryPoolUtilizedSize'] as const

export type NsysErrorCode = 'unreadable' | 'not-a-database' | 'no-memory-table' | 'bad-schema' | 'bad-row' | 'corrupt' | 'no-sqlite'

export class NsysSqliteError extends InputError {
  constructor(
    file: string,
    readonly code: NsysErrorCode,
    /** The row of CUDA_GPU_MEMORY_USAGE_EVENTS (its rowid) the problem is in; undefined: the whole file. */
    readonly row: number | undefined,
    problem: string,
  ) {
    super(file, row === undefined ? '' : `${MEMORY_TABLE} row ${row}`, problem)
  }
}

export interface NsysImportOptions {
  /** What meta.origin says (default: the path as given). */
  origin?: string
  /** The device to import (default: the one with the most device-memory events). */
  device?: number | 'all'
  onProgress?: (progress: { rowsDone: number; rowsTotal: number }) => void
  signal?: AbortSignal
}

export interface NsysImport {
  trace: RequestTrace
  /** "cuda (recorded)": the device-level layout. */
  recorded: StrategyResult
  device: number
  /** Devices with device-memory events, each with its count. */
  devices: Map<number, number>
  rows: number
  /** Rows of other memory kinds (pinned, managed...) or other devices, left out. */
  leftOut: number
  unknownFrees: number
  liveAtEnd: number
  /** The largest sum of live allocations: the reserved peak the CUDA level saw. */
  peakReserved: number
}

export type Sqlite = typeof import('node:sqlite')
let sqlite: Promise<Sqlite> | undefined

/**
 * node:sqlite, loaded once. Node 22 marks it experimental and says so on stderr as it loads; that
 * one warning is held back (the CLI's output stays what it prints), every other warning passes.
 */
export function loadSqlite(): Promise<Sqlite> {
  sqlite ??= (async () => {
    const emit = process.emitWarning
    process.emitWarning = function (this: unknown, warning: string | Error, ...rest: unknown[]) {
      const text = typeof warning === 'string' ? warning : warning.message
      const type = typeof rest[0] === 'string' ? rest[0] : (rest[0] as { type?: string } | undefined)?.type
      if ((type === 'ExperimentalWarning' || (warning as Error).name === 'ExperimentalWarning') && /SQLite/.test(text)) return
      return (emit as (...a: unknown[]) => void).call(process, warning, ...rest)
    } as typeof process.emitWarning
    try {
      return await import('node:sqlite')
    } finally {
      process.emitWarning = emit
    }
  })()
  return sqlite
}

interface EnumEntry {
  id: number
  text: string
}

export async function importNsysSqlite(path: string, options: NsysImportOptions = {}): Promise<NsysImport> {
  try {
    const problem = notARegularFile(await stat(path))
    if (problem) throw new NsysSqliteError(path, 'unreadable', undefined, problem)
  } catch (e) {
    if (e instanceof NsysSqliteError) throw e
    throw new NsysSqliteError(path, 'unreadable', undefined, `cannot be read: ${(e as Error).message}`)
  }
  let lib: Sqlite
  try {
    lib = await loadSqlite()
  } catch (e) {
    throw new NsysSqliteError(
      path,
      'no-sqlite',
      undefined,
      `this Node (${process.version}) has no node:sqlite to read an Nsight Systems export with (${(e as Error).message})`,
    )
  }
  return readNsysDatabase(lib, path, path, options)
}

/**
 * Reads the export at `path` (synchronously: node:sqlite's database is), naming it `file` in its
 * errors: the import's core, and what the fuzzer calls.
 */
export function readNsysDatabase(lib: Sqlite, path: string, file: string, options: NsysImportOptions = {}): NsysImport {
  let db: Database
  try {
    db = new lib.DatabaseSync(path, { readOnly: true })
  } catch (e) {
    throw new NsysSqliteError(file, 'not-a-database', undefined, `cannot be opened as a SQLite database (${(e as Error).message})`)
  }
  try {
    return readExport(db, file, { ...options, origin: options.origin ?? file })
  } catch (e) {
    if (e instanceof NsysSqliteError || options.signal?.aborted) throw e
    const message = (e as Error).message
    throw new NsysSqliteError(
      file,
      /malformed|not a database|corrupt|disk image/i.test(message) ? 'corrupt' : 'unreadable',
      undefined,
      `SQLite cannot read it: ${message}`,
    )
  } finally {
    db.close()
  }
}

type Database = InstanceType<Sqlite['DatabaseSync']>

const GPU_TABLES = ['TARGET_INFO_GPU', 'TARGET_INFO_CUDA_DEVICE'] as const

/** Why `table` is not a plain table of stored values (a virtual table, generated columns); undefined when it is one. */
function notPlain(db: Database, table: string): string | undefined {
  const sql = (db.prepare("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?").get(table) as { sql?: unknown } | undefined)?.sql
  if (typeof sql === 'string' && /^\s*CREATE\s+VIRTUAL\b/i.test(sql)) return 'a virtual table'
  const hidden = (db.prepare(`PRAGMA table_xinfo(${table})`).all() as { name: string; hidden: number | bigint }[]).filter((c) => Number(c.hidden) !== 0)
  return hidden.length > 0
    ? `a table with generated or hidden columns (${hidden
        .slice(0, 8)
        .map((c) => c.name)
        .join(', ')})`
    : undefined
}

function readExport(db: Database, path: string, options: NsysImportOptions): NsysImport {
  const fail = (code: NsysErrorCode, problem: string, row?: number): never => {
    throw new NsysSqliteError(path, code, row, problem)
  }
  const tables = new Set((db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all() as { name: string }[]).map((r) => r.name))
  if (!tables.has(MEMORY_TABLE))
    fail(
      'no-memory-table',
      `a SQLite database without the table ${MEMORY_TABLE}${tables.has('StringIds') || [...tables].some((t) => t.startsWith('CUPTI_')) ? ' (an Nsight Systems export recorded without CUDA memory usage)' : ', so not an Nsight Systems export with CUDA memory usage'}: record with nsys profile --cuda-memory-usage=true, then nsys export --type sqlite`,
    )
  // Nsight Systems writes plain tables of stored values. A virtual table or a generated column runs
  // code of the file's as it is read (an expression per row), so neither is read: the memory table
  // is refused, the others are as good as missing.
  const problem = notPlain(db, MEMORY_TABLE)
  if (problem) fail('bad-schema', `${MEMORY_TABLE} is ${problem}, which Nsight Systems never writes`)
  for (const t of [KIND_TABLE, OPERATION_TABLE, ...GPU_TABLES]) if (tables.has(t) && notPlain(db, t)) tables.delete(t)
  const info = db.prepare(`PRAGMA table_xinfo(${MEMORY_TABLE})`).all() as { name: string }[]
  const columns = new Set(info.map((r) => r.name))
  const missing = REQUIRED.filter((c) => !columns.has(c))
  if (missing.length > 0) fail('bad-schema', `the table ${MEMORY_TABLE} has no column${missing.length > 1 ? 's' : ''} ${missing.join(', ')}`)

  // The enums, by their symbol name or label; the values Nsight Systems has used where a table is missing.
  const readEnum = (table: string): EnumEntry[] | undefined => {
    if (!tables.has(table)) return undefined
    const cols = new Set((db.prepare(`PRAGMA table_info(${table})`).all() as { name: string }[]).map((r) => r.name))
    if (!cols.has('id')) return undefined
    const text = ['name', 'label'].filter((c) => cols.has(c))
    if (text.length === 0) return undefined
    return (db.prepare(`SELECT id, ${text.join(', ')} FROM ${table} LIMIT 1000`).all() as Record<string, unknown>[])
      .filter((r) => typeof r['id'] === 'number' || typeof r['id'] === 'bigint')
      .map((r) => ({ id: Number(r['id']), text: text.map((c) => String(r[c] ?? '')).join(' ') }))
  }
  const kinds = readEnum(KIND_TABLE)
  const operations = readEnum(OPERATION_TABLE)
  const deviceKinds = kinds ? kinds.filter((k) => /DEVICE|\bDevice\b/.test(k.text) && !/STATIC|Static/.test(k.text)).map((k) => k.id) : [2] // CUDA_MEMOPR_MEMORY_KIND_DEVICE
  const kindName = new Map((kinds ?? []).map((k) => [k.id, k.text.split(' ').at(-1) ?? String(k.id)]))
  const freeOps = operations ? operations.filter((o) => /DEALLOC|Dealloc|RELEASE|Release|FREE|Free/.test(o.text)).map((o) => o.id) : [1]
  const allocOps = operations ? operations.filter((o) => /ALLOC|Alloc/.test(o.text) && !freeOps.includes(o.id)).map((o) => o.id) : [0]
  if (deviceKinds.length === 0) fail('bad-schema', `${KIND_TABLE} names no device memory kind`)
  if (allocOps.length === 0 || freeOps.length === 0) fail('bad-schema', `${OPERATION_TABLE} names no allocation or no deallocation`)

  const inKinds = deviceKinds.map((k) => Number(k)).join(', ')
  const rowsTotal = Number((db.prepare(`SELECT COUNT(*) AS n FROM ${MEMORY_TABLE}`).get() as { n: number | bigint }).n)
  const perDevice = new Map<number, number>()
  for (const r of db
    .prepare(`SELECT deviceId AS d, COUNT(*) AS n FROM ${MEMORY_TABLE} WHERE memKind IN (${inKinds}) GROUP BY deviceId ORDER BY deviceId`)
    .all() as {
    d: unknown
    n: number
  }[]) {
    const d = Number(r.d)
    if (Number.isInteger(d) && d >= 0 && d <= 0xffff) perDevice.set(d, Number(r.n))
  }
  const wanted = options.device
  let device: number
  if (typeof wanted === 'number') {
    if (!perDevice.has(wanted))
      fail(
        'bad-row',
        `device ${wanted} has no device-memory events (${perDevice.size === 0 ? 'no device has' : `devices with some: ${[...perDevice.keys()].join(', ')}`})`,
      )
    device = wanted
  } else device = [...perDevice].sort((a, b) => b[1] - a[1] || a[0] - b[0])[0]?.[0] ?? 0

  const pools = POOL_COLUMNS.filter((c) => columns.has(c))
  const stream = columns.has('streamId') ? 'streamId' : '0'
  const query = db.prepare(
    `SELECT rowid AS row, start, address, bytes, memoryOperationType AS op, ${stream} AS stream${pools.map((c) => `, ${c}`).join('')} FROM ${MEMORY_TABLE} ` +
      `WHERE deviceId = ? AND memKind IN (${inKinds}) ORDER BY start, rowid`,
  )
  query.setReadBigInts(true)
  // Rows as arrays, in the SELECT's order, where this Node has it: four times faster than objects.
  const arrays = typeof query.setReturnArrays === 'function'
  if (arrays) query.setReturnArrays(true)
  const poolAt = pools.indexOf('localMemoryPoolAddress')
  const poolSizeAt = pools.indexOf('localMemoryPoolSize')

  const events = new EventsBuilder(1024)
  const layout = new LayoutChunks(1024)
  const live = new Map<bigint, { id: number; size: number }>()
  const streams: string[] = []
  const streamIndex = new Map<string, number>()
  let nextId = 0
  let t0: bigint | undefined
  let rows = 0
  let unknownFrees = 0
  let reusedLive = 0
  let otherOps = 0
  let requested = 0
  let peak = 0
  let poolAllocs = 0
  const poolPeak = new Map<bigint, number>()
  const integer = (v: unknown, what: string, row: number): bigint => {
    return typeof v === 'bigint' ? v : fail('bad-row', `"${what}" is ${v === null ? 'NULL' : JSON.stringify(String(v)).slice(0, 40)}, not an integer`, row)
  }
  for (const raw of query.iterate(device) as Iterable<unknown[] | Record<string, unknown>>) {
    const r = arrays ? (raw as unknown[]) : Object.values(raw)
    if ((++rows & 0xffff) === 0) {
      if (options.signal?.aborted) throw options.signal.reason
      options.onProgress?.({ rowsDone: rows, rowsTotal })
    }
    const row = Number(r[0])
    const start = integer(r[1], 'start', row)
    const address = BigInt.asUintN(64, integer(r[2], 'address', row))
    // The layout keeps addresses as numbers, exact below 2^53 (as every CUDA device address is).
    const place = Number(address)
    const bytesBig = integer(r[3], 'bytes', row)
    if (bytesBig < 0n || bytesBig > BigInt(Number.MAX_SAFE_INTEGER)) fail('bad-row', `"bytes" ${bytesBig} is not a byte count`, row)
    const bytes = Number(bytesBig)
    const op = Number(integer(r[4], 'memoryOperationType', row))
    t0 ??= start
    const time = Number(start - t0)
    const streamText = String(r[5] ?? 0)
    let s = streamIndex.get(streamText)
    if (s === undefined) {
      s = streams.push(streamText) - 1
      streamIndex.set(streamText, s)
    }
    if (allocOps.includes(op)) {
      if (bytes === 0) continue
      const previous = live.get(address)
      if (previous !== undefined) {
        // The address was handed out again, so the allocation before it was freed unrecorded.
        reusedLive++
        events.push(EventKind.free, previous.id, 0, s, device, time)
        layout.push(LayoutOp.free, place, previous.size, previous.size, s, time)
        layout.push(LayoutOp.regionRelease, place, previous.size, 0, s, time)
        requested -= previous.size
      }
      const id = nextId++
      live.set(address, { id, size: bytes })
      requested += bytes
      if (requested > peak) peak = requested
      events.push(EventKind.alloc, id, bytes, s, device, time)
      layout.push(LayoutOp.regionReserve, place, bytes, 0, s, time)
      layout.push(LayoutOp.alloc, place, bytes, bytes, s, time)
      const poolAddress = poolAt < 0 ? undefined : r[6 + poolAt]
      if (typeof poolAddress === 'bigint' && poolAddress !== 0n) {
        poolAllocs++
        const size = poolSizeAt < 0 ? undefined : r[6 + poolSizeAt]
        if (typeof size === 'bigint') poolPeak.set(poolAddress, Math.max(poolPeak.get(poolAddress) ?? 0, Number(size)))
      }
    } else if (freeOps.includes(op)) {
      const block = live.get(address)
      if (!block) {
        unknownFrees++
        continue
      }
      live.delete(address)
      requested -= block.size
      events.push(EventKind.free, block.id, 0, s, device, time)
      layout.push(LayoutOp.free, place, block.size, block.size, s, time)
      layout.push(LayoutOp.regionRelease, place, block.size, 0, s, time)
    } else otherOps++
  }
  const leftOut = rowsTotal - rows

  const warnings: string[] = []
  const otherDevices = [...perDevice.keys()].filter((d) => d !== device)
  if (otherDevices.length > 0)
    warnings.push(
      `the export has device memory on ${perDevice.size} devices; device ${device} (${perDevice.get(device)} events) was imported, not ${otherDevices.map((d) => `${d} (${perDevice.get(d)})`).join(', ')}: pass --device N for another`,
    )
  if (leftOut > 0) {
    const byKind = db.prepare(`SELECT memKind AS k, COUNT(*) AS n FROM ${MEMORY_TABLE} WHERE memKind NOT IN (${inKinds}) GROUP BY memKind`).all() as {
      k: unknown
      n: number
    }[]
    const kindsLeft = byKind.map((k) => `${kindName.get(Number(k.k)) ?? `kind ${String(k.k)}`} ${k.n}`).join(', ')
    warnings.push(
      `${leftOut} memory events ${kindsLeft ? `of other memory kinds (${kindsLeft}) or ` : ''}of other devices were left out: vramscope replays one device's memory`,
    )
  }
  if (unknownFrees > 0) warnings.push(`${unknownFrees} deallocations of addresses with no live allocation (allocated before the capture began) were skipped`)
  if (reusedLive > 0) warnings.push(`${reusedLive} allocations returned an address that was still live; a free of the older one was assumed`)
  if (otherOps > 0) warnings.push(`${otherOps} events of an operation that is neither allocation nor deallocation were skipped`)
  if (poolAllocs > 0)
    warnings.push(
      `${poolAllocs} allocations came from stream-ordered memory pools (cudaMallocAsync); each is drawn as a region of its own, the pools' own reserved memory (their largest size: ${[...poolPeak.values()].join(', ')} bytes) is not`,
    )
  if (nextId === 0) warnings.push(`the export holds no device-memory allocations: record with nsys profile --cuda-memory-usage=true`)
  warnings.push('Nsight Systems records the CUDA calls (a caching allocator’s segments), not the tensors inside them: the requests are those calls')

  const properties: Record<string, string> = {
    'nsys.rows': String(rowsTotal),
    'nsys.device': String(device),
    'nsys.memory_events': String(rows),
    'nsys.left_out': String(leftOut),
    'nsys.unknown_frees': String(unknownFrees),
    'nsys.live_at_end': String(live.size),
    'nsys.peak_reserved': String(peak),
  }
  if (poolAllocs > 0) properties['nsys.pool_allocations'] = String(poolAllocs)
  gpuOf(db, tables, device, properties)
  // The layout's columns, copied out of the chunks (times are ns already); a synchronous import, so the copy's pauses are not taken.
  const recordedLayout = allocateLayout(layout.length)
  const copy = layout.moveTo(recordedLayout, 0, 0, 1)
  while (!copy.next().done) continue
  const trace: RequestTrace = {
    meta: {
      source: NSYS_SOURCE,
      origin: options.origin ?? path,
      ...(properties['device.name'] && { gpu: properties['device.name'] }),
      warnings,
      properties,
    },
    events: events.build(),
    tables: { streams: streams.length > 0 ? streams : ['0'], frames: [], stacks: [], tags: [], markers: [] },
  }
  return {
    trace,
    recorded: { name: RECORDED_CUDA_NAME, strategy: 'recorded', params: { recorder: 'nsys', device }, layout: recordedLayout },
    device,
    devices: perDevice,
    rows: rowsTotal,
    leftOut,
    unknownFrees,
    liveAtEnd: live.size,
    peakReserved: peak,
  }
}

/**
 * The GPU's name and memory from TARGET_INFO_GPU (id, name, totalMemory) where the export has it,
 * for the device rule: its row for the device through TARGET_INFO_CUDA_DEVICE (gpuId, cudaId) where
 * that table is there, else the row whose id is the device's.
 */
function gpuOf(db: Database, tables: Set<string>, device: number, properties: Record<string, string>): void {
  if (!tables.has('TARGET_INFO_GPU')) return
  try {
    const columns = (table: string) => new Set((db.prepare(`PRAGMA table_info(${table})`).all() as { name: string }[]).map((r) => r.name))
    const gpu = columns('TARGET_INFO_GPU')
    if (!gpu.has('id') || !gpu.has('name')) return
    const memory = gpu.has('totalMemory') ? ', g.totalMemory AS totalMemory' : ''
    const cuda = tables.has('TARGET_INFO_CUDA_DEVICE') ? columns('TARGET_INFO_CUDA_DEVICE') : new Set<string>()
    const query =
      cuda.has('gpuId') && cuda.has('cudaId')
        ? `SELECT g.name AS name${memory} FROM TARGET_INFO_GPU g JOIN TARGET_INFO_CUDA_DEVICE c ON c.gpuId = g.id WHERE c.cudaId = ? LIMIT 1`
        : `SELECT g.name AS name${memory} FROM TARGET_INFO_GPU g WHERE g.id = ? LIMIT 1`
    const r = db.prepare(query).get(device) as { name?: unknown; totalMemory?: unknown } | undefined
    if (typeof r?.name === 'string' && r.name.length > 0 && r.name.length <= 256) properties['device.name'] = r.name
    const bytes = Number(r?.totalMemory)
    if (Number.isSafeInteger(bytes) && bytes > 0) {
      properties['device.total_bytes'] = String(bytes)
      properties['device.from'] = 'TARGET_INFO_GPU'
    }
  } catch {
    // The GPU's table is a nicety: one that does not read names no GPU.
  }
}
