// Byte-array helpers for tests that build or damage files.

/** The parts one after another, always in a new array (callers go on to damage it in place). */
export function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0))
  let at = 0
  for (const p of parts) {
    out.set(p, at)
    at += p.length
  }
  return out
}
