// Typed arrays one after another: shared by the hosts (trace writer, importer, bundle encoder, trace
// reader) and the renderer (a bundle's header read as it arrives).

/** The parts, in order, in one new array made by `make` (for the total length). */
export function concatArrays<T extends Uint8Array | Uint32Array | Float64Array>(parts: readonly T[], make: (length: number) => T): T {
  const out = make(parts.reduce((n, p) => n + p.length, 0))
  let at = 0
  for (const p of parts) {
    out.set(p, at)
    at += p.length
  }
  return out
}

/** The parts concatenated into one new array; a single part comes back as it is unless `copy`. */
export function concatBytes(parts: readonly Uint8Array[], copy = false): Uint8Array {
  if (parts.length === 1 && !copy) return parts[0]!
  return concatArrays(parts, (n) => new Uint8Array(n))
}
