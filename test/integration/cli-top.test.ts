// `vramscope top`, run as a user runs it, on real PyTorch 2.11 snapshots recorded with the default
// stacks (C++ and Python frames): the peak's groups are named by the recording script's lines,
// not torch::unwind::unwind(); the groups add up to what was live and are largest first; --at oom
// (and refused on a snapshot without one), --at EVENT, --by tag/stream, --strategy (a replay's
// rounded blocks, or the recorded layout), the JSON contract, and bad options refused by name.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { fixture, shown, vramscope, vramscopeJson } from '../helpers/cli.ts'
import { realSnapshot } from '../helpers/real-snapshots.ts'

interface TopJson {
  file: string
  at: { event: number; time: number; reason: string; description: string; bytes: number; blocks: number; reserved?: number; oomBytes?: number }
  by: string
  counted: { kind: 'requests' } | { kind: 'layout'; name: string }
  groups: { key: string; bytes: number; blocks: number; share: number; frames: string[]; event: number }[]
}

function checkGroups(top: TopJson): void {
  assert.ok(top.groups.length > 0)
  assert.equal(
    top.groups.reduce((s, g) => s + g.bytes, 0),
    top.at.bytes,
    'the groups add up to what was live',
  )
  assert.equal(
    top.groups.reduce((s, g) => s + g.blocks, 0),
    top.at.blocks,
  )
  for (let i = 1; i < top.groups.length; i++) assert.ok(top.groups[i - 1]!.bytes >= top.groups[i]!.bytes, 'largest first')
  const share = top.groups.reduce((s, g) => s + g.share, 0)
  assert.ok(Math.abs(share - 1) < 1e-9, `shares add up to 1 (${share})`)
}

const HIDDEN = /unwind|CapturedTraceback|_PyEval|__libc_start_main|CUDACachingAllocator|at::_ops::|_call_impl|\?\?/

describe('vramscope top', () => {
  it('groups what was live at the recorded peak of GPT-2 training by the script line, not the unwinder', async () => {
    const top = await vramscopeJson<TopJson>(['top', realSnapshot('gpt2_varshape__default')])
    assert.equal(top.at.reason, 'peak')
    assert.match(top.at.description, /peak reserved of pytorch \(recorded\)/)
    assert.ok(top.at.reserved! >= top.at.bytes, 'what the program asked for fits in what was reserved')
    assert.deepEqual(top.counted, { kind: 'requests' })
    checkGroups(top)
    const first = top.groups[0]!
    assert.match(first.key, /^record_whatif_suite\.py:\d+ prog_gpt2_varshape$/, `the top group is the script's line: ${first.key}`)
    assert.ok(first.share < 1 && top.groups.length > 3, `${top.groups.length} groups`)
    for (const g of top.groups) {
      assert.ok(!/unwind/.test(g.key), g.key)
      assert.equal(g.frames[0] === undefined || !HIDDEN.test(g.frames.join('\n')), true, `${g.key}: ${g.frames.join(' | ')}`)
    }
    // The frames start with Python (the operation: torch/nn/modules/...), the headline among them.
    assert.ok(first.frames.includes(first.key))
    assert.match(first.frames[0]!, /\.py:\d+ /)
  })

  it('prints the groups with the frames under each, and says what it counted', async () => {
    const run = await vramscope(['top', realSnapshot('bert_train__default'), '--limit', '3'])
    assert.equal(run.code, 0, shown(run))
    assert.match(run.stdout, /at event [\d,]+ \(.*\): peak reserved of pytorch \(recorded\), .* reserved/)
    assert.match(run.stdout, /live in [\d,]+ blocks \(requested\), by frame/)
    assert.match(run.stdout, /allocated at \(first frame of your code\)/)
    assert.match(run.stdout, /record_whatif_suite\.py:\d+ prog_bert_train/)
    assert.match(run.stdout, /torch\/nn\/modules\/linear\.py:\d+ forward/)
    assert.match(run.stdout, /… \d+ more groups/)
    assert.doesNotMatch(run.stdout, /unwind|CapturedTraceback|_PyEval/)
  })

  it('--at oom: what was live when the recorded out-of-memory happened', async () => {
    const top = await vramscopeJson<TopJson>(['top', realSnapshot('oom_fraction__default'), '--at', 'oom'])
    assert.equal(top.at.reason, 'oom')
    assert.ok(top.at.oomBytes! > 0)
    checkGroups(top)
    assert.match(top.groups[0]!.key, /^record_whatif_suite\.py:\d+ prog_oom_fraction$/)
    // The failed request did not fit next to what was live under the 2 GiB fraction.
    assert.ok(top.at.bytes + top.at.oomBytes! > 1.5 * 1024 ** 3, `${top.at.bytes} live + ${top.at.oomBytes} asked`)
  })

  it('--at oom on a snapshot without one is refused, saying so', async () => {
    const run = await vramscope(['top', realSnapshot('convnet_varimg__default'), '--at', 'oom'])
    assert.equal(run.code, 2, shown(run))
    assert.match(run.stderr, /--at: oom: .* records no out-of-memory/)
  })

  it('--at EVENT: what was live after that event', async () => {
    const top = await vramscopeJson<TopJson>(['top', realSnapshot('convnet_varimg__default'), '--at', '50'])
    assert.equal(top.at.event, 50)
    assert.equal(top.at.reason, 'event')
    checkGroups(top)
    const run = await vramscope(['top', realSnapshot('convnet_varimg__default'), '--at', '99999999'])
    assert.equal(run.code, 2, shown(run))
    assert.match(run.stderr, /--at: event 99999999 is not in/)
  })

  it('--by stream and --by tag put everything in named groups', async () => {
    const streams = await vramscopeJson<TopJson>(['top', realSnapshot('multistream__expandable'), '--by', 'stream'])
    checkGroups(streams)
    assert.ok(streams.groups.every((g) => /^(stream |pending frees)/.test(g.key)))
    const tags = await vramscopeJson<TopJson>(['top', realSnapshot('convnet_varimg__default'), '--by', 'tag'])
    checkGroups(tags)
  })

  it("--strategy counts a replay's rounded blocks at its own peak; 'recorded' the snapshot's blocks", async () => {
    const replayed = await vramscopeJson<TopJson>(['top', realSnapshot('convnet_varimg__default'), '--strategy', 'caching:preset=pytorch'])
    assert.deepEqual(replayed.counted, { kind: 'layout', name: 'caching (pytorch)' })
    checkGroups(replayed)
    const requests = await vramscopeJson<TopJson>(['top', realSnapshot('convnet_varimg__default'), '--at', String(replayed.at.event)])
    assert.equal(replayed.at.blocks, requests.at.blocks, 'the same blocks are live')
    assert.ok(replayed.at.bytes >= requests.at.bytes, 'rounded sizes are at least the requests')
    const recorded = await vramscopeJson<TopJson>(['top', realSnapshot('convnet_varimg__default'), '--strategy', 'recorded'])
    assert.deepEqual(recorded.counted, { kind: 'layout', name: 'pytorch (recorded)' })
    checkGroups(recorded)
  })

  it('an RMM log has no frames and no recorded layout: the peak of requests, its out-of-memory', async () => {
    const top = await vramscopeJson<TopJson>(['top', fixture('rmm/with-failures.csv')])
    assert.equal(top.at.description, 'peak of requested bytes')
    checkGroups(top)
    assert.deepEqual(
      top.groups.map((g) => g.key),
      ['no frames recorded'],
    )
    const oom = await vramscopeJson<TopJson>(['top', fixture('rmm/with-failures.csv'), '--at', 'oom'])
    assert.equal(oom.at.reason, 'oom')
  })

  it('refuses bad options by name', async () => {
    for (const [args, message] of [
      [['--at', 'top'], /--at: 'top': give peak, oom or an event index/],
      [['--by', 'size'], /--by: 'size': give frame, tag, stream/],
      [['--strategy', 'nosuch'], /nosuch/],
      [['--strategy', 'recorded'], /--strategy: recorded: .* holds no recorded layout/],
    ] as const) {
      const run = await vramscope(['top', fixture('rmm/with-failures.csv'), ...args])
      assert.equal(run.code, 2, `${args.join(' ')}: ${shown(run)}`)
      assert.match(run.stderr, message)
    }
  })
})
