import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { describe, it } from 'node:test'

import { splitCommandLine } from '../../../../src-main/services/record/command-line.ts'

describe('splitCommandLine', () => {
  it('splits as a POSIX shell does, with no expansion', () => {
    const lines = [
      'python train.py --lr 1e-4',
      `torchrun --nproc-per-node 2 "my script.py" --name 'a b'`,
      String.raw`python -c "print(\"hi\")" a\ b`,
      `echo $HOME '*' "x\\$y" *.py`,
      '  spaced\t\twords  ',
      `''  ""  x`,
    ]
    const expected = [
      ['python', 'train.py', '--lr', '1e-4'],
      ['torchrun', '--nproc-per-node', '2', 'my script.py', '--name', 'a b'],
      ['python', '-c', 'print("hi")', 'a b'],
      ['echo', '$HOME', '*', 'x$y', '*.py'],
      ['spaced', 'words'],
      ['', '', 'x'],
    ]
    lines.forEach((line, i) => assert.deepEqual(splitCommandLine(line), expected[i], line))
    // The same words a real shell makes of the lines with nothing to expand in them.
    for (const line of [...lines.slice(0, 3), ...lines.slice(4)]) {
      const shell = spawnSync('sh', ['-c', `set -f; for w in ${line}; do printf '%s\\0' "$w"; done`], { encoding: 'utf8' })
      assert.equal(shell.status, 0, shell.stderr)
      assert.deepEqual(shell.stdout.split('\0').slice(0, -1), splitCommandLine(line), line)
    }
  })

  it('names an unclosed quote or a trailing backslash', () => {
    assert.throws(() => splitCommandLine(`python 'train.py`), /an unclosed ' at character 8/)
    assert.throws(() => splitCommandLine('python "train.py'), /an unclosed " at character 8/)
    assert.throws(() => splitCommandLine('python train.py \\'), /a backslash at the end/)
  })
})
