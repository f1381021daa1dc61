// The log libvramscope_intercept.so writes (native/intercept/intercept_log.h): a 64-byte header,
// then 64-byte records. Read incrementally, as the recorded program runs: push() takes the bytes
// that have appeared since the last call and returns the whole records among them; a record cut
// short (the program was killed mid-write) waits for the rest, and is dropped if none comes.
import { InputError } from '../input-error.ts'

export const INTERCEPT_MAGIC = 'VRSCPLOG'
export const INTERCEPT_VERSION = 1
export const INTERCEPT_HEADER_BYTES = 64
export const INTERCEPT_RECORD_BYTES = 64

/** vramscope_intercept_op of intercept_log.h, same numbers. */
export const InterceptOp = {
  cudaMalloc: 1,
  cudaFree: 2,
  cudaMallocAsync: 3,
  cudaFreeAsync: 4,
  cudaMallocManaged: 5,
  cudaMallocHost: 6,
  cudaFreeHost: 7,
  cudaMallocFromPoolAsync: 8,
  cuMemAlloc: 16,
  cuMemFree: 17,
  cuMemAllocAsync: 18,
  cuMemFreeAsync: 19,
  cuMemAllocManaged: 20,
  cuMemAllocHost: 21,
  cuMemFreeHost: 22,
  cuMemAllocFromPoolAsync: 23,
  cuMemCreate: 32,
  cuMemRelease: 33,
  cuMemMap: 34,
  cuMemUnmap: 35,
  cuMemAddressReserve: 36,
  cuMemAddressFree: 37,
  frame: 64,
  note: 65,
} as const

export const INTERCEPT_OP_NAMES: Record<number, string> = Object.fromEntries(Object.entries(InterceptOp).map(([name, op]) => [op, name]))

/** Records reached through cuGetProcAddress or dlsym rather than a linked symbol. */
export const FLAG_FROM_PROC_ADDRESS = 1

export interface InterceptHeader {
  pid: number
  /** CLOCK_MONOTONIC ns when the log was opened: record times are on this clock. */
  startMonotonicNs: bigint
  startRealtimeNs: bigint
  stackDepth: number
}

export interface InterceptRecord {
  /** ns since the log was opened. */
  time: number
  address: bigint
  size: number
  stream: bigint
  aux: bigint
  sequence: number
  thread: number
  status: number
  durationNs: number
  op: number
  flags: number
}

export class InterceptLogReader {
  header: InterceptHeader | undefined
  /** Bytes received so far. */
  bytes = 0
  private carry = new Uint8Array(0)

  constructor(private readonly file: string) {}

  /** Whole records in `chunk` (with what was left over from the previous push). */
  push(chunk: Uint8Array): InterceptRecord[] {
    this.bytes += chunk.length
    let data = chunk
    if (this.carry.length > 0) {
      data = new Uint8Array(this.carry.length + chunk.length)
      data.set(this.carry)
      data.set(chunk, this.carry.length)
    }
    let at = 0
    if (!this.header) {
      if (data.length < INTERCEPT_HEADER_BYTES) {
        this.carry = data.slice()
        return []
      }
      this.header = this.readHeader(data)
      at = INTERCEPT_HEADER_BYTES
    }
    const view = new DataView(data.buffer, data.byteOffset, data.byteLength)
    const records: InterceptRecord[] = []
    const start = this.header.startMonotonicNs
    for (; at + INTERCEPT_RECORD_BYTES <= data.length; at += INTERCEPT_RECORD_BYTES) {
      records.push({
        time: Number(view.getBigUint64(at, true) - start),
        address: view.getBigUint64(at + 8, true),
        size: Number(view.getBigUint64(at + 16, true)),
        stream: view.getBigUint64(at + 24, true),
        aux: view.getBigUint64(at + 32, true),
        sequence: Number(view.getBigUint64(at + 40, true)),
        thread: view.getUint32(at + 48, true),
        status: view.getInt32(at + 52, true),
        durationNs: view.getUint32(at + 56, true),
        op: view.getUint16(at + 60, true),
        flags: view.getUint16(at + 62, true),
      })
    }
    this.carry = data.slice(at)
    return records
  }

  /** Bytes of a record cut short at the end (a kill in the middle of a write). */
  get pendingBytes(): number {
    return this.carry.length
  }

  private readHeader(data: Uint8Array): InterceptHeader {
    const magic = new TextDecoder().decode(data.subarray(0, 8))
    if (magic !== INTERCEPT_MAGIC)
      throw new InputError(
        this.file,
        'byte 0',
        `not a vramscope interposer log (magic "${magic.replace(/[^\x20-\x7e]/g, '?')}", expected "${INTERCEPT_MAGIC}")`,
      )
    const view = new DataView(data.buffer, data.byteOffset, INTERCEPT_HEADER_BYTES)
    const version = view.getUint32(8, true)
    const recordSize = view.getUint32(12, true)
    if (version !== INTERCEPT_VERSION)
      throw new InputError(this.file, 'byte 8', `interposer log version ${version}; this vramscope reads version ${INTERCEPT_VERSION}`)
    if (recordSize !== INTERCEPT_RECORD_BYTES) throw new InputError(this.file, 'byte 12', `records of ${recordSize} bytes; expected ${INTERCEPT_RECORD_BYTES}`)
    return {
      pid: Number(view.getBigUint64(16, true)),
      startMonotonicNs: view.getBigUint64(24, true),
      startRealtimeNs: view.getBigUint64(32, true),
      stackDepth: view.getUint32(40, true),
    }
  }
}
