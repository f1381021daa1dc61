// The strategy-list syntax (src-main/services/replay/strategy-spec.ts) for PyTorch's allocator in
// PyTorch's own syntax: `pytorch:[PYTORCH_ALLOC_CONF]`, with the model's parameters after it, and
// a bad configuration refused by name.
import assert from 'node:assert/strict'
import { it } from 'node:test'

import { parseStrategySpecs, StrategySpecError } from '../../../../src-main/services/replay/strategy-spec.ts'

it('reads pytorch:[conf] as the PyTorch model with those settings, labelled in PyTorch syntax', () => {
  const specs = parseStrategySpecs([
    'pytorch,pytorch:[max_split_size_mb:64,roundup_power2_divisions:[256:1,>:4]],pytorch:[expandable_segments:True]:max_reserved=8GiB,slab',
  ])
  assert.deepEqual(
    specs.map((s) => s.label),
    ['pytorch', 'pytorch (max_split_size_mb:64,roundup_power2_divisions:[256:1,>:4])', 'pytorch (expandable_segments:True)', 'slab'],
  )
  assert.deepEqual(specs[0]!.params, { preset: 'pytorch' })
  assert.deepEqual(specs[1]!.params, { preset: 'pytorch', max_split_size: '64MiB', roundup_power2_divisions: '256:1,>:4' })
  assert.deepEqual(specs[2]!.params, { preset: 'pytorch', expandable_segments: 'true', max_reserved: '8GiB' })
  // garbage collection is a fraction of the limit: the simulated device's 80 GiB unless given.
  assert.equal(parseStrategySpecs(['pytorch:[garbage_collection_threshold:0.6]'])[0]!.params['max_reserved'], String(80 * 2 ** 30))
  assert.equal(parseStrategySpecs(['pytorch:[garbage_collection_threshold:0.6]:max_reserved=2GiB'])[0]!.params['max_reserved'], '2GiB')
  assert.equal(parseStrategySpecs(['pytorch:[backend:cudaMallocAsync]'])[0]!.strategy, 'async_pool')
})

it('refuses a bad configuration, naming it', () => {
  for (const [text, message] of [
    ['pytorch:[max_split_size_mb:10]', /max_split_size_mb too small/],
    ['pytorch:[max_split_size:64]', /unknown setting 'max_split_size'/],
    ['pytorch:max_split_size_mb', /write the configuration in brackets/],
    ['pytorch:[max_split_size_mb:64', /brackets are not closed/],
    ['pytorch:[]:bogus=1', /has no parameter 'bogus'/],
  ] as const)
    assert.throws(
      () => parseStrategySpecs([text], '--strategies', () => undefined),
      (e: unknown) => e instanceof StrategySpecError && message.test((e as Error).message),
      text,
    )
})

it('keeps a PyTorch configuration as written, so a recorded setting never replaces one that only restates a default', async () => {
  const { withRecordedSettings } = await import('../../../../src-main/services/replay/replay-input.ts')
  const [spec] = parseStrategySpecs(['pytorch:[expandable_segments:False]'], '-s', () => {})
  assert.equal(spec!.conf, 'expandable_segments:False')
  // A trace recorded with expandable segments: the spec replays as written, without them.
  const trace = { meta: { source: 'test', warnings: [], properties: { 'pytorch.allocator.PYTORCH_ALLOC_CONF': 'expandable_segments:True' } } }
  const settled = withRecordedSettings(spec!, trace as never)
  assert.equal(settled.conf, undefined)
  assert.equal(settled.spec.params['expandable_segments'], undefined)
  // Bare `pytorch` names no configuration: the recorded one applies.
  const [bare] = parseStrategySpecs(['pytorch'], '-s', () => {})
  assert.equal(withRecordedSettings(bare!, trace as never).spec.params['expandable_segments'], 'true')
})

it('refuses a per_process_memory_fraction that leaves 0 B, naming the item', () => {
  assert.throws(
    () => parseStrategySpecs(['pytorch:[per_process_memory_fraction:1e-12]']),
    (e: unknown) => e instanceof StrategySpecError && /0 bytes/.test((e as Error).message),
  )
})
