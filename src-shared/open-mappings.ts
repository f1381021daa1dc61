/**
 * The mapped ranges of a layout open at one time (its `map` and `unmap` events: CUDA VMM granules
 * mapped into reserved address space), each with the reader's record: the renderer's model keeps a
 * region record per mapping (src-renderer/viz/model.ts), the one accounting of a layout its size
 * (src-shared/layout-accounting.ts). One rule for both: a map opens a mapping at its address (one
 * already open there stays open for good); an unmap ends every open mapping it touches, and the
 * reader opens again what stays mapped of each on either side.
 */
export class OpenMappings<T> {
  private readonly records = new Map<number, T>()
  /** Starts of the open mappings, ascending: an unmap finds the mappings it cuts by binary search. */
  private readonly starts: number[] = []

  /** `sizeOf`: the bytes a record's mapping spans. */
  constructor(private readonly sizeOf: (record: T) => number) {}

  open(address: number, record: T): void {
    if (!this.records.has(address)) this.starts.splice(this.firstStartAfter(address), 0, address)
    this.records.set(address, record)
  }

  /**
   * Ends each open mapping that [start, end) touches; `ended` hears each (its start, record and
   * end), in address order, and may open again what stays mapped of it outside the range.
   */
  unmap(start: number, end: number, ended: (address: number, record: T, mappingEnd: number) => void): void {
    // Mappings are disjoint: the one starting at or before `start` may reach into the range,
    // then every one starting before `end`.
    const first = Math.max(0, this.firstStartAfter(start) - 1)
    let last = first
    while (last < this.starts.length && this.starts[last]! < end) last++
    for (const address of this.starts.slice(first, last)) {
      const record = this.records.get(address)!
      const mappingEnd = address + this.sizeOf(record)
      if (mappingEnd <= start || address >= end) continue
      this.records.delete(address)
      this.starts.splice(this.firstStartAfter(address) - 1, 1)
      ended(address, record, mappingEnd)
    }
  }

  /** The index in `starts` of the first start above `address`. */
  private firstStartAfter(address: number): number {
    const starts = this.starts
    let lo = 0
    let hi = starts.length
    while (lo < hi) {
      const mid = (lo + hi) >>> 1
      if (starts[mid]! <= address) lo = mid + 1
      else hi = mid
    }
    return lo
  }
}
