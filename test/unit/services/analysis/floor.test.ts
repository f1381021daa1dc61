// The floor (services/analysis/floor.ts): the peak of live bytes as requested and as PyTorch rounds
// them, on traces whose figures are worked out by hand here, with the replay's rules for the odd
// events (an alloc of 0 B, an id allocated again while live, frees of ids not live).
import assert from 'node:assert/strict'
import { it } from 'node:test'

import { floorOf } from '../../../../src-main/services/analysis/floor.ts'
import { allocateEvents, EventKind } from '../../../../src-main/services/trace/model.ts'

type Row = ['alloc', number, number] | ['free', number] | ['oom', number] | ['marker']

function eventsOf(rows: Row[]) {
  const e = allocateEvents(rows.length)
  rows.forEach((r, i) => {
    e.kind[i] = EventKind[r[0]]
    if (r[0] === 'alloc') {
      e.id[i] = r[1]
      e.size[i] = r[2]
    } else if (r[0] === 'free') e.id[i] = r[1]
    else if (r[0] === 'oom') e.size[i] = r[1]
  })
  return { events: e }
}

it('the requested and the rounded peaks, each at its own event', () => {
  // Requested live: 1000, 4000, 3000, 3600, 3700: peak 4000 after event 1. Rounded to 512 B (at
  // least 512): 1024, 4096, 3072, 4096, 4608: peak 4608 after event 4.
  const floor = floorOf(
    eventsOf([
      ['alloc', 0, 1000],
      ['alloc', 1, 3000],
      ['free', 0],
      ['alloc', 2, 600],
      ['alloc', 3, 100],
      ['free', 1],
      ['free', 2],
      ['free', 3],
    ]),
  )
  assert.deepEqual(floor, { peakLiveBytes: 4000, peakLiveEvent: 1, peakLiveRoundedBytes: 4608, peakLiveRoundedEvent: 4 })
})

it('frees of ids never allocated or freed twice, markers and recorded out-of-memories hold no bytes', () => {
  const floor = floorOf(eventsOf([['free', 7], ['alloc', 0, 512], ['oom', 1 << 30], ['marker'], ['free', 0], ['free', 0], ['alloc', 1, 2048]]))
  assert.deepEqual(floor, { peakLiveBytes: 2048, peakLiveEvent: 6, peakLiveRoundedBytes: 2048, peakLiveRoundedEvent: 6 })
})

it('an id allocated again while live leaves its older block live to the end, as the replay does; 0 B holds nothing', () => {
  // 100 (512 rounded) stays live; the second block of id 0 (1000, 1024) is freed; then 0 B.
  const floor = floorOf(
    eventsOf([
      ['alloc', 0, 100],
      ['alloc', 0, 1000],
      ['free', 0],
      ['alloc', 0, 0],
      ['free', 0],
      ['alloc', 1, 200],
    ]),
  )
  assert.equal(floor.peakLiveBytes, 1100)
  assert.equal(floor.peakLiveRoundedBytes, 1536)
  const after = floorOf(
    eventsOf([
      ['alloc', 0, 100],
      ['alloc', 0, 1000],
      ['free', 0],
      ['alloc', 1, 1500],
    ]),
  )
  assert.equal(after.peakLiveBytes, 1600, 'the older 100 B block is still live')
  assert.equal(after.peakLiveRoundedBytes, 512 + 1536)
})

it('an empty trace has a floor of 0 and no event', () => {
  assert.deepEqual(floorOf(eventsOf([])), { peakLiveBytes: 0, peakLiveEvent: -1, peakLiveRoundedBytes: 0, peakLiveRoundedEvent: -1 })
})
