// The device a replay runs on, one rule for every side (docs/architecture.md, "The device"): the
// memory given, else what the file implies, else an assumed H100 80GB, and that choice in words,
// so that neither the CLI, the app nor the lab guesses a device's memory silently.

/** An H100 80GB's memory as cudaMemGetInfo reports it: the device assumed where a file implies none. */
export const ASSUMED_DEVICE = 'an H100 80GB'
/** Its memory in bytes (79.18 GiB). */
export const ASSUMED_DEVICE_BYTES = 85_017_493_504

/**
 * The device's memory and where it came from: given (`option`); named beside the file (`file`:
 * the stats record --pytorch writes with each snapshot, torch's total_memory); implied by the file, at least the
 * free memory plus reserved at a recorded out-of-memory (`oom`) or the recorded peak reserved
 * (`recorded-peak`); else `assumed`: an H100 80GB, the file naming no GPU.
 */
export interface Device {
  bytes: number
  source: 'option' | 'file' | 'oom' | 'recorded-peak' | 'assumed'
  /** Where `file`: the GPU's name and the file that names it (record --pytorch's NAME.stats.json beside a snapshot). */
  name?: string
  from?: string
}

/**
 * The device in words: "device: assumed an H100 80GB, 79.18 GiB (the file names no GPU; --gpu
 * sets it)". `deviceArgument` names where it is given (the CLI's --gpu, the app's field).
 */
export function deviceWords(d: Device, bytes: (n: number) => string, deviceArgument = '--gpu'): string {
  return d.source === 'option'
    ? `device: ${bytes(d.bytes)} (${deviceArgument})`
    : d.source === 'file'
      ? `device: ${d.name ? `${d.name}, ` : ''}${bytes(d.bytes)} (as ${d.from ?? 'the file'} names it; ${deviceArgument} sets another)`
      : d.source === 'oom'
        ? `device: ${d.name ? `${d.name}, ` : ''}at least ${bytes(d.bytes)}, the free memory plus reserved at the recorded out-of-memory (${d.name ? `${d.from ?? 'the file'} names the GPU` : 'the file names no GPU'}; ${deviceArgument} sets it)`
        : d.source === 'recorded-peak'
          ? `device: at least ${bytes(d.bytes)}, the recorded peak reserved (the file names no GPU; ${deviceArgument} sets it)`
          : `device: assumed ${ASSUMED_DEVICE}, ${bytes(d.bytes)} (the file names no GPU; ${deviceArgument} sets it)`
}
