// The configurations the Node tests run every strategy in, derived from what strategies() reports
// (so a strategy added to the library is tested without editing this file), and a check that an
// allocator's layout (walk) agrees with its stats and with the blocks a test holds.
import assert from 'node:assert/strict'

import { Allocator, BlockState, listStrategies, type StrategyParams } from '../../../../src-main/services/replay/allocators.ts'

export const MiB = 1024 * 1024
/** The simulated device of every test: small, so that exhaustion takes a few hundred requests. */
export const CAPACITY = 256 * MiB

export interface StrategyConfig {
  label: string
  strategy: string
  params: StrategyParams
}

const UNITS: Record<string, number> = { B: 1, K: 1024, KB: 1024, KIB: 1024, MIB: MiB, MB: MiB, GIB: 1024 * MiB, GB: 1024 * MiB, TIB: 1024 ** 4 }

/** "2MiB" -> 2097152; undefined for text that is not a size ("unlimited"). */
export function parseSize(text: string): number | undefined {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$/i.exec(text)
  if (!m) return undefined
  const unit = UNITS[(m[2] || 'B').toUpperCase()]
  return unit === undefined ? undefined : Math.round(Number(m[1]) * unit)
}

/**
 * Every strategy with sensible parameters for a CAPACITY-byte device: a size parameter whose
 * default is more than a quarter of the device (a 1 GiB pool, a 64 GiB reservation) is brought down
 * to a quarter, so that pools fit and can be exhausted. Presets other than the default run too.
 */
export function strategyConfigs(): StrategyConfig[] {
  const configs: StrategyConfig[] = []
  for (const info of listStrategies()) {
    // A strategy that plans a whole trace ahead (planned) takes no online requests: its own tests
    // replay traces through it (test/unit/services/replay/planned.test.ts).
    if (info.needsPlan) continue
    const params: StrategyParams = {}
    for (const p of info.params) {
      if (p.kind !== 'size') continue
      const value = parseSize(p.default)
      if (value !== undefined && value > CAPACITY / 4) params[p.name] = CAPACITY / 4
    }
    configs.push({ label: info.name, strategy: info.name, params })
    const preset = info.params.find((p) => p.name === 'preset')
    for (const name of preset ? presetNames(preset.description, preset.default) : [])
      configs.push({ label: `${info.name}.${name}`, strategy: info.name, params: { ...params, preset: name } })
  }
  return configs
}

function presetNames(description: string, defaultName: string): string[] {
  // The description lists presets as "pow2: ...; pytorch: ...".
  const names = description.split(';').map((part) => /^\s*([a-z0-9_]+):/i.exec(part)?.[1])
  return names.filter((name): name is string => name !== undefined && name !== defaultName)
}

export function makeAllocator(config: StrategyConfig): Allocator {
  return new Allocator(config.strategy, config.params, 'simulated', { capacity: CAPACITY })
}

/**
 * The layout must tile reserved memory and agree with stats; every block the test holds must be
 * a live block, 256 B aligned and at least as large as requested.
 */
export function checkLayout(allocator: Allocator, held: Map<bigint, number>): void {
  const stats = allocator.stats()
  const { regions, blocks } = allocator.walk()
  assert.equal(regions.address.length, regions.size.length)
  assert.equal(blocks.address.length, blocks.state.length)

  const mapped: { start: bigint; end: bigint }[] = []
  let mappedBytes = 0
  for (let i = 0; i < regions.address.length; i++) {
    if (!regions.mapped[i]) continue
    mappedBytes += regions.size[i]!
    mapped.push({ start: regions.address[i]!, end: regions.address[i]! + BigInt(regions.size[i]!) })
  }
  assert.equal(mappedBytes, stats.reservedLive, 'mapped regions sum to reservedLive')

  const order = Array.from(blocks.address.keys()).sort((a, b) => (blocks.address[a]! < blocks.address[b]! ? -1 : 1))
  const bytesByState = [0, 0, 0, 0]
  const countByState = [0, 0, 0, 0]
  const liveSize = new Map<bigint, number>()
  let blockBytes = 0
  let previousEnd = 0n
  for (const i of order) {
    const address = blocks.address[i]!
    const size = blocks.size[i]!
    const state = blocks.state[i]!
    assert.ok(address >= previousEnd, `block at 0x${address.toString(16)} overlaps the one before`)
    previousEnd = address + BigInt(size)
    assert.ok(
      mapped.some((r) => address >= r.start && previousEnd <= r.end),
      `block at 0x${address.toString(16)} lies inside a mapped region`,
    )
    assert.ok(state <= BlockState.unusable, `block state ${state} is known`)
    bytesByState[state]! += size
    countByState[state]! += 1
    blockBytes += size
    if (state === BlockState.live) liveSize.set(address, size)
  }
  assert.equal(blockBytes, mappedBytes, 'blocks tile the mapped regions')
  assert.equal(countByState[BlockState.live], stats.liveBlocks, 'live blocks')
  assert.equal(bytesByState[BlockState.live], stats.roundedLive, 'live bytes == roundedLive')
  assert.equal(countByState[BlockState.pending], stats.pendingBlocks, 'pending blocks')
  assert.equal(bytesByState[BlockState.pending], stats.pendingBytes, 'pending bytes')
  assert.equal(bytesByState[BlockState.free], stats.freeBytes, 'free bytes')
  assert.equal(bytesByState[BlockState.unusable], stats.unusableBytes, 'unusable bytes')
  assert.ok(stats.largestFreeBlock <= stats.freeBytes)

  assert.equal(held.size, stats.liveBlocks, 'the blocks the test holds are the live ones')
  let requested = 0
  for (const [address, size] of held) {
    requested += size
    assert.equal(address % 256n, 0n, `0x${address.toString(16)} is 256 B aligned`)
    const rounded = liveSize.get(address)
    assert.ok(rounded !== undefined, `0x${address.toString(16)} is a live block`)
    assert.ok(rounded >= size, `live block of ${rounded} B holds the ${size} B requested`)
  }
  assert.equal(requested, stats.requestedLive, 'requestedLive')
  assert.equal(stats.internalWaste, stats.roundedLive - stats.requestedLive)
}

/** Stats that must not change when a call fails (everything but the failure count). */
export function unchangedPart(stats: ReturnType<Allocator['stats']>): object {
  const { failures: _failures, ...rest } = stats
  return rest
}
