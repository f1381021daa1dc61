// Byte-array helpers for tests that build or damage files.
import { concatBytes } from '../../src-shared/bytes.ts'

/** The parts one after another, always in a new array (callers go on to damage it in place). */
export function concat(parts: Uint8Array[]): Uint8Array {
  return concatBytes(parts, true)
}
