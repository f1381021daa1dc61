// The limit a recording that ended in an out-of-memory implies, and the recorded settings replayed
// under it: taken from what the file says (reserved at the out-of-memory plus its device_free) where
// the device was full, and never below what the run reached as PyTorch's cap check counts it
// (reserved before a request plus its whole allocation size, also where an expandable segment maps
// only the pages its free tail lacks). Real addon, real replays of a snapshot written here.
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'

import { formatBytes } from '../../../../src-main/services/units.ts'
import { openInput } from '../../../../src-main/services/import/open-input.ts'
import { runWhatif } from '../../../../src-main/services/whatif/whatif.ts'
import { whatifWords } from '../../../../src-shared/whatif-report.ts'

const MiB = 2 ** 20
/** A large pool's expandable segment, aligned to its 20 MiB pages. */
const A = 20 * MiB * 65536
const PEAK = 1140 * MiB
/** Reserved at the out-of-memory: PyTorch's retry unmapped the one whole page of the free 30 MiB block. */
const AT_OOM = 1120 * MiB
/** What the 1005 MiB request's cap check counted: 140 MiB reserved plus its whole allocation size (1006 MiB, in 2 MiB). */
const CHECKED = (140 + 1006) * MiB

/**
 * An expandable segment grown three times, the third request (1005 MiB) served by a free 10 MiB
 * tail plus 1000 MiB mapped (so reserved rises by 5 MiB less than the request), then a 200 MiB
 * request that fails: PyTorch's release_cached_blocks unmaps the free block's whole page before
 * it records the out-of-memory with the device's free memory.
 */
function snapshot(deviceFree: number): string {
  const entry = (action: string, addr: number, size: number, t: number) => ({ action, addr, size, stream: 0, time_us: 1_700_000_000_000_000 + t, frames: [] })
  const trace = [
    entry('segment_map', A, 40 * MiB, 1),
    entry('alloc', A, 30 * MiB, 2),
    entry('segment_map', A + 40 * MiB, 100 * MiB, 3),
    entry('alloc', A + 30 * MiB, 100 * MiB, 4),
    entry('free_requested', A, 30 * MiB, 5),
    entry('free_completed', A, 30 * MiB, 6),
    entry('segment_map', A + 140 * MiB, 1000 * MiB, 7),
    entry('alloc', A + 130 * MiB, 1005 * MiB, 8),
    entry('segment_unmap', A, 20 * MiB, 9),
    { action: 'oom', device_free: deviceFree, size: 200 * MiB, stream: 0, time_us: 1_700_000_000_000_010, frames: [] },
  ]
  const block = (address: number, size: number, requested: number) => ({
    address,
    size,
    requested_size: requested,
    state: requested > 0 ? 'active_allocated' : 'inactive',
  })
  const segments = [
    {
      device: 0,
      address: A + 20 * MiB,
      total_size: AT_OOM,
      allocated_size: 1105 * MiB,
      active_size: 1105 * MiB,
      requested_size: 1105 * MiB,
      stream: 0,
      segment_type: 'large',
      segment_pool_id: [0, 0],
      is_expandable: true,
      frames: [],
      blocks: [
        block(A + 20 * MiB, 10 * MiB, 0),
        block(A + 30 * MiB, 100 * MiB, 100 * MiB),
        block(A + 130 * MiB, 1005 * MiB, 1005 * MiB),
        block(A + 1135 * MiB, 5 * MiB, 0),
      ],
    },
  ]
  const allocator_settings = {
    PYTORCH_CUDA_ALLOC_CONF: 'expandable_segments:True',
    max_split_size: -1,
    garbage_collection_threshold: 0,
    expandable_segments: true,
  }
  return JSON.stringify({ segments, device_traces: [trace], allocator_settings, external_annotations: [] })
}

const dir = mkdtempSync(join(tmpdir(), 'vramscope-implied-limit-'))
after(() => rmSync(dir, { recursive: true, force: true }))

async function lab(name: string, deviceFree: number) {
  const path = join(dir, `${name}.json`)
  writeFileSync(path, snapshot(deviceFree))
  const input = await openInput(path)
  return runWhatif(input, { confs: ['recorded'], search: false, concurrency: 1 })
}

describe('the limit a recorded out-of-memory implies', () => {
  it('a full device: the limit is reserved at the out-of-memory plus its device_free, and the recorded settings replay to the recorded peak', async () => {
    const r = await lab('device-full', 120 * MiB)
    assert.equal(r.implied?.source, 'device')
    assert.equal(r.limit.source, 'implied')
    assert.equal(r.limit.bytes, AT_OOM + 120 * MiB, 'reserved at the out-of-memory plus device_free')
    assert.equal(r.fidelity?.recordedPeakReserved, PEAK)
    assert.equal(r.fidelity?.replayedPeakReserved, PEAK, 'the recorded settings replayed: no page unmapped before the peak')
    assert.equal(r.rows[0]!.failures, 1, 'only the recorded out-of-memory fails again')
  })

  it('a per-process limit: at least what the cap check counted (reserved plus the whole allocation size), and the recorded settings replay to the recorded peak', async () => {
    const r = await lab('fraction', 4096 * MiB)
    assert.equal(r.implied?.source, 'fraction')
    assert.equal(r.implied?.lowBytes, CHECKED, 'reserved before the 1005 MiB request plus its 1006 MiB allocation size')
    assert.equal(r.limit.bytes, CHECKED)
    assert.equal(r.fidelity?.replayedPeakReserved, PEAK)
    assert.equal(r.rows[0]!.failures, 1, 'only the recorded out-of-memory fails again')
  })

  it('device_free plus reserved below what the run reached: the limit is what it reached, and the report says so', async () => {
    const r = await lab('below-reached', 10 * MiB)
    assert.equal(r.implied?.source, 'device')
    assert.equal(r.limit.bytes, CHECKED, 'never below what the run reached')
    assert.equal(r.fidelity?.replayedPeakReserved, PEAK)
    const notes = whatifWords(r, formatBytes).notes
    assert.ok(
      notes.some((n) => n.includes(formatBytes(AT_OOM + 10 * MiB)) && n.includes(formatBytes(CHECKED)) && /less than the run reached/.test(n)),
      notes.join('\n'),
    )
  })
})
