// Jazzer.js target: the RMM CSV log parser (src-main/services/import/rmm.ts). The first input byte
// picks how many bad lines the parser may skip (0 to 5); the rest is the log. A finding: any
// exception but an RmmLogError naming the file, or a trace that does not hold together (checkRmm).
// Built and run by scripts/dev/fuzz-ts.sh.
import { RmmLogError, parseRmmLog } from '../../src-main/services/import/rmm.ts'
import { checkRmm } from '../helpers/reader-checks.ts'

const FILE = 'fuzz.csv'

export function fuzz(data: Buffer): void {
  if (data.length === 0) return
  let result
  try {
    result = parseRmmLog(data.subarray(1), FILE, { maxBadLines: data[0]! % 6 })
  } catch (error) {
    if (error instanceof RmmLogError && error.file === FILE && error.message.startsWith(`${FILE}: `)) return
    throw error
  }
  checkRmm(result)
}
