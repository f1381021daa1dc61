// The PyTorch snapshot's pickle reader, the entry point of its two parts:
//   - pickle-vm.ts: the restricted pickle VM (the general lane), a generic unpickler with its
//     opcodes, memo, stack and limits, which refuses every opcode that would import, call or
//     construct anything; and MemoReferenceScanner, its pre-pass over the memo reads;
//   - pickle-fast-lane.ts: the fast lane, which decodes a snapshot held whole in memory straight
//     into the mapper, and hands the VM its state where it gives up.
// The snapshot's keys are in snapshot-keys.ts.
export {
  DELIVERED,
  HandoffKind,
  LaneRestart,
  MemoReferenceScanner,
  MemoReferences,
  PickleDict,
  Unpickler,
  describeOpcode,
  dictPairs,
  unpickle,
  type DeliveredEvents,
  type HandoffValue,
  type LaneHandoff,
  type ListStream,
  type PickleValue,
  type UnpickleOptions,
} from './pickle-vm.ts'
export { MAX_BLOCK, decodeFast, decodeFastSteps, type DecodedEventSink, type FastDecoded, type FastRestart } from './pickle-fast-lane.ts'
