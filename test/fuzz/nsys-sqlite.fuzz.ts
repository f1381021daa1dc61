// Jazzer.js target: the Nsight Systems export importer (src-main/services/import/nsys.ts) over
// node:sqlite: the damage reaches SQLite's own reading of the file and then the import's checks of
// what it returns. The first input byte's low bit imports the busiest device (0) or device 1 (1);
// the rest is the database, written to a file of its own each run (SQLite reads files). A finding:
// any exception but an NsysSqliteError naming the file, or an import that does not hold together
// (checkNsys). Built and run by scripts/dev/fuzz-ts.sh.
import { mkdtempSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import type { Sqlite } from '../../src-main/services/import/nsys.ts'
import { nsysExpectedError, readNsysBytes } from '../helpers/nsys-fuzz-read.ts'

// Loaded as the bundle loads (Jazzer runs the target synchronously); its ExperimentalWarning goes to stderr.
const lib = createRequire(import.meta.url)('node:sqlite') as Sqlite
const dir = mkdtempSync(join(tmpdir(), 'vramscope-nsys-jazzer-'))
process.on('exit', () => rmSync(dir, { recursive: true, force: true }))

export function fuzz(data: Buffer): void {
  if (data.length === 0) return
  try {
    readNsysBytes(lib, dir, data.subarray(1), data[0]! & 1 ? 1 : 'all')
  } catch (error) {
    if (nsysExpectedError(error) !== undefined) return
    throw error
  }
}
