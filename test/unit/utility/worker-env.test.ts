// A worker process starts with glibc's malloc asked for transparent huge pages, added to what the
// user set, never replacing their own choice of that tunable.
import assert from 'node:assert/strict'
import { it } from 'node:test'

import { workerEnv } from '../../../src-main/utility/worker-env.ts'

it('adds glibc.malloc.hugetlb=1 to the worker environment, after any tunables the user set', () => {
  assert.equal(workerEnv({ PATH: '/bin' })['GLIBC_TUNABLES'], 'glibc.malloc.hugetlb=1')
  assert.equal(workerEnv({ PATH: '/bin' })['PATH'], '/bin')
  assert.equal(workerEnv({ GLIBC_TUNABLES: 'glibc.malloc.arena_max=2' })['GLIBC_TUNABLES'], 'glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1')
  assert.equal(workerEnv({ GLIBC_TUNABLES: '' })['GLIBC_TUNABLES'], 'glibc.malloc.hugetlb=1')
})

it("keeps the user's own setting of the same tunable", () => {
  assert.equal(workerEnv({ GLIBC_TUNABLES: 'glibc.malloc.hugetlb=0' })['GLIBC_TUNABLES'], 'glibc.malloc.hugetlb=0')
  assert.equal(
    workerEnv({ GLIBC_TUNABLES: 'glibc.malloc.arena_max=2:glibc.malloc.hugetlb=2' })['GLIBC_TUNABLES'],
    'glibc.malloc.arena_max=2:glibc.malloc.hugetlb=2',
  )
})
