// CRC-32 (the zlib / ISO-HDLC polynomial) of trace file chunks. Node >= 20.15 computes it natively
// (several GB/s); older Nodes get a table-driven fallback that gives the same values.
import * as zlib from 'node:zlib'

type Crc32 = (data: Uint8Array, initial?: number) => number

const native = (zlib as unknown as { crc32?: Crc32 }).crc32

let table: Uint32Array | undefined

function crc32Table(): Uint32Array {
  if (table) return table
  table = new Uint32Array(256)
  for (let n = 0; n < 256; n++) {
    let c = n
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1
    table[n] = c >>> 0
  }
  return table
}

export function crc32Fallback(data: Uint8Array, initial = 0): number {
  const t = crc32Table()
  let c = ~initial >>> 0
  for (let i = 0; i < data.length; i++) c = t[(c ^ data[i]!) & 0xff]! ^ (c >>> 8)
  return ~c >>> 0
}

export function crc32(data: Uint8Array): number {
  return native ? native(data) : crc32Fallback(data)
}

export function crc32Hex(data: Uint8Array): string {
  return crc32(data).toString(16).padStart(8, '0')
}
