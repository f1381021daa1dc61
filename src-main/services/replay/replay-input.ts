// Replays an opened input (trace file, snapshot, log) through strategies given as specs, the way
// the CLI and the app both want it: PyTorch-policy targets get the recorded segment placement
// when the input has one, so they reproduce PyTorch's own choices, and the results come back as
// the trace file stores them, ready to print, export or save.
import { isRecorded } from '../../../src-shared/compare.ts'
import { recordedRegionPlacement, regionAddresses, type OpenedInput } from '../import/open-input.ts'
import { replayTrace, toStrategyResult, type ReplayProgressInfo, type ReplayTarget } from './replay.ts'
import type { StrategySpec } from './strategy-spec.ts'
import type { StrategyResult } from '../../../src-shared/results.ts'

export interface ReplayInputOptions {
  /** Device memory cap in bytes for every strategy. */
  cap?: number
  /** Keep the layout events (to store them); off is faster when only figures are wanted. */
  layout?: boolean
  /** Give PyTorch-policy targets the recorded segment addresses (default true). */
  recordedPlacement?: boolean
  /** Reset strategies that support it (arena) at the trace's markers (default true). */
  resetAtMarkers?: boolean
  onProgress?: (progress: ReplayProgressInfo) => void
  signal?: AbortSignal
}

export interface ReplayedInput {
  results: StrategyResult[]
  /** Labels of the targets that ran with the recorded placement, and how many regions it held. */
  placed: { label: string; regions: number }[]
}

/** The caching strategy with PyTorch's policy: the one the recorded placement is meant for. */
export function usesPytorchPolicy(spec: Pick<StrategySpec, 'strategy' | 'params'>): boolean {
  return spec.strategy === 'caching' && spec.params['preset'] === 'pytorch'
}

function sameParams(a: Record<string, unknown>, b: Record<string, unknown>): boolean {
  const keys = new Set([...Object.keys(a), ...Object.keys(b)])
  for (const k of keys) if (String(a[k] ?? '') !== String(b[k] ?? '')) return false
  return true
}

/**
 * The recorded region addresses a target should replay at, so that a modelled strategy stands
 * beside its own recording with the same choices: PyTorch's segments for the PyTorch policy (a
 * snapshot's `pytorch (recorded)`), and a vramscope recording's regions for the same strategy with
 * the same parameters (`caching (recorded)` made with caching:preset=pytorch). Empty when none.
 */
export function placementFor(stored: readonly StrategyResult[], spec: Pick<StrategySpec, 'strategy' | 'params'>): bigint[] {
  if (usesPytorchPolicy(spec)) {
    const pytorch = recordedRegionPlacement(stored)
    if (pytorch.length > 0) return pytorch
  }
  const own = stored.find((s) => isRecorded(s) && s.strategy === spec.strategy && sameParams(s.params, spec.params))
  return regionAddresses(own)
}

export async function replayInput(input: OpenedInput, specs: readonly StrategySpec[], options: ReplayInputOptions = {}): Promise<ReplayedInput> {
  const placed: ReplayedInput['placed'] = []
  const targets = specs.map((spec): ReplayTarget => {
    const target: ReplayTarget = { label: spec.label, strategy: spec.strategy, params: spec.params }
    const placement = options.recordedPlacement === false ? [] : placementFor(input.strategies, spec)
    if (placement.length > 0) {
      target.regionPlacement = placement
      placed.push({ label: spec.label, regions: placement.length })
    }
    return target
  })
  const replayed = await replayTrace(input.trace, targets, {
    ...(options.cap !== undefined && { cap: options.cap }),
    layout: options.layout ?? false,
    ...(options.resetAtMarkers !== undefined && { resetAtMarkers: options.resetAtMarkers }),
    ...(options.onProgress && { onProgress: options.onProgress }),
    ...(options.signal && { signal: options.signal }),
  })
  return { results: replayed.map((r) => toStrategyResult(r, input.trace)), placed }
}
