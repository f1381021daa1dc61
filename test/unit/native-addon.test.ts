// The addon itself: the loader, what it says about CUDA on this machine, the codes the TypeScript
// layer mirrors, and a raw call with wrong types (which must throw, never crash the process).
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { it } from 'node:test'

import { addonCandidates, loadNative } from '../../src-main/native.ts'
import {
  Allocator,
  BlockState,
  RunOpKind,
  RunOpStatus,
  builtWithCuda,
  cudaDeviceAvailable,
  listStrategies,
  traceOpNames,
  type NativeError,
} from '../../src-main/services/replay/allocators.ts'

const repoRoot = new URL('../..', import.meta.url)

it('loads the addon from build/Release, once', () => {
  const [path = ''] = addonCandidates()
  assert.ok(path.endsWith('build/Release/vramscope.node'), path)
  assert.ok(existsSync(path))
  assert.equal(loadNative(), loadNative())
})

it('says to run npm install when the addon is missing', () => {
  const child = spawnSync(process.execPath, ['--import', 'tsx', '-e', "import('./src-main/native.ts').then((m) => m.loadNative())"], {
    cwd: repoRoot,
    env: { ...process.env, VRAMSCOPE_ADDON: '/nonexistent/vramscope.node' },
    encoding: 'utf8',
  })
  assert.notEqual(child.status, 0)
  assert.match(child.stderr, /native addon is not built \(looked for \/nonexistent\/vramscope\.node\)\. Run `npm install`/)
})

it("mirrors the addon's runOps codes and block states", () => {
  const { runOpCodes } = loadNative()
  assert.deepEqual(runOpCodes.kinds, { ...RunOpKind })
  assert.deepEqual(runOpCodes.statuses, { ...RunOpStatus })
  const a = new Allocator(listStrategies()[0]!.name)
  a.allocate(4096)
  const states = new Set(a.walk().blocks.state)
  assert.ok(states.has(BlockState.live))
})

it('names every trace op', () => {
  const names = traceOpNames()
  for (const expected of ['alloc', 'free', 'free_pending', 'free_completed', 'map', 'unmap', 'failure', 'reset']) assert.ok(names.includes(expected), expected)
  assert.equal(new Set(names).size, names.length)
})

it('throws a coded TypeError, not a crash, when the raw addon gets wrong types', () => {
  const native = loadNative()
  const raw = new native.Allocator(listStrategies()[0]!.name, {}, 'simulated', {})
  for (const call of [() => raw.allocate('x' as never), () => raw.deallocate({} as never), () => raw.allocate(-1)]) {
    assert.throws(call, (error: NativeError) => error instanceof TypeError && error.code === 'INVALID_ARGUMENT')
  }
  assert.throws(
    () => raw.runOps({} as never),
    (error: NativeError) => error.code === 'INVALID_ARGUMENT' && /ops\.kind/.test(error.message),
  )
  assert.throws(
    () => new native.Allocator('nope', {}, 'simulated'),
    (error: NativeError) => error.code === 'INVALID_ARGUMENT',
  )
})

/** What CMake decided when it configured the addon (build/CMakeCache.txt). */
function addonCudaConfiguration(): { mode: string; compiler: string | undefined } | undefined {
  const cache = new URL('../../build/CMakeCache.txt', import.meta.url)
  if (!existsSync(cache)) return undefined
  const text = readFileSync(cache, 'utf8')
  const value = (key: string) => new RegExp(`^${key}:[A-Z]+=(.*)$`, 'm').exec(text)?.[1]
  const compiler = value('CMAKE_CUDA_COMPILER')
  return { mode: value('VRAMSCOPE_CUDA') ?? 'AUTO', compiler: compiler && !compiler.endsWith('NOTFOUND') ? compiler : undefined }
}

it('is built with CUDA exactly when CMake found a CUDA compiler, and finds nvcc where it is installed', (t) => {
  const config = addonCudaConfiguration()
  if (!config) return t.skip('build/CMakeCache.txt is absent: the addon was not built by npm install here')
  const cudaWanted = config.mode !== 'OFF' && config.compiler !== undefined
  assert.equal(builtWithCuda(), cudaWanted, `VRAMSCOPE_CUDA=${config.mode}, CUDA compiler ${config.compiler ?? 'not found'}`)
  const nvccOnPath = spawnSync('nvcc', ['--version']).status === 0
  if (nvccOnPath && config.mode !== 'OFF') assert.ok(config.compiler, 'nvcc is on PATH, so CMake should have found it')
})

it('does not link the CUDA driver, so it loads where there is none', (t) => {
  const readelf = spawnSync('readelf', ['-d', addonCandidates()[0]!], { encoding: 'utf8' })
  if (readelf.status !== 0) return t.skip('readelf is not available on this machine')
  assert.doesNotMatch(readelf.stdout, /NEEDED.*\[libcuda\.so/)
  assert.doesNotMatch(readelf.stdout, /NEEDED.*\[libcudart\.so/, 'cudart is linked statically')
})

it('reports whether a CUDA device can be used, and CUDA backings follow it', () => {
  const device = cudaDeviceAvailable()
  const strategy = listStrategies().find((s) => s.name === 'cuda_malloc') ?? listStrategies()[0]!
  if (!builtWithCuda()) {
    assert.equal(device.available, false)
    assert.match(device.reason ?? '', /no CUDA support/)
    assert.throws(
      () => new Allocator(strategy.name, {}, 'cuda_malloc'),
      (e: NativeError) => e.code === 'UNSUPPORTED',
    )
  } else if (!device.available) {
    assert.ok(device.reason.length > 0, 'a reason is given')
    for (const backing of ['cuda_malloc', 'cuda_vmm', 'cuda_async'] as const)
      assert.throws(
        () => new Allocator(strategy.name, {}, backing),
        (e: NativeError) => e.code === 'NO_CUDA_DEVICE' && /no CUDA device/.test(e.message),
        backing,
      )
  } else {
    // A GPU is here: a real cudaMalloc-backed allocator works end to end.
    assert.equal(device.reason, null)
    const a = new Allocator(strategy.name, {}, 'cuda_malloc')
    const address = a.allocate(1 << 20)
    assert.notEqual(address, 0n)
    assert.equal(a.stats().liveBlocks, 1)
    a.deallocate(address)
    a.dispose()
  }
})
