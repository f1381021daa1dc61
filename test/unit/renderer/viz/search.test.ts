// Search in the renderer (src-renderer/viz/search.ts): what the box's text means, and that the
// blocks found in a real PyTorch snapshot replayed by the real addon are exactly those that hold
// the address, have the size, or were allocated by a stack with the frame text.
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { describe, it } from 'node:test'

import { filteredStackAt } from '../../../../src-renderer/viz/frames.ts'
import { liveBlocksAt } from '../../../../src-renderer/viz/model.ts'
import { parseBytes, parseQuery, searchBlocks, stepMatch } from '../../../../src-renderer/viz/search.ts'
import { rendererData } from '../../../helpers/renderer-data.ts'

const SNAPSHOT = join(import.meta.dirname, '..', '..', '..', 'fixtures', 'pytorch', 'convnet_varimg.pickle')

describe('search queries', () => {
  it('reads sizes in binary units, with or without the i, and rejects other words', () => {
    assert.equal(parseBytes('4096'), 4096)
    assert.equal(parseBytes('512 KiB'), 512 * 1024)
    assert.equal(parseBytes('1.5MiB'), 1.5 * 1024 * 1024)
    assert.equal(parseBytes('2g'), 2 * 1024 ** 3)
    assert.equal(parseBytes('3 MB'), 3 * 1024 ** 2)
    assert.equal(parseBytes('12 parsecs'), null)
    assert.equal(parseBytes('conv'), null)
  })

  it('tells addresses, sizes, comparisons and frame text apart', () => {
    assert.deepEqual(parseQuery('  '), { kind: 'empty' })
    assert.deepEqual(parseQuery('0x7F0000200'), { kind: 'address', address: 0x7f0000200 })
    assert.deepEqual(parseQuery('1MiB'), { kind: 'size', comparison: '=', bytes: 1024 ** 2 })
    assert.deepEqual(parseQuery('>=512KiB'), { kind: 'size', comparison: '>=', bytes: 512 * 1024 })
    assert.deepEqual(parseQuery('< 4096'), { kind: 'size', comparison: '<', bytes: 4096 })
    assert.deepEqual(parseQuery('conv2d'), { kind: 'frame', text: 'conv2d' })
    assert.deepEqual(parseQuery('> something'), { kind: 'frame', text: '> something' })
  })

  it('steps from the match the playhead is on, or from the playhead after it moved', () => {
    const events = [10, 20, 30]
    assert.equal(stepMatch(events, -1, 0, 1), 0)
    assert.equal(stepMatch(events, 0, 10, 1), 1)
    assert.equal(stepMatch(events, 2, 30, 1), 0, 'wraps after the last')
    assert.equal(stepMatch(events, 0, 10, -1), 2, 'wraps before the first')
    assert.equal(stepMatch(events, 0, 25, 1), 2, 'the playhead moved: the first match after it')
    assert.equal(stepMatch(events, 0, 25, -1), 1, 'the playhead moved: the last match before it')
    assert.equal(stepMatch(events, -1, 99, 1), 0, 'nothing after the playhead: wraps')
    assert.equal(stepMatch([], -1, 5, 1), -1)
  })
})

describe('search over a replayed PyTorch snapshot', async () => {
  const { trace, views } = await rendererData(SNAPSHOT, 'caching:preset=pytorch,buddy')
  const caching = views.find((v) => v.name.startsWith('caching'))!
  const b = caching.model.blocks
  const mid = Math.floor(trace.kind.length / 2)
  const someBlock = liveBlocksAt(caching.model, mid)[0]!

  it('an address finds every block that ever covered it, in allocation order', () => {
    const address = b.address[someBlock]! + Math.floor(b.size[someBlock]! / 2)
    const found = searchBlocks(caching.model, trace, parseQuery(`0x${address.toString(16)}`))
    assert.ok(found.includes(someBlock))
    for (const k of found) assert.ok(b.address[k]! <= address && address < b.address[k]! + b.size[k]!, `block ${k} covers the address`)
    for (let i = 1; i < found.length; i++) assert.ok(b.from[found[i - 1]!]! <= b.from[found[i]!]!)
    assert.equal(searchBlocks(caching.model, trace, parseQuery('0x1')).length, 0, 'no block lies at address 1')
  })

  it('a size comparison and its opposite split the blocks between them', () => {
    const big = searchBlocks(caching.model, trace, parseQuery('>=1MiB'))
    const small = searchBlocks(caching.model, trace, parseQuery('<1MiB'))
    assert.ok(big.length > 0 && small.length > 0, `${big.length} large and ${small.length} small blocks`)
    assert.equal(big.length + small.length, b.count)
    for (const k of big) assert.ok(b.requested[k]! >= 1024 ** 2)
    const exact = searchBlocks(caching.model, trace, parseQuery(String(b.requested[someBlock]!)))
    assert.ok(exact.includes(someBlock))
    for (const k of exact) assert.equal(b.requested[k], b.requested[someBlock])
  })

  it('frame text finds exactly the blocks whose shown frames name it, in any case', () => {
    const filtered = filteredStackAt(trace, b.from[someBlock]!)
    assert.ok(filtered && filtered.shown.length > 0, 'the snapshot recorded stacks')
    const text = trace.frames[filtered.headline]!.name
    const found = new Set(searchBlocks(caching.model, trace, parseQuery(text.toUpperCase())))
    assert.ok(found.has(someBlock))
    const needle = text.toLowerCase()
    for (let k = 0; k < b.count; k++) {
      const shown = filteredStackAt(trace, b.from[k]!)?.shown.map((s) => trace.frames[s.frame]!) ?? []
      const has = shown.some((f) => f.name.toLowerCase().includes(needle) || f.filename.toLowerCase().includes(needle))
      assert.equal(found.has(k), has, `block ${k}`)
    }
    assert.ok(found.size < b.count, `"${text}" does not name every allocation`)
  })
})
