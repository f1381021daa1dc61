// Jazzer.js target: the PyTorch snapshot importer, pickle and JSON (src-main/services/import/pytorch/:
// the pickle reader's fast lane and general lane, and the snapshot mapper). The first input byte
// picks the options: bit 0 the general lane only (the unpickler, where the fast lane would take the
// input), bit 1 every device, bit 2 the bounded-memo pass (boundedAbove 0); the rest is the file.
// A finding: any exception but a SnapshotImportError naming the file, or an import that does not
// hold together (checkPytorchImport).
// Built and run by scripts/dev/fuzz-ts.sh.
import { parsePytorchSnapshot } from '../../src-main/services/import/pytorch/index.ts'
import { SnapshotImportError } from '../../src-main/services/import/pytorch/snapshot-error.ts'
import { checkPytorchImport } from '../helpers/reader-checks.ts'

const FILE = 'fuzz.snapshot'

export function fuzz(data: Buffer): void {
  if (data.length === 0) return
  const flags = data[0]!
  let result
  try {
    result = parsePytorchSnapshot(data.subarray(1), FILE, {
      generalPathOnly: (flags & 1) !== 0,
      device: flags & 2 ? 'all' : undefined,
      boundedAbove: flags & 4 ? 0 : undefined,
    })
  } catch (error) {
    if (error instanceof SnapshotImportError && error.file === FILE && error.message.startsWith(`${FILE}: `)) return
    throw error
  }
  checkPytorchImport(result)
}
