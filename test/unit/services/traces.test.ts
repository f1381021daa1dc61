// The trace registry (src-main/services/traces.ts): a page keeps its last few traces and the
// registry a few in all, the least recently used closed first (a use counts, a peek does not);
// DEFAULT_PAGE is bounded only in all; every close is told to onClose with its reason, and a later
// use of a closed trace fails NOT_FOUND saying why; closing a page closes its traces alone.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { ApiError } from '../../../src-shared/api-error.ts'
import type { TraceSummary } from '../../../src-shared/contract.ts'
import type { OpenedInput } from '../../../src-main/services/import/open-input.ts'
import { DEFAULT_PAGE, MAX_TRACES_OPEN, MAX_TRACES_PER_PAGE, TraceRegistry } from '../../../src-main/services/traces.ts'

/** A trace of `page` named `id`: the registry reads only its page. */
const opened = (id: string, page: string) => ({ summary: { traceId: id } as TraceSummary, input: {} as OpenedInput, page })

function registry(limits?: { perPage?: number; inAll?: number }) {
  const closes: string[] = []
  const traces = new TraceRegistry(limits, (id, reason) => closes.push(`${id}: ${reason}`))
  const admit = (id: string, page: string) => traces.admit(id, opened(id, page))
  return { traces, closes, admit }
}

describe('trace registry', () => {
  it('keeps MAX_TRACES_PER_PAGE traces a page and MAX_TRACES_OPEN in all by default', () => {
    assert.equal(MAX_TRACES_PER_PAGE, 3)
    assert.equal(MAX_TRACES_OPEN, 24)
    const { traces, closes, admit } = registry()
    for (let i = 0; i < 4; i++) admit(`a${i}`, 'A')
    assert.equal(traces.size, 3)
    assert.deepEqual(closes, ['a0: vramscope keeps at most 3 open traces a page (maxTracesPerPage) and this page opened newer ones'])
    for (let i = 0; i < 30; i++) admit(`d${i}`, DEFAULT_PAGE)
    assert.equal(traces.size, 24)
    assert.ok(closes.at(-1)!.endsWith('vramscope keeps at most 24 open traces in all (maxTracesOpen) and newer ones were opened'))
  })

  it("closes the page's least recently used trace first: a use counts, a peek does not", () => {
    const { traces, closes, admit } = registry({ perPage: 2 })
    admit('a', 'P')
    admit('b', 'P')
    traces.use('a')
    traces.peek('b')
    admit('c', 'P')
    assert.deepEqual(
      closes.map((c) => c.split(':')[0]),
      ['b'],
    )
    assert.equal(traces.peek('b'), undefined)
    assert.equal(traces.use('a').page, 'P')
    assert.equal(traces.peek('c')?.summary.traceId, 'c')
  })

  it("bounds DEFAULT_PAGE's traces only in all, and other pages' as well", () => {
    const { traces, closes, admit } = registry({ perPage: 1, inAll: 3 })
    admit('x', DEFAULT_PAGE)
    admit('y', DEFAULT_PAGE)
    assert.equal(traces.size, 2, 'the default page is not held to perPage')
    admit('p', 'P')
    admit('q', 'Q')
    assert.deepEqual(closes, ['x: vramscope keeps at most 3 open traces in all (maxTracesOpen) and newer ones were opened'])
    admit('p2', 'P')
    assert.equal(closes.at(-1), 'p: vramscope keeps at most 1 open traces a page (maxTracesPerPage) and this page opened newer ones')
    assert.equal(traces.size, 3)
  })

  it('a closed trace is NOT_FOUND saying why; one never opened says so; a second close does nothing', () => {
    const { traces, closes, admit } = registry()
    admit('t', 'P')
    assert.equal(traces.close('t', 'it was closed'), true)
    assert.equal(traces.close('t', 'again'), false)
    assert.deepEqual(closes, ['t: it was closed'])
    assert.throws(
      () => traces.use('t'),
      (e: ApiError) => e.code === 'NOT_FOUND' && e.message === 'trace: "t" was closed: it was closed; open the file again',
    )
    assert.throws(
      () => traces.use('never'),
      (e: ApiError) => e.code === 'NOT_FOUND' && e.message === 'trace: no open trace "never"',
    )
  })

  it("closing a page closes that page's traces alone, and counts them", () => {
    const { traces, closes, admit } = registry()
    admit('a', 'P')
    admit('b', 'P')
    admit('c', 'Q')
    assert.equal(traces.closePage('P', 'its page was closed'), 2)
    assert.deepEqual(closes, ['a: its page was closed', 'b: its page was closed'])
    assert.equal(traces.size, 1)
    assert.equal(traces.closePage('P', 'again'), 0)
    assert.equal(traces.peek('c')?.page, 'Q')
  })
})
