// Column bundles: how large results (event columns, layout events, metrics) cross from the host to
// the renderer without JSON. One ArrayBuffer: a header, JSON metadata naming each array (type,
// offset, length), then the arrays' bytes, each 8-byte aligned so the decoder can view them in
// place (no copy). Pure TypeScript: the host encodes, the renderer's worker decodes.
//
//   bytes 0-3   "VSCB"
//   bytes 4-7   format version (u32, little-endian), 1
//   bytes 8-11  JSON length in bytes (u32)
//   then the JSON (UTF-8), padded with spaces to a multiple of 8 from the start of the buffer
//   then the arrays at the offsets the JSON gives (from the start of the buffer)
import { concatBytes } from './bytes.ts'
import type { Bundle, BundleArray } from './contract.ts'

const MAGIC = 0x42435356 // "VSCB" little-endian
const VERSION = 1
const HEADER_BYTES = 12

type ArrayType = 'u8' | 'u16' | 'u32' | 'i32' | 'f32' | 'f64' | 'u64'

interface ArrayEntry {
  name: string
  type: ArrayType
  offset: number
  length: number
}

const CONSTRUCTORS = {
  u8: Uint8Array,
  u16: Uint16Array,
  u32: Uint32Array,
  i32: Int32Array,
  f32: Float32Array,
  f64: Float64Array,
  u64: BigUint64Array,
} as const

function typeOf(array: BundleArray): ArrayType {
  if (array instanceof Uint8Array) return 'u8'
  if (array instanceof Uint16Array) return 'u16'
  if (array instanceof Uint32Array) return 'u32'
  if (array instanceof Int32Array) return 'i32'
  if (array instanceof Float32Array) return 'f32'
  if (array instanceof Float64Array) return 'f64'
  if (array instanceof BigUint64Array) return 'u64'
  throw new TypeError('bundle arrays must be typed arrays')
}

const align8 = (n: number) => (n + 7) & ~7

/** Encodes metadata and named arrays into one buffer. */
export function encodeBundle(bundle: Bundle): Uint8Array {
  return concatBytes(encodeBundleParts(bundle), true)
}

const ZEROS = new Uint8Array(8)

/**
 * The same bytes as encodeBundle, as pieces in order: the header, then each array's own bytes
 * (views, not copies) and its padding. A host writes them one after another without first copying
 * tens of megabytes into one buffer.
 */
export function encodeBundleParts(bundle: Bundle): Uint8Array[] {
  const names = Object.keys(bundle.arrays)
  // The decoder refuses this name (it would set the prototype of the object it builds): fail here.
  if (names.includes('__proto__')) throw new BundleError('bundle: an array may not be named __proto__')
  const entries: ArrayEntry[] = names.map((name) => ({ name, type: typeOf(bundle.arrays[name]!), offset: 0, length: bundle.arrays[name]!.length }))
  // The offsets depend on the JSON's length, which depends on the offsets' digits: settle it by
  // reserving room for the largest offsets first.
  let json = ''
  let dataStart = 0
  for (let pass = 0; pass < 4; pass++) {
    json = JSON.stringify({ meta: bundle.meta ?? null, arrays: entries })
    const start = align8(HEADER_BYTES + new TextEncoder().encode(json).length + 16)
    if (start === dataStart) break
    dataStart = start
    let offset = dataStart
    for (const e of entries) {
      e.offset = offset
      offset = align8(offset + bundle.arrays[e.name]!.byteLength)
    }
  }
  json = JSON.stringify({ meta: bundle.meta ?? null, arrays: entries })
  const jsonBytes = new TextEncoder().encode(json)
  if (HEADER_BYTES + jsonBytes.length > dataStart) throw new Error('bundle header did not settle')
  const header = new Uint8Array(dataStart)
  const view = new DataView(header.buffer)
  view.setUint32(0, MAGIC, true)
  view.setUint32(4, VERSION, true)
  view.setUint32(8, dataStart - HEADER_BYTES, true)
  header.set(jsonBytes, HEADER_BYTES)
  header.fill(0x20, HEADER_BYTES + jsonBytes.length, dataStart)
  const parts: Uint8Array[] = [header]
  for (const e of entries) {
    const a = bundle.arrays[e.name]!
    if (a.byteLength > 0) parts.push(new Uint8Array(a.buffer, a.byteOffset, a.byteLength))
    const pad = align8(e.offset + a.byteLength) - (e.offset + a.byteLength)
    if (pad > 0) parts.push(ZEROS.subarray(0, pad))
  }
  return parts
}

/**
 * The whole bundle's length in bytes, read from its first bytes once they hold the header (else
 * undefined): a reader of a bundle that arrives in pieces knows from it how much is coming. The
 * header is checked in full by decodeBundle; this only reads the arrays' extents.
 */
export function bundleByteLength(head: Uint8Array): number | undefined {
  if (head.byteLength < HEADER_BYTES) return undefined
  const view = new DataView(head.buffer, head.byteOffset, head.byteLength)
  if (view.getUint32(0, true) !== MAGIC) throw new BundleError('bundle: not a column bundle (bad magic)')
  const jsonLength = view.getUint32(8, true)
  if (head.byteLength < HEADER_BYTES + jsonLength) return undefined
  let parsed: { arrays?: ArrayEntry[] }
  try {
    parsed = JSON.parse(new TextDecoder().decode(head.subarray(HEADER_BYTES, HEADER_BYTES + jsonLength)))
  } catch (e) {
    throw new BundleError(`bundle: header is not JSON (${(e as Error).message})`)
  }
  let end = HEADER_BYTES + jsonLength
  for (const e of Array.isArray(parsed?.arrays) ? parsed.arrays : []) {
    const Ctor = Object.hasOwn(CONSTRUCTORS, e?.type) ? CONSTRUCTORS[e.type] : undefined
    if (Ctor && Number.isSafeInteger(e.offset) && Number.isSafeInteger(e.length)) end = Math.max(end, align8(e.offset + e.length * Ctor.BYTES_PER_ELEMENT))
  }
  return end
}

/** A bundle that does not decode: names what is wrong. */
export class BundleError extends Error {}

/** Decodes a bundle; the arrays are views into `buffer` (no copy). */
export function decodeBundle(buffer: ArrayBuffer): Bundle {
  if (buffer.byteLength < HEADER_BYTES) throw new BundleError(`bundle: ${buffer.byteLength} bytes is shorter than its header`)
  const view = new DataView(buffer)
  if (view.getUint32(0, true) !== MAGIC) throw new BundleError('bundle: not a column bundle (bad magic)')
  const version = view.getUint32(4, true)
  if (version !== VERSION) throw new BundleError(`bundle: format version ${version}, this build reads ${VERSION}`)
  const jsonLength = view.getUint32(8, true)
  if (HEADER_BYTES + jsonLength > buffer.byteLength) throw new BundleError('bundle: header runs past the end')
  let parsed: { meta: unknown; arrays: ArrayEntry[] }
  try {
    parsed = JSON.parse(new TextDecoder().decode(new Uint8Array(buffer, HEADER_BYTES, jsonLength)))
  } catch (e) {
    throw new BundleError(`bundle: header is not JSON (${(e as Error).message})`)
  }
  // The header is data from another process: every field is checked before use (fuzzed in
  // test/unit/property-bundle.test.ts), so that a damaged one is a BundleError and nothing else.
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new BundleError('bundle: header is not a JSON object')
  if (parsed.arrays !== undefined && !Array.isArray(parsed.arrays)) throw new BundleError('bundle: header field arrays is not a list')
  const arrays: Record<string, BundleArray> = {}
  for (const e of parsed.arrays ?? []) {
    if (typeof e !== 'object' || e === null) throw new BundleError('bundle: an array entry is not an object')
    if (typeof e.name !== 'string' || e.name === '__proto__' || Object.hasOwn(arrays, e.name))
      throw new BundleError(`bundle: array name ${JSON.stringify(e.name)} is not a fresh string`)
    const Ctor = Object.hasOwn(CONSTRUCTORS, e.type) ? CONSTRUCTORS[e.type] : undefined
    if (!Ctor) throw new BundleError(`bundle: array ${e.name} has unknown type ${e.type}`)
    if (!Number.isSafeInteger(e.length) || e.length < 0) throw new BundleError(`bundle: array ${e.name} has length ${e.length}`)
    const bytes = e.length * Ctor.BYTES_PER_ELEMENT
    if (!Number.isSafeInteger(e.offset) || e.offset < 0 || e.offset % 8 !== 0 || e.offset + bytes > buffer.byteLength)
      throw new BundleError(`bundle: array ${e.name} lies outside the bundle`)
    arrays[e.name] = new Ctor(buffer, e.offset, e.length)
  }
  return { meta: parsed.meta, arrays }
}
