// A writer for the stale-partial test (output-file.test.ts): starts writeFileAtomically on FILE,
// writes one piece, says "writing" once its temporary file holds it, then waits to be killed.
//   node --import tsx output-writer-child.ts FILE
import { resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

import { writeFileAtomically } from '../../src-main/services/output-file.ts'

async function* piecesThenWait(): AsyncGenerator<string> {
  yield 'the first piece of a file that never finishes\n'
  process.stdout.write('writing\n')
  await new Promise(() => setInterval(() => undefined, 1 << 30))
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const [path] = process.argv.slice(2)
  if (!path) throw new Error('usage: output-writer-child.ts FILE')
  void writeFileAtomically(path, piecesThenWait())
}
