// The counting half of `npm test` (scripts/dev/test.mjs): reads what each runner reports into passed /
// failed / skipped, so that the closing line counts every suite the same way. Pure functions of the
// runners' text; test/unit/scripts/test-report.test.ts feeds them fake outputs.

/**
 * ctest's counts from its output: the summary line (`83% tests passed, 1 tests failed out of 6`)
 * and the "did not run" list, whose entries (Skipped, Disabled) ctest counts among the passed.
 * Undefined when there is no summary line (ctest did not get to run the tests).
 */
export function ctestCounts(output) {
  const summary = [...output.matchAll(/^\s*\d+% tests passed, (\d+) tests? failed out of (\d+)/gm)].at(-1)
  if (summary === undefined) return undefined
  const failed = Number(summary[1])
  const total = Number(summary[2])
  let skipped = 0
  const notRun = /^The following tests did not run:\n((?:[ \t]+\d+ - .*\n?)*)/m.exec(output)
  if (notRun) skipped = notRun[1].split('\n').filter((line) => /\((Skipped|Disabled)\)\s*$/.test(line)).length
  return { passed: total - failed - skipped, failed, skipped }
}

/**
 * The node test runner's counts from its TAP output (the closing `# pass`, `# fail`, `# cancelled`,
 * `# skipped`, `# todo` lines). Cancelled tests (a hook or the file failed around them) count as
 * failed, todo tests as skipped. Undefined when the closing lines are missing.
 */
export function tapCounts(tap) {
  const count = (name) => {
    const all = [...tap.matchAll(new RegExp(`^# ${name} (\\d+)\\s*$`, 'gm'))]
    return all.length === 0 ? undefined : Number(all.at(-1)[1])
  }
  const pass = count('pass')
  const fail = count('fail')
  if (pass === undefined || fail === undefined) return undefined
  return { passed: pass, failed: fail + (count('cancelled') ?? 0), skipped: (count('skipped') ?? 0) + (count('todo') ?? 0) }
}

/**
 * Why a script skipped itself: native/scripts/fuzz.sh and scripts/dev/fuzz-ts.sh print
 * `== NAME: skipped, REASON` and exit 0 where they cannot run (no clang++, no Jazzer.js).
 */
export function skipReason(output) {
  return /^== [\w-]+: skipped, (.+)$/m.exec(output)?.[1]
}

/** The closing line of `npm test`. */
export function closingLine({ passed, failed, skipped }) {
  return `${passed} passed, ${failed} failed, ${skipped} skipped`
}
