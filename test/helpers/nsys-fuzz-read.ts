// One fuzz case of the Nsight Systems export import, for the seeded fuzzer (import-fuzz-targets.ts)
// and the Jazzer.js target (test/fuzz/nsys-sqlite.fuzz.ts): SQLite reads files, so the bytes are
// written to one and read from there, named fuzz.sqlite in the errors.
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'

import { NsysSqliteError, readNsysDatabase, type Sqlite } from '../../src-main/services/import/nsys.ts'
import { checkNsys } from './reader-checks.ts'

export function readNsysBytes(lib: Sqlite, dir: string, bytes: Uint8Array, device: number | 'all'): void {
  const path = join(dir, 'case.sqlite')
  writeFileSync(path, bytes)
  checkNsys(readNsysDatabase(lib, path, 'fuzz.sqlite', { device }))
}

/** The error's code where it is the import's typed error naming the file, else undefined (a finding). */
export const nsysExpectedError = (e: unknown): string | undefined =>
  e instanceof NsysSqliteError && e.file === 'fuzz.sqlite' && e.message.startsWith('fuzz.sqlite: ') ? e.code : undefined
