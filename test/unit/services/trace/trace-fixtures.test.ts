// The committed sample trace files (test/fixtures/trace, made by make.ts) still read back as
// recorded in their *.expected.json: a change that breaks files already written fails here. The
// same files and expectations are what scripts/gpu/check_pyarrow.py checks with pyarrow.
import assert from 'node:assert/strict'
import { readFile } from 'node:fs/promises'
import { it } from 'node:test'
import { fileURLToPath } from 'node:url'

import { readTrace } from '../../../../src-main/services/trace/file.ts'
import { expectation } from '../../../fixtures/trace/make.ts'

for (const name of ['sample', 'sample-recording']) {
  it(`${name}.vramscope reads back as ${name}.expected.json says`, async () => {
    const path = fileURLToPath(new URL(`../../../fixtures/trace/${name}.vramscope`, import.meta.url))
    const expected = JSON.parse(await readFile(path.replace(/\.vramscope$/, '.expected.json'), 'utf8'))
    const actual = JSON.parse(JSON.stringify(expectation(await readTrace(path))))
    assert.deepEqual(actual, expected)
  })
}
