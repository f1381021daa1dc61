// On the GPU machine: the Node addon built on a machine without a GPU (CUDA compiled in, cudart
// static) loads there, finds the device, and drives every strategy on its real backing.
// Usage: node scripts/gpu/addon-smoke.cjs [path/to/vramscope.node]
'use strict'
const path = require('node:path')
const addon = require(path.resolve(process.argv[2] || 'build/Release/vramscope.node'))

const device = addon.cudaDeviceAvailable()
console.log('builtWithCuda', addon.builtWithCuda(), 'cudaDeviceAvailable', JSON.stringify(device))
if (!device.available) process.exit(1)
let failed = 0
for (const info of addon.strategies()) {
  const params =
    info.name === 'block_pool'
      ? { block_size: '1MiB', pool_size: '64MiB' }
      : info.name === 'buddy'
        ? { pool_size: '256MiB' }
        : info.name === 'arena' || info.name === 'vmm_growable'
          ? { reserve: '4GiB' }
          : info.name === 'device_bump'
            ? { capacity: '256MiB' }
            : {}
  try {
    const a = new addon.Allocator(info.name, params, info.cudaBacking, { capacity: 2 ** 31 })
    const blocks = []
    for (const n of [1, 4096, 100000, 1 << 20]) blocks.push(a.allocate(n, 0))
    const s = a.stats()
    for (const b of blocks) a.deallocate(b, 0)
    let typed = 'no error'
    try {
      a.deallocate(0x1234500n, 0)
    } catch (e) {
      typed = e.code
    }
    console.log(
      `${info.name.padEnd(13)} on ${info.cudaBacking.padEnd(11)} first block 0x${blocks[0].toString(16)}, ` +
        `requested ${s.requestedLive} B, reserved ${s.reservedLive} B; bad free -> ${typed}`,
    )
    if (typed !== 'INVALID_FREE') failed++
    a.dispose()
  } catch (e) {
    failed++
    console.log(`${info.name}: FAILED ${e.code || ''} ${e.message}`)
  }
}
console.log(failed === 0 ? 'addon smoke: all strategies ran on real memory' : `addon smoke: ${failed} failed`)
process.exit(failed === 0 ? 0 : 1)
