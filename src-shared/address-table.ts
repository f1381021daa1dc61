// Open blocks by address, as the renderer's model builder (src-renderer/viz/model.ts) and the
// host's layout cut (src-shared/wire.ts, layoutAt) read a layout.

/**
 * Open blocks by address: an open-addressing table over typed arrays. A Map keyed by addresses
 * above 2^31 boxes every key; a trace's million allocs and frees made that most of the model's
 * build time. Callers pass each address with its hash (hashOf, from the address's 32-bit halves
 * as the layout holds them); the table keeps the hashes, so probing, deleting and growing do no
 * floating-point arithmetic.
 */
export class AddressTable {
  private keys: Float64Array
  private values: Int32Array
  private hashes: Uint32Array
  private mask: number
  /** 32 minus log2 of the capacity: a multiplicative hash's well-mixed bits are its top ones. */
  private shift: number
  size = 0
  constructor(capacity = 1024) {
    let n = 1024
    while (n < capacity * 2) n *= 2
    this.keys = new Float64Array(n).fill(-1)
    this.values = new Int32Array(n)
    this.hashes = new Uint32Array(n)
    this.mask = n - 1
    this.shift = 32 - Math.log2(n)
  }
  get(address: number, hash: number): number {
    const keys = this.keys
    for (let i = hash >>> this.shift; ; i = (i + 1) & this.mask) {
      const k = keys[i]!
      if (k === address) return this.values[i]!
      if (k === -1) return -1
    }
  }
  set(address: number, hash: number, value: number): void {
    if ((this.size + 1) * 2 > this.keys.length) this.grow()
    const keys = this.keys
    for (let i = hash >>> this.shift; ; i = (i + 1) & this.mask) {
      const k = keys[i]!
      if (k === address) {
        this.values[i] = value
        return
      }
      if (k === -1) {
        keys[i] = address
        this.values[i] = value
        this.hashes[i] = hash
        this.size++
        return
      }
    }
  }
  /** Removes an address; backward-shift deletion keeps every probe chain unbroken. */
  delete(address: number, hash: number): void {
    const keys = this.keys
    const values = this.values
    const hashes = this.hashes
    const mask = this.mask
    const shift = this.shift
    let i = hash >>> shift
    for (; ; i = (i + 1) & mask) {
      const k = keys[i]!
      if (k === -1) return
      if (k === address) break
    }
    this.size--
    for (let j = (i + 1) & mask; keys[j] !== -1; j = (j + 1) & mask) {
      const home = hashes[j]! >>> shift
      // Entry j may move to the hole at i if its home slot is not within (i, j] cyclically.
      if (((j - home) & mask) >= ((j - i) & mask)) {
        keys[i] = keys[j]!
        values[i] = values[j]!
        hashes[i] = hashes[j]!
        i = j
      }
    }
    keys[i] = -1
  }
  forEachValue(visit: (value: number) => void): void {
    for (let i = 0; i < this.keys.length; i++) if (this.keys[i] !== -1) visit(this.values[i]!)
  }
  clear(): void {
    this.keys.fill(-1)
    this.size = 0
  }
  private grow(): void {
    const keys = this.keys
    const values = this.values
    const hashes = this.hashes
    this.keys = new Float64Array(keys.length * 2).fill(-1)
    this.values = new Int32Array(keys.length * 2)
    this.hashes = new Uint32Array(keys.length * 2)
    this.mask = this.keys.length - 1
    this.shift--
    this.size = 0
    for (let i = 0; i < keys.length; i++) if (keys[i] !== -1) this.set(keys[i]!, hashes[i]!, values[i]!)
  }
}

/** An address's hash for AddressTable, from its low and high 32 bits (blocks are at least 256-byte aligned: the bits above that and the high word). */
export function hashOf(low: number, high: number): number {
  return Math.imul((low >>> 8) ^ Math.imul(high, 0x85ebca6b), 0x9e3779b1) >>> 0
}

/** An address's hash for AddressTable from its u32 word (src-shared/wire.ts, AddressWords): every piece of a layout reads its words alike. */
export function hashOfWord(word: number): number {
  return Math.imul(word, 0x9e3779b1) >>> 0
}
