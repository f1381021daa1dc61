// Jazzer.js target: the trace-file reader (Arrow IPC chunks, src-main/services/trace). The first
// input byte's low bit asks for every chunk's CRC-32 to be recomputed over the damaged bytes, so that
// libFuzzer's mutations reach the flatbuffer and Arrow decoding behind the checksum; the rest is the
// file. A finding: any exception but a TraceFileError naming the file, or a result that does not
// hold together (checkTraceContents). Built and run by scripts/dev/fuzz-ts.sh.
import { TraceFileError, decodeTrace } from '../../src-main/services/trace/file.ts'
import { checkTraceContents, fixChecksums } from '../helpers/reader-checks.ts'

const FILE = 'fuzz.vramscope'

export function fuzz(data: Buffer): void {
  if (data.length === 0) return
  const file = data[0]! & 1 ? fixChecksums(data.subarray(1)) : data.subarray(1)
  let contents
  try {
    contents = decodeTrace(file, FILE)
  } catch (error) {
    if (error instanceof TraceFileError && error.file === FILE && error.message.startsWith(`${FILE}: `)) return
    throw error
  }
  checkTraceContents(contents)
}
