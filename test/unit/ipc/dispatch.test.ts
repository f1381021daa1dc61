// The one dispatcher every host uses (src-main/ipc/dispatch.ts), on its own: a call reaches its
// handler only for a channel of the contract and an argument its schema accepts, and a refusal
// names the channel and each problem. The hosts' own tests (web-host*, ipc-router, worker-process)
// cover the same through their transports.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { BUNDLE_CHANNELS, CHANNELS, CONTRACT } from '../../../src-shared/contract.ts'
import { ArgumentError, dispatch, type Handlers } from '../../../src-main/ipc/dispatch.ts'
import { ApiError } from '../../../src-shared/api-error.ts'

describe('dispatch', () => {
  const seen: unknown[] = []
  const handlers: Partial<Handlers> = {
    'trace:openSample': (arg) => {
      seen.push(arg)
      return { jobId: 'j1' }
    },
    'app:info': () => Promise.reject(Object.assign(new Error('the native library is missing'), { code: 'INTERNAL' })),
  }

  it('hands a checked argument to its channel’s handler and returns what it returns', async () => {
    assert.deepEqual(await dispatch(handlers, 'trace:openSample', { name: 'a.pickle' }), { jobId: 'j1' })
    assert.deepEqual(seen, [{ name: 'a.pickle' }])
  })

  it('refuses names that are not channels, inherited property names included, and channels with no handler here', async () => {
    for (const name of ['no:such', 'toString', '__proto__', 'constructor', 42, undefined])
      await assert.rejects(
        dispatch(handlers, name as string, undefined),
        (e: ApiError) => e instanceof ApiError && e.code === 'NOT_FOUND' && /^no channel /.test(e.message),
        String(name),
      )
    await assert.rejects(dispatch(handlers, 'job:cancel', { jobId: 'j1' }), (e: ApiError) => e.code === 'NOT_FOUND' && /here$/.test(e.message))
  })

  it('refuses an argument its schema does not accept, naming the channel and each problem, before any handler runs', async () => {
    const refusals: [unknown, RegExp][] = [
      [undefined, /^trace:openSample: the argument must be a JSON object$/],
      [{ name: 7 }, /^trace:openSample: name must be a string$/],
      [{ name: 'a', extra: 1 }, /^trace:openSample: unexpected key "extra"$/],
      [{ name: '' }, /^trace:openSample: name: /],
    ]
    for (const [arg, message] of refusals)
      await assert.rejects(
        dispatch(handlers, 'trace:openSample', arg),
        (e: ArgumentError) => e instanceof ArgumentError && e.code === 'BAD_INPUT' && message.test(e.message) && !e.problems.startsWith('trace:openSample'),
      )
    await assert.rejects(dispatch(handlers, 'app:info', {}), /^Error: app:info: takes no argument$/)
    assert.equal(seen.length, 1, 'no refused call reached the handler')
  })

  it('passes a handler’s error on as it is', async () => {
    await assert.rejects(
      dispatch(handlers, 'app:info', undefined),
      (e: Error & { code?: string }) => e.code === 'INTERNAL' && e.message === 'the native library is missing',
    )
  })

  it('the channel list and the bundle channels come from the one table', () => {
    assert.deepEqual([...CHANNELS].sort(), Object.keys(CONTRACT).sort())
    assert.deepEqual([...BUNDLE_CHANNELS].sort(), ['replay:result', 'trace:data'])
  })
})
