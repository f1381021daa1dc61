// A small protocol 4 pickler for tests that build snapshot shapes in place (never copied from
// anyone's file): dicts, lists, strings, integers of any size (bigint past 2^53), floats, None
// and booleans, as Python's pickle writes them, without the memo.

/** A value the writer encodes: a Map or plain object is a dict, an array a list. */
export type PickleInput = null | boolean | number | bigint | string | PickleInput[] | Map<PickleInput, PickleInput> | { [key: string]: PickleInput }

export function pickle(value: PickleInput): Uint8Array {
  const out: number[] = [0x80, 4]
  write(out, value)
  out.push(0x2e) // STOP
  return Uint8Array.from(out)
}

function write(out: number[], value: PickleInput): void {
  if (value === null) out.push(0x4e)
  else if (value === true) out.push(0x88)
  else if (value === false) out.push(0x89)
  else if (typeof value === 'bigint') long(out, value)
  else if (typeof value === 'number') {
    if (Number.isInteger(value) && value >= -(2 ** 31) && value < 2 ** 31) {
      out.push(0x4a) // BININT
      const b = new Uint8Array(4)
      new DataView(b.buffer).setInt32(0, value, true)
      out.push(...b)
    } else if (Number.isSafeInteger(value)) long(out, BigInt(value))
    else {
      out.push(0x47) // BINFLOAT, big-endian
      const b = new Uint8Array(8)
      new DataView(b.buffer).setFloat64(0, value, false)
      out.push(...b)
    }
  } else if (typeof value === 'string') {
    const bytes = new TextEncoder().encode(value)
    out.push(0x58) // BINUNICODE
    const n = new Uint8Array(4)
    new DataView(n.buffer).setUint32(0, bytes.length, true)
    out.push(...n, ...bytes)
  } else if (Array.isArray(value)) {
    out.push(0x5d) // EMPTY_LIST
    if (value.length === 0) return
    out.push(0x28) // MARK
    for (const v of value) write(out, v)
    out.push(0x65) // APPENDS
  } else {
    out.push(0x7d) // EMPTY_DICT
    const pairs = value instanceof Map ? [...value] : Object.entries(value)
    if (pairs.length === 0) return
    out.push(0x28)
    for (const [k, v] of pairs) {
      write(out, k)
      write(out, v)
    }
    out.push(0x75) // SETITEMS
  }
}

/** LONG1: the two's-complement little-endian bytes of any integer. */
function long(out: number[], value: bigint): void {
  const bytes: number[] = []
  let v = value
  for (;;) {
    const byte = Number(v & 0xffn)
    bytes.push(byte)
    v >>= 8n
    if ((v === 0n && (byte & 0x80) === 0) || (v === -1n && (byte & 0x80) !== 0)) break
  }
  out.push(0x8a, bytes.length, ...bytes)
}
