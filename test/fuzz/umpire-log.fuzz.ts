// Jazzer.js target: the Umpire replay log importer (src-main/services/import/umpire.ts, both forms).
// The first input byte's low bit imports every device (0) or DEVICE::1 alone (1); the rest is the
// log. A finding: any exception but an UmpireLogError naming the file, or an import that does not
// hold together (checkUmpire). Built and run by scripts/dev/fuzz-ts.sh.
import { UmpireLogError, parseUmpireLog } from '../../src-main/services/import/umpire.ts'
import { checkUmpire } from '../helpers/reader-checks.ts'

const FILE = 'fuzz.stats'

export function fuzz(data: Buffer): void {
  if (data.length === 0) return
  let result
  try {
    result = parseUmpireLog(data.subarray(1), FILE, { device: data[0]! & 1 ? 1 : 'all' })
  } catch (error) {
    if (error instanceof UmpireLogError && error.file === FILE && error.message.startsWith(`${FILE}: `)) return
    throw error
  }
  checkUmpire(result)
}
