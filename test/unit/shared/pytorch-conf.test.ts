// PYTORCH_ALLOC_CONF as PyTorch 2.11 reads it (src-shared/pytorch-conf.ts): every device option,
// both forms of roundup_power2_divisions, PyTorch's value checks as clear errors, printing back in
// the same syntax, the model's parameters, and the settings a real snapshot recorded.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'

import { ConfError, confLine, confModel, confOfSnapshotSettings, formatPytorchConf, parsePytorchConf, snapshotConf } from '../../../src-shared/pytorch-conf.ts'

const GiB = 2 ** 30

describe('parsePytorchConf', () => {
  it('reads every device option and prints it back in PyTorch syntax', () => {
    const text = 'expandable_segments:True,max_split_size_mb:128,max_non_split_rounding_mb:256,roundup_power2_divisions:4,garbage_collection_threshold:0.6'
    const conf = parsePytorchConf(text)
    assert.equal(conf.expandableSegments, true)
    assert.equal(conf.maxSplitSizeMb, 128)
    assert.equal(conf.maxNonSplitRoundingMb, 256)
    assert.equal(conf.roundupPower2Divisions, 4)
    assert.equal(conf.garbageCollectionThreshold, 0.6)
    assert.equal(formatPytorchConf(conf), text)
    assert.equal(formatPytorchConf(parsePytorchConf(formatPytorchConf(conf))), text)
  })

  it('reads the bracket form of roundup_power2_divisions, whitespace and a pasted shell line', () => {
    const conf = parsePytorchConf(`export PYTORCH_CUDA_ALLOC_CONF='roundup_power2_divisions: [256:1, 512:2, 1024:4, >:8]'`)
    assert.deepEqual(conf.roundupPower2Divisions, [
      { boundary: 256, divisions: 1 },
      { boundary: 512, divisions: 2 },
      { boundary: 1024, divisions: 4 },
      { boundary: '>', divisions: 8 },
    ])
    assert.equal(formatPytorchConf(conf), 'roundup_power2_divisions:[256:1,512:2,1024:4,>:8]')
    assert.equal(confLine(formatPytorchConf(conf)), `PYTORCH_ALLOC_CONF='roundup_power2_divisions:[256:1,512:2,1024:4,>:8]'`)
    assert.equal(confLine('expandable_segments:True'), 'PYTORCH_ALLOC_CONF=expandable_segments:True')
    assert.equal(confLine(''), 'unset PYTORCH_ALLOC_CONF')
  })

  it('keeps host-only settings as written and takes the empty string as the defaults', () => {
    const conf = parsePytorchConf('pinned_use_background_threads:True,max_split_size_mb:64')
    assert.deepEqual(conf.other, [['pinned_use_background_threads', 'True']])
    assert.equal(formatPytorchConf(conf), 'max_split_size_mb:64,pinned_use_background_threads:True')
    assert.equal(formatPytorchConf(parsePytorchConf('')), '')
  })

  it('refuses what PyTorch refuses, naming the item', () => {
    const refused: [string, RegExp][] = [
      ['max_split_size_mb:19', /max_split_size_mb too small, must be >= 20/],
      ['max_split_size_mb:1.5', /max_split_size_mb: '1.5' is not a whole number/],
      ['max_non_split_rounding_mb:10', /max_non_split_rounding_mb too small/],
      ['garbage_collection_threshold:1.0', /garbage_collection_threshold must be in \(0.0, 1.0\)/],
      ['roundup_power2_divisions:3', /power of 2/],
      ['roundup_power2_divisions:[300:2]', /intervals must be powers of 2/],
      ['roundup_power2_divisions:[256:2', /expected '\]'|expected ','/],
      ['expandable_segments:yes', /expected True or False/],
      ['max_split_size:128', /unknown setting 'max_split_size'/],
      ['max_split_size_mb', /expected ':'/],
      ['max_split_size_mb:64,max_split_size_mb:128', /given twice/],
      ['backend:cudaMalloc', /backend: expected native or cudaMallocAsync/],
    ]
    for (const [text, message] of refused)
      assert.throws(
        () => parsePytorchConf(text),
        (e: unknown) => e instanceof ConfError && message.test(e.message),
        text,
      )
  })
})

describe('confModel', () => {
  it('gives the PyTorch model its parameters, the limit as max_reserved', () => {
    const model = confModel(parsePytorchConf('max_split_size_mb:128,roundup_power2_divisions:[256:1,>:8],expandable_segments:True'), 8 * GiB, 80 * GiB)
    assert.equal(model.strategy, 'caching')
    assert.deepEqual(model.params, {
      preset: 'pytorch',
      max_split_size: '128MiB',
      roundup_power2_divisions: '256:1,>:8',
      expandable_segments: 'true',
      max_reserved: String(8 * GiB),
    })
  })

  it('makes garbage collection a fraction of the limit, or of the device without one', () => {
    assert.equal(confModel(parsePytorchConf('garbage_collection_threshold:0.6'), 0, 80 * GiB).params['max_reserved'], String(80 * GiB))
    assert.equal(confModel(parsePytorchConf('per_process_memory_fraction:0.5'), 0, 80 * GiB).params['max_reserved'], String(40 * GiB))
    assert.equal(confModel(parsePytorchConf(''), 0, 80 * GiB).params['max_reserved'], undefined)
    assert.equal(confModel(parsePytorchConf('backend:cudaMallocAsync'), 0, 80 * GiB).strategy, 'async_pool')
  })
})

describe('confOfSnapshotSettings', () => {
  it('reads the recorded string, or writes the values back as a configuration', () => {
    assert.equal(confOfSnapshotSettings(undefined), undefined)
    assert.equal(confOfSnapshotSettings({ PYTORCH_CUDA_ALLOC_CONF: 'max_split_size_mb:128' }), 'max_split_size_mb:128')
    // Values only: every interval of roundup_power2_divisions as PyTorch 2.11 reports it.
    const intervals: Record<string, number> = {}
    for (let i = 0; i < 16; i++) intervals[String(2 ** i)] = 2 ** i < 512 ? 1 : 2 ** i === 512 ? 2 : 2 ** i === 1024 ? 4 : 8
    const conf = confOfSnapshotSettings({
      max_split_size: -1,
      garbage_collection_threshold: 0,
      expandable_segments: false,
      roundup_power2_divisions: intervals,
    })
    assert.equal(conf, 'roundup_power2_divisions:[256:1,512:2,1024:4,>:8]')
    assert.equal(
      confOfSnapshotSettings({ max_split_size: 256 * 2 ** 20, garbage_collection_threshold: 0.6, roundup_power2_divisions: {} }),
      'max_split_size_mb:256,garbage_collection_threshold:0.6',
    )
  })

  it('agrees with the settings of every real recording in the what-if data set', () => {
    const dir = mkdtempSync(join(tmpdir(), 'vramscope-conf-'))
    after(() => rmSync(dir, { recursive: true, force: true }))
    execFileSync('tar', ['xzf', join(import.meta.dirname, '../../fixtures/pytorch/whatif-suite.tar.gz'), '-C', dir, '--wildcards', '*.stats.json'])
    let checked = 0
    for (const setting of ['default', 'msplit128', 'msplit64_rp4', 'rp8', 'rplist', 'nonsplit', 'gc06', 'expandable', 'expandable_msplit']) {
      const stats = JSON.parse(readFileSync(join(dir, 'whatif', `mlp_fragment__${setting}.stats.json`), 'utf8')) as {
        conf: string
        snapshot_allocator_settings: Record<string, unknown>
      }
      const fromString = confOfSnapshotSettings(stats.snapshot_allocator_settings)
      assert.equal(fromString, formatPytorchConf(parsePytorchConf(stats.conf)), setting)
      const { PYTORCH_CUDA_ALLOC_CONF: _, ...values } = stats.snapshot_allocator_settings
      // The values alone give the same configuration (max_non_split_rounding_mb is not among them).
      if (!stats.conf.includes('max_non_split_rounding_mb')) assert.equal(confOfSnapshotSettings(values), fromString, `${setting} from values`)
      checked++
    }
    assert.equal(checked, 9)
  })
})

describe('snapshotConf', () => {
  it('leaves out each recorded value PyTorch would refuse, naming the key and the value, and keeps the rest', () => {
    const got = snapshotConf({
      max_split_size: 2 ** 20,
      garbage_collection_threshold: 5.0,
      expandable_segments: true,
      roundup_power2_divisions: Object.fromEntries(Array.from({ length: 16 }, (_, i) => [String(2 ** i), 3])),
    })!
    assert.equal(got.conf, 'expandable_segments:True')
    assert.equal(got.refused.length, 3, got.refused.join('\n'))
    assert.match(got.refused[0]!, /^max_split_size = 1048576: max_split_size_mb too small/)
    assert.match(got.refused[1]!, /^garbage_collection_threshold = 5: /)
    assert.match(got.refused[2]!, /^roundup_power2_divisions = .*power of 2, got 3/)
    assert.match(snapshotConf({ max_split_size: 2 ** 70 })!.refused[0]!, /^max_split_size = 1180591620717411303424: /)
    assert.match(snapshotConf({ max_split_size: -4 * 2 ** 20 })!.refused[0]!, /^max_split_size = -4194304: /)
    // Unset is -1 (SIZE_MAX): nothing refused.
    assert.deepEqual(snapshotConf({ max_split_size: -1 }), { conf: '', refused: [] })
  })
  it('names a recorded configuration string PyTorch refuses, and reads the values instead', () => {
    const got = snapshotConf({ PYTORCH_CUDA_ALLOC_CONF: 'max_split_size_mb:1', max_split_size: -1, garbage_collection_threshold: 0.6 })!
    assert.equal(got.conf, 'garbage_collection_threshold:0.6')
    assert.match(got.refused[0]!, /^PYTORCH_CUDA_ALLOC_CONF = 'max_split_size_mb:1': max_split_size_mb too small/)
    // A newer PyTorch's key is no refusal: its values say what it parsed.
    assert.deepEqual(snapshotConf({ PYTORCH_ALLOC_CONF: 'some_future_key:1', garbage_collection_threshold: 0.6 }), {
      conf: 'garbage_collection_threshold:0.6',
      refused: [],
    })
  })
})

describe('numbers at their bounds', () => {
  it('refuses a whole number past 2^53 by name, echoing it as written (a bounded prefix of a long one)', () => {
    assert.throws(
      () => parsePytorchConf('max_split_size_mb:1000000000000000000000000000000'),
      /max_split_size_mb: '1000000000000000000000000000000' is more than 8589934591/,
    )
    const long = `max_split_size_mb:${'9'.repeat(10_000)}`
    assert.throws(
      () => parsePytorchConf(long),
      (e: unknown) => e instanceof ConfError && e.message.length < 200 && /\(10000 characters\)/.test(e.message),
    )
  })
  it('refuses a per_process_memory_fraction that leaves 0 B of the device', () => {
    assert.throws(() => confModel(parsePytorchConf('per_process_memory_fraction:1e-12'), 0, 85_017_493_504), /0 bytes/)
    assert.equal(confModel(parsePytorchConf('per_process_memory_fraction:0.5'), 0, 80 * GiB).params['max_reserved'], String(40 * GiB))
  })
})
