// The fast lane (pickle-fast-lane.ts) declares again the opcodes it reads, so that they are literal
// case labels in its file; each must be the VM's opcode of that name (pickle-vm.ts, describeOpcode).
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'

import { describeOpcode } from '../../../../../src-main/services/import/pytorch/pickle-reader.ts'

const dir = join(import.meta.dirname, '..', '..', '..', '..', '..', 'src-main', 'services', 'import', 'pytorch')

/** NAME -> value of the `const enum Op` declared in a file. */
function opTable(file: string): Map<string, number> {
  const text = readFileSync(join(dir, file), 'utf8')
  const body = /^const enum Op \{\n([\s\S]*?)\n\}/m.exec(text)
  assert.ok(body !== null, `${file} declares const enum Op`)
  const table = new Map<string, number>()
  for (const line of body[1]!.split('\n')) {
    const m = /^\s+([A-Z_0-9]+) = (0x[0-9a-f]{2}),$/.exec(line)
    assert.ok(m !== null, `an opcode line in ${file}: ${line}`)
    table.set(m[1]!, Number(m[2]))
  }
  return table
}

describe("the fast lane's opcodes", () => {
  it('are each the VM opcode of the same name', () => {
    const vm = opTable('pickle-vm.ts')
    const fast = opTable('pickle-fast-lane.ts')
    assert.ok(fast.size >= 30, `the fast lane reads ${fast.size} opcodes`)
    for (const [name, value] of fast) {
      assert.equal(vm.get(name), value, `${name} in the VM's table`)
      assert.equal(describeOpcode(value), `${name} (0x${value.toString(16).padStart(2, '0')})`)
    }
  })

  it('are all used by the fast lane, and only those', () => {
    const text = readFileSync(join(dir, 'pickle-fast-lane.ts'), 'utf8')
    const used = new Set([...text.matchAll(/\bOp\.([A-Z_0-9]+)/g)].map((m) => m[1]!))
    assert.deepEqual([...opTable('pickle-fast-lane.ts').keys()].sort(), [...used].sort())
  })
})
