// Imports an Umpire replay log (a program run with UMPIRE_REPLAY=On) into a request trace (source
// "umpire-log"). The log is JSON lines, one event a line, in one of the two forms Umpire has
// written:
//   events (Umpire 2022 and later, the .stats file):
//     {"category":"operation","name":"allocate","numeric_args":{"size":N},
//      "string_args":{"allocator_ref":"0x..","pointer":"0x.."},"tags":{"replay":"true"},"timestamp":<ns>}
//     names: make_memory_resource (tags.allocator_name), make_allocator (string_args.type, .arg0 the
//     parent allocator's name, tags.allocator_name), allocate, named_allocate, allocate_resource,
//     deallocate, deallocate_resource
//   classic (before, on the program's standard output among its own lines):
//     { "kind":"replay", "uid":<pid>, "timestamp":<ns>, "event": "allocate",
//       "payload": { "allocator_ref": "0x..", "size": N }, "result": { "memory_ptr": "0x.." } }
//     events: version, makeMemoryResource (payload.name, result the ref), makeAllocator (written
//     twice: payload.allocator_name, .type, .args[0] the parent's name; the second with
//     result.allocator_ref), allocate (twice: the intent, then the result with memory_ptr), deallocate
// Every allocator is traced to the memory resource under it (an allocator's parent is its first
// argument). The request trace holds the allocations and deallocations of every allocator on a
// DEVICE resource (DEVICE, DEVICE::n: device n), merged in the log's order, each tagged with its
// allocator's name: Umpire logs the calls a program makes through an Allocator, not the calls a
// pool makes to the resource under it, so these are the program's own requests. Allocations on
// other resources (HOST, PINNED, UM, DEVICE_CONST, FILE...) are counted and left out, as are the
// operations that are not allocations (copy, reallocate, coalesce, release...). Lines that are not
// JSON objects (the program's own output, comments) are skipped and counted.
import { createReadStream } from 'node:fs'
import { stat } from 'node:fs/promises'

import { InputError, notARegularFile } from '../input-error.ts'
import { EventsBuilder } from '../trace/events-builder.ts'
import { EventKind, type RequestTrace } from '../trace/model.ts'

export const UMPIRE_SOURCE = 'umpire-log'
/** A longer line is damage (Umpire's are under a few hundred bytes), never buffered whole. */
export const MAX_LINE_BYTES = 1 << 16

export type UmpireErrorCode = 'unreadable' | 'not-a-log' | 'too-large' | 'bad-line'

export class UmpireLogError extends InputError {
  constructor(
    file: string,
    readonly code: UmpireErrorCode,
    /** 1-based line the problem is on; undefined: the whole file. */
    readonly line: number | undefined,
    problem: string,
  ) {
    super(file, line === undefined ? '' : `line ${line}`, problem)
  }
}

export interface UmpireImportOptions {
  /** What meta.origin says (default: the path as given). */
  origin?: string
  /** Only this DEVICE::n's allocations (default: every device's). */
  device?: number | 'all'
  onProgress?: (progress: { bytesDone: number; bytesTotal: number }) => void
  signal?: AbortSignal
}

export interface UmpireAllocator {
  name: string
  /** The memory resource under it ("DEVICE::0", "HOST"...); undefined where its parents are not in the log. */
  resource: string | undefined
  /** Umpire's strategy type as logged (mangled in the events form). */
  type: string
  allocations: number
}

export interface UmpireImport {
  trace: RequestTrace
  format: 'events' | 'classic'
  lines: number
  /** Lines skipped: not a JSON object (the program's own output, comments). */
  otherLines: number
  allocators: UmpireAllocator[]
  /** Allocations and deallocations on resources other than a device's, left out. */
  leftOut: number
  /** Events of allocators the log never created: left out. */
  unknownAllocator: number
  /** Deallocations of pointers with no live allocation; skipped. */
  unknownFrees: number
  /** Classic form: allocation intents with no result line (the allocation failed or the log ends there). */
  unanswered: number
  liveAtEnd: number
}

/** Reads and imports an Umpire replay log, line by line. */
export async function importUmpireLog(path: string, options: UmpireImportOptions = {}): Promise<UmpireImport> {
  let bytesTotal: number
  try {
    const s = await stat(path)
    const problem = notARegularFile(s)
    if (problem) throw new UmpireLogError(path, 'unreadable', undefined, problem)
    bytesTotal = s.size
  } catch (e) {
    if (e instanceof UmpireLogError) throw e
    throw new UmpireLogError(path, 'unreadable', undefined, `cannot be read: ${(e as Error).message}`)
  }
  const reader = new UmpireReader(path, options)
  const stream = createReadStream(path, { highWaterMark: 1 << 20, ...(options.signal && { signal: options.signal }) })
  let bytesDone = 0
  try {
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      bytesDone += chunk.length
      reader.push(chunk)
      options.onProgress?.({ bytesDone, bytesTotal })
    }
  } catch (e) {
    if (e instanceof UmpireLogError || options.signal?.aborted) throw e
    throw new UmpireLogError(path, 'unreadable', undefined, `cannot be read: ${(e as Error).message}`)
  } finally {
    stream.destroy()
  }
  return reader.finish()
}

/** Imports a whole log held in memory: tests, fuzzing. */
export function parseUmpireLog(bytes: Uint8Array, file: string, options: UmpireImportOptions = {}): UmpireImport {
  const reader = new UmpireReader(file, options)
  reader.push(bytes)
  return reader.finish()
}

/** One event, whichever form it came in. */
interface Op {
  name: string
  time: number
  ref?: string
  pointer?: string
  size?: number
  allocatorName?: string
  type?: string
  parent?: string
  /** Classic form: the first of the two lines an allocation or allocator creation writes. */
  intent?: boolean
}

interface Allocator extends UmpireAllocator {
  parent: string | undefined
}

const DEVICE_RESOURCE = /^DEVICE(?:::(\d+))?$/
const NEWLINE = 0x0a

class UmpireReader {
  private readonly decoder = new TextDecoder('utf-8')
  private carry: Uint8Array[] = []
  private carryBytes = 0
  private lineNo = 0
  private otherLines = 0
  private format: 'events' | 'classic' | undefined
  private readonly byName = new Map<string, Allocator>()
  private readonly byRef = new Map<string, Allocator>()
  /** Classic form: the makeAllocator intent lines, by allocator name, waiting for their result. */
  private readonly pendingAllocators = new Map<string, Op>()
  private unanswered = 0
  private leftOut = 0
  private unknownAllocator = 0
  private unknownFrees = 0
  private readonly skipped = new Map<string, number>()
  private readonly events = new EventsBuilder(1024)
  /** Live blocks: "device/pointer" -> id. */
  private readonly live = new Map<string, number>()
  private readonly sizes: number[] = []
  private readonly tags: string[] = []
  private readonly tagOf = new Map<string, number>()
  private readonly devices = new Set<number>()
  private t0: number | undefined
  private lastTime = 0
  private reordered = 0
  private version: string | undefined
  private readonly origin: string

  constructor(
    private readonly file: string,
    private readonly options: UmpireImportOptions,
  ) {
    this.origin = options.origin ?? file
  }

  private fail(code: UmpireErrorCode, problem: string, line: number | undefined = this.lineNo): never {
    throw new UmpireLogError(this.file, code, line, problem)
  }

  push(chunk: Uint8Array): void {
    let from = 0
    for (;;) {
      const nl = chunk.indexOf(NEWLINE, from)
      if (nl < 0) break
      const piece = chunk.subarray(from, nl)
      if (this.carryBytes + piece.length > MAX_LINE_BYTES) this.tooLong()
      const bytes = this.carry.length === 0 ? piece : concatBytes([...this.carry, piece])
      this.carry = []
      this.carryBytes = 0
      this.line(bytes)
      from = nl + 1
    }
    const rest = chunk.subarray(from)
    if (rest.length > 0) {
      if (this.carryBytes + rest.length > MAX_LINE_BYTES) this.tooLong()
      this.carry.push(rest.slice())
      this.carryBytes += rest.length
    }
  }

  private tooLong(): never {
    this.fail(
      'too-large',
      `the line is longer than ${MAX_LINE_BYTES} bytes: the file is damaged, or not an Umpire replay log (whose lines are short)`,
      this.lineNo + 1,
    )
  }

  private line(bytes: Uint8Array): void {
    this.lineNo++
    let text = this.decoder.decode(bytes)
    if (this.lineNo === 1) text = text.replace(/^\uFEFF/, '')
    text = text.trim()
    if (text === '') return
    if (!text.startsWith('{')) {
      this.otherLines++
      return
    }
    let value: unknown
    try {
      value = JSON.parse(text)
    } catch (e) {
      // A program's own output may begin with "{"; a line that reads as one of Umpire's is damage.
      if (/"kind"\s*:\s*"replay"|"category"\s*:\s*"(operation|statistic|metadata)"/.test(text))
        this.fail('bad-line', `not valid JSON (${(e as Error).message})`)
      this.otherLines++
      return
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      this.otherLines++
      return
    }
    const o = value as Record<string, unknown>
    const form = o['kind'] === 'replay' ? 'classic' : typeof o['category'] === 'string' && typeof o['name'] === 'string' ? 'events' : undefined
    if (!form) {
      this.otherLines++
      return
    }
    const op = form === 'classic' ? this.classic(o) : this.modern(o)
    if (op) this.apply(op)
  }

  private setFormat(format: 'events' | 'classic'): void {
    if (this.format === undefined) this.format = format
    else if (this.format !== format) this.fail('bad-line', `a line of Umpire's ${format} form in a log of its ${this.format} form`)
  }

  private time(v: unknown): number {
    if (typeof v !== 'number' || !Number.isFinite(v) || v < 0)
      this.fail('bad-line', `"timestamp" is ${JSON.stringify(v) ?? 'missing'}, not a time in nanoseconds`)
    return v
  }

  private string(o: Record<string, unknown> | undefined, key: string, where: string): string {
    const v = o?.[key]
    if (typeof v !== 'string' || v.length > 4096) this.fail('bad-line', `${where}: "${key}" is ${JSON.stringify(v)?.slice(0, 80) ?? 'missing'}, not a string`)
    return v
  }

  private size(v: unknown, where: string): number {
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0)
      this.fail('bad-line', `${where}: "size" is ${JSON.stringify(v) ?? 'missing'}, not a byte count`)
    return v
  }

  private pointer(text: string, where: string): string {
    const t = text.trim().toLowerCase()
    if (t === '(nil)' || t === 'nil' || t === '0' || t === '0x0') return '0'
    if (!/^(0x)?[0-9a-f]{1,16}$/.test(t)) this.fail('bad-line', `${where}: "${text.slice(0, 40)}" is not a pointer`)
    return BigInt(t.startsWith('0x') ? t : `0x${t}`).toString(16)
  }

  /** The events form (Umpire 2022 and later). */
  private modern(o: Record<string, unknown>): Op | undefined {
    this.setFormat('events')
    const name = o['name'] as string
    if (o['category'] !== 'operation') {
      this.count(`${o['category'] as string} ${name}`)
      return undefined
    }
    const time = this.time(o['timestamp'])
    const s = (typeof o['string_args'] === 'object' && o['string_args'] !== null ? o['string_args'] : {}) as Record<string, unknown>
    const n = (typeof o['numeric_args'] === 'object' && o['numeric_args'] !== null ? o['numeric_args'] : {}) as Record<string, unknown>
    const tags = (typeof o['tags'] === 'object' && o['tags'] !== null ? o['tags'] : {}) as Record<string, unknown>
    const where = `"${name}"`
    switch (name) {
      case 'make_memory_resource':
        return {
          name: 'resource',
          time,
          ref: this.pointer(this.string(s, 'allocator_ref', where), where),
          allocatorName: this.string(tags, 'allocator_name', where),
        }
      case 'make_allocator':
        return {
          name: 'allocator',
          time,
          ref: this.pointer(this.string(s, 'allocator_ref', where), where),
          allocatorName: this.string(tags, 'allocator_name', where),
          type: typeof s['type'] === 'string' ? s['type'] : '',
          ...(typeof s['arg0'] === 'string' && { parent: s['arg0'] }),
        }
      case 'allocate':
      case 'named_allocate':
      case 'allocate_resource':
        return {
          name: 'allocate',
          time,
          ref: this.pointer(this.string(s, 'allocator_ref', where), where),
          pointer: this.pointer(this.string(s, 'pointer', where), where),
          size: this.size(n['size'], where),
        }
      case 'deallocate':
      case 'deallocate_resource':
        return {
          name: 'deallocate',
          time,
          ref: this.pointer(this.string(s, 'allocator_ref', where), where),
          pointer: this.pointer(this.string(s, 'pointer', where), where),
        }
      default:
        this.count(name)
        return undefined
    }
  }

  /** The classic form (Umpire before 2022). */
  private classic(o: Record<string, unknown>): Op | undefined {
    this.setFormat('classic')
    const event = o['event']
    if (typeof event !== 'string') this.fail('bad-line', 'a replay line without an "event" name')
    const time = this.time(o['timestamp'])
    const payload = (typeof o['payload'] === 'object' && o['payload'] !== null ? o['payload'] : {}) as Record<string, unknown>
    const result = o['result']
    const answered = result !== undefined && result !== null
    const r = (typeof result === 'object' && result !== null ? result : {}) as Record<string, unknown>
    const where = `"${event}"`
    switch (event) {
      case 'version':
        this.version = ['major', 'minor', 'patch'].map((k) => String(payload[k])).join('.')
        return undefined
      case 'makeMemoryResource':
        if (typeof result !== 'string') this.fail('bad-line', `${where}: "result" is not the resource's pointer`)
        return { name: 'resource', time, ref: this.pointer(result, where), allocatorName: this.string(payload, 'name', where) }
      case 'makeAllocator': {
        const args = Array.isArray(payload['args']) ? payload['args'] : []
        return {
          name: 'allocator',
          time,
          intent: !answered,
          ...(answered && { ref: this.pointer(this.string(r, 'allocator_ref', where), where) }),
          allocatorName: this.string(payload, 'allocator_name', where),
          type: typeof payload['type'] === 'string' ? payload['type'] : '',
          ...(typeof args[0] === 'string' && { parent: args[0] }),
        }
      }
      case 'allocate':
        return {
          name: 'allocate',
          time,
          intent: !answered,
          ref: this.pointer(this.string(payload, 'allocator_ref', where), where),
          size: this.size(payload['size'], where),
          ...(answered && { pointer: this.pointer(this.string(r, 'memory_ptr', where), where) }),
        }
      case 'deallocate':
        return {
          name: 'deallocate',
          time,
          ref: this.pointer(this.string(payload, 'allocator_ref', where), where),
          pointer: this.pointer(this.string(payload, 'memory_ptr', where), where),
        }
      default:
        this.count(event)
        return undefined
    }
  }

  private count(name: string): void {
    const key = name.length > 64 ? `${name.slice(0, 64)}…` : name
    if (this.skipped.size < 64 || this.skipped.has(key)) this.skipped.set(key, (this.skipped.get(key) ?? 0) + 1)
  }

  private apply(op: Op): void {
    switch (op.name) {
      case 'resource': {
        const a: Allocator = { name: op.allocatorName!, resource: op.allocatorName!, type: 'resource', allocations: 0, parent: undefined }
        this.byName.set(a.name, a)
        this.byRef.set(op.ref!, a)
        if (a.name === 'DEVICE') this.byName.set('DEVICE::0', a)
        return
      }
      case 'allocator': {
        if (op.intent) {
          this.pendingAllocators.set(op.allocatorName!, op)
          return
        }
        this.pendingAllocators.delete(op.allocatorName!)
        const parent = op.parent === undefined ? undefined : this.byName.get(op.parent)
        const a: Allocator = { name: op.allocatorName!, resource: parent?.resource, type: op.type ?? '', allocations: 0, parent: op.parent }
        this.byName.set(a.name, a)
        this.byRef.set(op.ref!, a)
        return
      }
      case 'allocate': {
        if (op.intent) {
          this.unanswered++
          return
        }
        if (this.format === 'classic' && this.unanswered > 0) this.unanswered-- // its intent came first
        this.record(op, true)
        return
      }
      case 'deallocate':
        this.record(op, false)
    }
  }

  private record(op: Op, alloc: boolean): void {
    const allocator = this.byRef.get(op.ref!)
    if (!allocator) {
      this.unknownAllocator++
      return
    }
    const device = allocator.resource === undefined ? undefined : DEVICE_RESOURCE.exec(allocator.resource)
    const ordinal = device ? Number(device[1] ?? 0) : -1
    const wanted = this.options.device
    if (!device || ordinal > 0xffff || (typeof wanted === 'number' && ordinal !== wanted)) {
      this.leftOut++
      return
    }
    if (op.pointer === '0') return // a null pointer: nothing was allocated, or nothing freed
    if (alloc && op.size === 0) return // a zero-byte request takes nothing
    if (this.t0 === undefined) this.t0 = op.time
    let time = op.time - this.t0
    if (time < this.lastTime) {
      time = this.lastTime // threads racing: time kept non-decreasing
      this.reordered++
    }
    this.lastTime = time
    const key = `${ordinal}/${op.pointer!}`
    if (alloc) {
      const previous = this.live.get(key)
      if (previous !== undefined) this.events.push(EventKind.free, previous, 0, 0, ordinal, time) // handed out again: freed unlogged
      const id = this.sizes.push(op.size!) - 1
      this.live.set(key, id)
      allocator.allocations++
      this.devices.add(ordinal)
      this.events.push(EventKind.alloc, id, op.size!, 0, ordinal, time, -1, this.tag(allocator.name))
    } else {
      const id = this.live.get(key)
      if (id === undefined) {
        this.unknownFrees++
        return
      }
      this.live.delete(key)
      this.events.push(EventKind.free, id, 0, 0, ordinal, time)
    }
  }

  private tag(name: string): number {
    let t = this.tagOf.get(name)
    if (t === undefined) {
      t = this.tags.push(name) - 1
      this.tagOf.set(name, t)
    }
    return t
  }

  finish(): UmpireImport {
    if (this.carryBytes > 0) {
      const last = concatBytes(this.carry)
      this.carry = []
      this.carryBytes = 0
      this.line(last)
    }
    if (this.format === undefined)
      this.fail(
        'not-a-log',
        this.lineNo === 0
          ? 'the file is empty: an Umpire replay log is JSON lines, as a program run with UMPIRE_REPLAY=On writes'
          : `none of its ${this.lineNo} lines is an Umpire replay event (a JSON line with "kind":"replay", or "category" and "name"): record one with UMPIRE_REPLAY=On`,
        undefined,
      )
    this.unanswered += this.pendingAllocators.size
    const allocators = [...new Set(this.byRef.values())].map(({ name, resource, type, allocations }) => ({ name, resource, type, allocations }))
    const warnings: string[] = []
    if (this.leftOut > 0) {
      const others = [...new Set(allocators.filter((a) => !a.resource || !DEVICE_RESOURCE.test(a.resource)).map((a) => a.resource ?? 'unknown'))]
      warnings.push(
        `${this.leftOut} allocations and deallocations on resources other than ${typeof this.options.device === 'number' ? `DEVICE::${this.options.device}` : 'a device'} (${others.join(', ') || 'other devices'}) were left out: vramscope replays GPU memory`,
      )
    }
    if (this.unknownAllocator > 0) warnings.push(`${this.unknownAllocator} events of allocators the log never created were left out`)
    if (this.unknownFrees > 0) warnings.push(`${this.unknownFrees} deallocations of pointers with no live allocation were skipped`)
    if (this.unanswered > 0)
      warnings.push(`${this.unanswered} allocations were logged without their result (they failed, or the log ends there) and are not in the trace`)
    if (this.reordered > 0) warnings.push(`${this.reordered} events were logged with a time before the one above (threads racing); their time was raised`)
    const skipped = [...this.skipped].map(([k, v]) => `${k} ${v}`)
    if (skipped.length > 0) warnings.push(`operations other than allocations were left out: ${skipped.join(', ')}`)
    if (this.events.length === 0) warnings.push('the log holds no allocations on a DEVICE resource')
    if (this.devices.size > 1)
      warnings.push(`the log allocates on ${this.devices.size} devices (${[...this.devices].map((d) => `DEVICE::${d}`).join(', ')}); pass --device N for one`)

    const properties: Record<string, string> = {
      'umpire.format': this.format,
      'umpire.lines': String(this.lineNo),
      'umpire.other_lines': String(this.otherLines),
      'umpire.left_out': String(this.leftOut),
      'umpire.unknown_frees': String(this.unknownFrees),
      'umpire.unanswered': String(this.unanswered),
      'umpire.live_at_end': String(this.live.size),
    }
    if (this.version) properties['umpire.version'] = this.version
    for (const a of allocators) if (a.allocations > 0) properties[`umpire.allocator.${a.name}`] = `${a.allocations} allocations on ${a.resource}`
    return {
      trace: {
        meta: { source: UMPIRE_SOURCE, origin: this.origin, warnings, properties },
        events: this.events.build(),
        tables: { streams: ['0'], frames: [], stacks: [], tags: this.tags, markers: [] },
      },
      format: this.format,
      lines: this.lineNo,
      otherLines: this.otherLines,
      allocators,
      leftOut: this.leftOut,
      unknownAllocator: this.unknownAllocator,
      unknownFrees: this.unknownFrees,
      unanswered: this.unanswered,
      liveAtEnd: this.live.size,
    }
  }
}

function concatBytes(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0))
  let at = 0
  for (const p of parts) {
    out.set(p, at)
    at += p.length
  }
  return out
}

/** Whether the first bytes of a file read as an Umpire replay log (a line of either form). */
export function looksLikeUmpireLog(head: string): boolean {
  for (const raw of head.split('\n').slice(0, 64)) {
    const line = raw.trim()
    if (!line.startsWith('{')) continue
    if (/^\{\s*"kind"\s*:\s*"replay"\s*,\s*"uid"\s*:/.test(line)) return true
    if (/^\{"category":"(operation|metadata|statistic)","name":"[a-z_]+"/.test(line) || /"tags"\s*:\s*\{[^}]*"replay"\s*:\s*"true"/.test(line)) return true
  }
  return false
}
