// npm test's closing line counts what each runner reports (scripts/dev/test-report.mjs): ctest's
// summary with its skipped tests, node:test's TAP counts, and the scripts that skip themselves.
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'

// @ts-expect-error: a plain .mjs script, without types
import { closingLine, ctestCounts, skipReason, tapCounts } from '../../../../scripts/dev/test-report.mjs'

// What ctest 3.25 printed for 5 tests: 2 passed, 1 failed, 1 skipped (SKIP_RETURN_CODE), 1 not run (no binary).
const CTEST = `Test project /tmp/ct/build
    Start 1: pass1
1/5 Test #1: pass1 ............................   Passed    0.00 sec
...
60% tests passed, 2 tests failed out of 5

Label Time Summary:
CPU    =   0.12 sec*proc (5 tests)

Total Test time (real) =   0.14 sec

The following tests did not run:
\t  4 - skip1 (Skipped)

The following tests FAILED:
\t  3 - fail1 (Failed)
\t  5 - notrun (Not Run)
Errors while running CTest
`

describe("npm test's counting", () => {
  test('ctest: skipped tests leave the passed count, failed and not-run tests are failures', () => {
    assert.deepEqual(ctestCounts(CTEST), { passed: 2, failed: 2, skipped: 1 })
    assert.deepEqual(ctestCounts('100% tests passed, 0 tests failed out of 42\n\nTotal Test time (real) =  30.1 sec\n'), { passed: 42, failed: 0, skipped: 0 })
    assert.equal(ctestCounts('No tests were found!!!\n'), undefined, 'no summary: nothing counted (the exit status makes it a failure)')
  })

  test('node:test TAP: pass, fail + cancelled, skipped + todo', () => {
    const tap = 'TAP version 13\nok 1 - a\n# tests 9\n# suites 2\n# pass 5\n# fail 1\n# cancelled 1\n# skipped 1\n# todo 1\n# duration_ms 10\n'
    assert.deepEqual(tapCounts(tap), { passed: 5, failed: 2, skipped: 2 })
    assert.equal(tapCounts('TAP version 13\nnot ok 1 - a\n'), undefined)
  })

  test('a script that cannot run says why, and that is a skip', () => {
    assert.equal(
      skipReason('== fuzz: skipped, no clang++ (libFuzzer comes with clang: apt-get install clang)\n'),
      'no clang++ (libFuzzer comes with clang: apt-get install clang)',
    )
    assert.equal(
      skipReason('== fuzz-ts: skipped, @jazzer.js/core is not installed (a devDependency: npm install)\n'),
      '@jazzer.js/core is not installed (a devDependency: npm install)',
    )
    assert.equal(skipReason('== fuzz: allocator_ops: 120 kept inputs\n== fuzz passed in 45 s\n'), undefined)
  })

  test('the closing line', () => {
    assert.equal(closingLine({ passed: 812, failed: 0, skipped: 6 }), '812 passed, 0 failed, 6 skipped')
  })
})
