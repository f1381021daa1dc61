/**
 * The figures of a strategy's summary, by name: what the native replay reports
 * (native/index.d.ts ReplaySummary is these figures plus its arrays and flags), what the one
 * accounting derives for a recorded layout (services/analysis/layout-metrics.ts) and what a
 * recording adds (a workload's checks, the interposer's counts and latencies). StrategyResult
 * keeps them as numbers (src-shared/results.ts); a key outside SummaryKey is a compile error, so
 * the compiler names every figure a reader may ask for. Definitions: docs/architecture.md#metrics.
 */

/** Device calls by kind (the replay's `deviceCallDetail`, and `deviceCalls.<kind>` in a summary). */
export interface DeviceCalls {
  regionAlloc: number
  regionFree: number
  vaReserve: number
  vaRelease: number
  map: number
  unmap: number
  asyncAlloc: number
  asyncFree: number
  eventRecord: number
  synchronize: number
  total: number
}

/** The numeric figures of a native replay's summary. */
export interface ReplayFigures {
  events: number
  allocs: number
  frees: number
  markers: number
  /** oom events of the input (failures the program saw when recorded). */
  recordedFailures: number
  /** trim events replayed (the program released cached memory: torch.cuda.empty_cache). */
  trims: number
  peakRequested: number
  peakRequestedEvent: number
  peakRounded: number
  peakRoundedEvent: number
  /** Peak of reserved after each event; peakReservedEvent is the first event after which it was reached. */
  peakReserved: number
  peakReservedEvent: number
  /** The allocator's own high-water mark (also memory held for a moment inside one call). */
  reservedHighWater: number
  externalFragmentationAtPeak: number
  largestFreeBlockAtPeak: number
  freeBytesAtPeak: number
  internalWasteAtPeak: number
  /** Requests that did not fit; the first 16 event indices in firstFailures. */
  failures: number
  failedBytes: number
  deviceCalls: number
  resets: number
  droppedByReset: number
  freesOfDropped: number
  freesOfFailed: number
  unknownFrees: number
  /** Segments and live blocks of the target's initial state (0 when it started empty). */
  seededSegments: number
  seededBlocks: number
  reusedLiveIds: number
  zeroSizeAllocs: number
  fragmentationWalks: number
  walkedBlocks: number
  finalRequested: number
  finalRounded: number
  finalReserved: number
  liveBlocks: number
  /** How long this target took (not deterministic). */
  wallNs: number
  eventsPerSecond: number
}

/** The replay's flags, kept in a summary as 1 or 0, and its first failure's event (-1: none). */
type ReplayFlagKey = 'peakMeasuredByRerun' | 'stoppedAtFailure' | 'firstFailureEvent'

/** What the metrics of a recorded layout add: its layout events, and the one at its reserved peak. */
type RecordedLayoutKey = 'layoutEvents' | 'peakReservedLayoutEvent'

/** A workload recording's figures (services/record/workload-recorder.ts). */
type WorkloadKey = 'allocations' | 'steps' | 'verifiedBytes' | 'corruptedBytes' | 'outOfMemory' | 'gpuTimeNs'

/** An interposer recording's counts (services/import/intercept-converter.ts InterceptSummary) and host latencies. */
type InterceptKey =
  | 'records'
  | 'failedCalls'
  | 'liveAtEnd'
  | 'hostAllocations'
  | 'maps'
  | 'unmaps'
  | 'physicalCreated'
  | 'threads'
  | 'reorderedTimes'
  | 'nestedDriverCalls'
  | 'unwrappedProcAddresses'
  | `${'alloc' | 'free'}Latency${'Mean' | 'P50' | 'P99' | 'Max'}Ns`

/** Every figure a summary may hold. */
export type SummaryKey = keyof ReplayFigures | ReplayFlagKey | RecordedLayoutKey | WorkloadKey | InterceptKey | `deviceCalls.${keyof DeviceCalls}`

/** A strategy's summary: each figure it has, by name. A trace file may hold keys a newer version wrote; they read back as they are. */
export type StrategySummary = { [K in SummaryKey]?: number }
