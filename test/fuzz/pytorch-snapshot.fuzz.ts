// Jazzer.js target: the PyTorch snapshot importer, pickle and JSON (src-main/services/import:
// the fast pickle path pytorch-fast.ts, the restricted unpickler unpickle.ts and the snapshot
// mapper pytorch.ts) and the native decoder it tries first (native/core/snapshot_pickle.cpp, through
// the addon). The first input byte picks the options: bit 0 the general path only (the unpickler,
// where the fast path would take the input), bit 1 every device, bit 2 the bounded-memo pass
// (boundedAbove 0), bit 3 the JavaScript paths only (no native decoder); the rest is the file. A finding: any exception but a SnapshotImportError
// naming the file, or an import that does not hold together (checkPytorchImport).
// Built and run by scripts/fuzz-ts.sh.
import { parsePytorchSnapshot } from '../../src-main/services/import/pytorch.ts'
import { SnapshotImportError } from '../../src-main/services/import/snapshot-error.ts'
import { checkPytorchImport } from '../unit/helpers/reader-checks.ts'

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
      nativeDecoder: (flags & 8) === 0,
    })
  } catch (error) {
    if (error instanceof SnapshotImportError && error.file === FILE && error.message.startsWith(`${FILE}: `)) return
    throw error
  }
  checkPytorchImport(result)
}
