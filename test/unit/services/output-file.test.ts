// Files written whole (output-file.ts): a writer killed with SIGKILL mid-write leaves its
// temporary `.partial` file behind; the next write of the same output removes the partials of
// writers that are dead, and keeps those of a writer still running.
import assert from 'node:assert/strict'
import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { after, before, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'

import { writeFileAtomically } from '../../../src-main/services/output-file.ts'

const child = fileURLToPath(new URL('../../helpers/output-writer-child.ts', import.meta.url))

let dir = ''
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'vramscope-output-'))
})
after(async () => {
  await rm(dir, { recursive: true, force: true })
})

/** A writer of `path` that has written its first piece to its temporary file and waits. */
async function startWriter(path: string): Promise<ChildProcess> {
  const writer = spawn(process.execPath, ['--import', 'tsx', child, path], { stdio: ['ignore', 'pipe', 'inherit'] })
  const [line] = (await once(createInterface({ input: writer.stdout! }), 'line')) as [string]
  assert.equal(line, 'writing')
  return writer
}

async function kill(writer: ChildProcess): Promise<void> {
  const exited = once(writer, 'exit')
  writer.kill('SIGKILL')
  await exited
}

const partials = async (name: string) => (await readdir(dir)).filter((f) => f.startsWith(`${name}.`) && f.endsWith('.partial')).sort()

describe('stale temporary files of killed writers', () => {
  it('kill -9 mid-write leaves a .partial; the next write of that output removes it, and leaves other outputs alone', { timeout: 60_000 }, async () => {
    const path = join(dir, 'trace.vramscope')
    await writeFile(path, 'an older file')
    const writer = await startWriter(path)
    const pid = writer.pid!
    await kill(writer)
    assert.deepEqual(await partials('trace.vramscope'), [`trace.vramscope.${pid}.partial`], 'the killed writer left its temporary file')
    assert.equal(await readFile(path, 'utf8'), 'an older file', 'the output is unchanged')
    // Another output's partial and a file that merely looks like one stay.
    await writeFile(join(dir, `other.vramscope.${pid}.partial`), 'not ours')
    await writeFile(join(dir, 'trace.vramscope.notes.partial'), 'not a writer')

    await writeFileAtomically(path, ['the new file'])
    assert.equal(await readFile(path, 'utf8'), 'the new file')
    assert.deepEqual(await partials('trace.vramscope'), ['trace.vramscope.notes.partial'], "the dead writer's partial is gone")
    assert.deepEqual(await partials('other.vramscope'), [`other.vramscope.${pid}.partial`])
  })

  it('the partial of a writer still running is kept', { timeout: 60_000 }, async () => {
    const path = join(dir, 'busy.vramscope')
    const writer = await startWriter(path)
    try {
      await writeFileAtomically(path, ['written beside it'])
      assert.deepEqual(await partials('busy.vramscope'), [`busy.vramscope.${writer.pid}.partial`])
      assert.equal(await readFile(path, 'utf8'), 'written beside it')
    } finally {
      await kill(writer)
    }
  })
})
