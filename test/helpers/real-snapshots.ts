// Real PyTorch snapshots recorded with the default stacks (C++ and Python frames): the small ones
// committed in test/fixtures/pytorch/real/, the larger ones taken from whatif-suite.tar.gz into a
// temporary folder once per process.
import { execFileSync } from 'node:child_process'
import { existsSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

const FIXTURES = join(import.meta.dirname, '..', 'fixtures', 'pytorch')
let extracted: string | undefined

/** The path of `NAME.pickle` (e.g. "gpt2_varshape__default"): committed under real/, else from the suite's tarball. */
export function realSnapshot(name: string): string {
  const committed = join(FIXTURES, 'real', `${name}.pickle`)
  if (existsSync(committed)) return committed
  extracted ??= mkdtempSync(join(tmpdir(), 'vramscope-real-'))
  const path = join(extracted, 'whatif', `${name}.pickle`)
  if (!existsSync(path)) execFileSync('tar', ['xzf', join(FIXTURES, 'whatif-suite.tar.gz'), '-C', extracted, `whatif/${name}.pickle`])
  return path
}
