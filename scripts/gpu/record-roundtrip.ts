// Record -> file -> replay round trip (gpu-record.sh runs it on the GPU machine): a recording made by
// `vramscope record --workload W --strategy S` is replayed through S with the same parameters on the
// simulated backing, and every block must land where it landed on the GPU: the same region (in the
// order regions were reserved or mapped) at the same offset in it. Region bases differ (the driver chose them)
// unless the backing places regions at the recorded addresses, so offsets are what is compared.
//   node --import tsx scripts/gpu/record-roundtrip.ts RECORDING  -> JSON line; exit 1 on a difference
import { loadNative } from '../../src-main/native.ts'
import { readTrace } from '../../src-main/services/trace/file.ts'
import { LayoutOp } from '../../src-shared/layout.ts'

const file = process.argv[2]!
const { trace, strategies } = await readTrace(file)
const recorded = strategies.find((s) => s.name.endsWith('(recorded)') && s.layout)
if (!recorded) throw new Error(`${file}: no recorded layout`)
const l = recorded.layout!
// Strategies that reserve their address space when they are built (arena, vmm_growable) do it before
// the recorder's tracer is attached, so neither side has that va_reserve: their mappings, made as
// blocks need them and in the same order on both sides, place the blocks instead.
const regionOps = new Set<number>([LayoutOp.regionReserve, LayoutOp.vaReserve, LayoutOp.map])

interface Placed {
  region: number
  offset: bigint
}
function placements(op: ArrayLike<number>, address: ArrayLike<bigint>, size: ArrayLike<number>): Placed[] {
  const regions: { base: bigint; end: bigint }[] = []
  const out: Placed[] = []
  for (let i = 0; i < op.length; i++) {
    if (regionOps.has(op[i]!)) regions.push({ base: address[i]!, end: address[i]! + BigInt(size[i]!) })
    else if (op[i] === LayoutOp.alloc) {
      // The latest region holding the address: an earlier one there has been released or unmapped.
      let region = -1
      for (let r = regions.length - 1; r >= 0 && region < 0; r--) if (address[i]! >= regions[r]!.base && address[i]! < regions[r]!.end) region = r
      out.push({ region, offset: region >= 0 ? address[i]! - regions[region]!.base : address[i]! })
    }
  }
  return out
}

const native = loadNative()
const params = Object.fromEntries(Object.entries(recorded.params).map(([k, v]) => [k, String(v)]))
// Regions go where the driver put them, so policies that break ties by address (best fit by size,
// then address) choose as they did on the GPU.
const regionPlacement = BigUint64Array.from([...l.op.keys()].filter((i) => l.op[i] === LayoutOp.regionReserve).map((i) => l.address[i]!))
const [result] = await native.replay(
  { kind: trace.events.kind, id: trace.events.id, size: trace.events.size, stream: trace.events.stream, time: trace.events.time },
  [{ label: 'replay', strategy: recorded.strategy, params, simulated: { regionPlacement } }],
  { layout: true },
)
// A region the simulated backing could not put at its recorded address moves, and best fit by
// address may then choose another segment: name such regions, the likeliest cause of a difference.
const replayedRegions = [...result!.layout.op.keys()].filter((i) => result!.layout.op[i] === LayoutOp.regionReserve).map((i) => result!.layout.address[i]!)
const regionsNotAtRecordedAddress = [...regionPlacement.keys()]
  .filter((r) => replayedRegions[r] !== undefined && replayedRegions[r] !== regionPlacement[r])
  .map((r) => ({ region: r, recorded: `0x${regionPlacement[r]!.toString(16)}`, replayed: `0x${replayedRegions[r]!.toString(16)}` }))
const want = placements(l.op, l.address, l.size)
const got = placements(result!.layout.op, result!.layout.address, result!.layout.size)
let firstDifference = -1
for (let i = 0; i < Math.max(want.length, got.length); i++) {
  const a = want[i]
  const b = got[i]
  if (!a || !b || a.region !== b.region || a.offset !== b.offset) {
    firstDifference = i
    break
  }
}
const report = {
  file,
  strategy: recorded.strategy,
  params,
  recordedAllocs: want.length,
  replayedAllocs: got.length,
  identical: firstDifference < 0,
  firstDifference: firstDifference < 0 ? null : { index: firstDifference, recorded: want[firstDifference] ?? null, replayed: got[firstDifference] ?? null },
  regionsNotAtRecordedAddress,
}
console.log(JSON.stringify(report, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v)))
process.exitCode = report.identical ? 0 : 1
