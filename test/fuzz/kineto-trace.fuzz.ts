// Jazzer.js target: the torch.profiler (Kineto) trace importer (src-main/services/import/kineto.ts:
// the byte scanner and the memory events' checks). The first input byte picks the largest event
// accepted (256 bytes to 1 MiB, so that the size bound is reached); the rest is the trace. A
// finding: any exception but a KinetoTraceError naming the file, or an import that does not hold
// together (checkKineto). Built and run by scripts/dev/fuzz-ts.sh.
import { KinetoTraceError, parseKinetoTrace } from '../../src-main/services/import/kineto.ts'
import { checkKineto } from '../helpers/reader-checks.ts'

const FILE = 'fuzz.json'

export function fuzz(data: Buffer): void {
  if (data.length === 0) return
  let result
  try {
    result = parseKinetoTrace(data.subarray(1), FILE, { maxEventBytes: 256 << (data[0]! % 13) })
  } catch (error) {
    if (error instanceof KinetoTraceError && error.file === FILE && error.message.startsWith(`${FILE}: `)) return
    throw error
  }
  checkKineto(result)
}
