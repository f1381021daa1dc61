// The device a replay runs on, one rule for every side (docs/architecture.md, "The device"): the
// memory given, else what the file implies, else an assumed H100 80GB, and that choice in words,
// so that neither the CLI, the app nor the lab guesses a device's memory silently.

/** An H100 80GB's memory as cudaMemGetInfo reports it: the device assumed where a file implies none. */
export const ASSUMED_DEVICE = 'an H100 80GB'
/** Its memory in bytes (79.18 GiB). */
export const ASSUMED_DEVICE_BYTES = 85_017_493_504

/**
 * The device's memory and where it came from: given (`option`); implied by the file, at least the
 * free memory plus reserved at a recorded out-of-memory (`oom`) or the recorded peak reserved
 * (`recorded-peak`); else `assumed`: an H100 80GB, the file naming no GPU.
 */
export interface Device {
  bytes: number
  source: 'option' | 'oom' | 'recorded-peak' | 'assumed'
}

/**
 * The device in words: "device: assumed an H100 80GB, 79.18 GiB (the file names no GPU; --gpu
 * sets it)". `deviceArgument` names where it is given (the CLI's --gpu, the app's field).
 */
export function deviceWords(d: Device, bytes: (n: number) => string, deviceArgument = '--gpu'): string {
  return d.source === 'option'
    ? `device: ${bytes(d.bytes)} (${deviceArgument})`
    : d.source === 'oom'
      ? `device: at least ${bytes(d.bytes)}, the free memory plus reserved at the recorded out-of-memory (the file names no GPU; ${deviceArgument} sets it)`
      : d.source === 'recorded-peak'
        ? `device: at least ${bytes(d.bytes)}, the recorded peak reserved (the file names no GPU; ${deviceArgument} sets it)`
        : `device: assumed ${ASSUMED_DEVICE}, ${bytes(d.bytes)} (the file names no GPU; ${deviceArgument} sets it)`
}
