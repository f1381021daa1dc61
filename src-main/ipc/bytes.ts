// Byte arrays one after another: shared by the hosts (trace writer, importer, bundle encoder) and
// the renderer (a bundle's header read as it arrives).

/** The parts concatenated into one new array; a single part comes back as it is unless `copy`. */
export function concatBytes(parts: readonly Uint8Array[], copy = false): Uint8Array {
  if (parts.length === 1 && !copy) return parts[0]!
  const out = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0))
  let at = 0
  for (const p of parts) {
    out.set(p, at)
    at += p.byteLength
  }
  return out
}
