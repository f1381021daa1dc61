// Reading a snapshot's values whichever form they came in (a PickleDict from the pickle reader,
// a plain object from JSON.parse), describing them in errors, and turning them into JSON-ready data
// for parameters and properties.
import { PickleDict } from './pickle-vm.ts'
import { SnapshotImportError } from './snapshot-error.ts'
import { KEY } from './snapshot-keys.ts'

export type Dict = PickleDict | Record<string, unknown>

export function isDict(value: unknown): value is Dict {
  return value instanceof PickleDict || (typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof Uint8Array))
}

export function field(dict: Dict, key: string): unknown {
  if (dict instanceof PickleDict) return dict.get(key)
  return Object.hasOwn(dict, key) ? dict[key] : undefined
}

export function describe(value: unknown): string {
  if (value === undefined) return 'missing'
  if (typeof value === 'bigint') return `${value}n`
  if (typeof value === 'string') return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}...` : value)
  if (value === null || typeof value !== 'object') return String(value)
  return Array.isArray(value) ? 'a list' : 'a dict'
}

/** The environment variable that raises ExpansionBudget's limit (a number of values). */
export const MAX_EXPANDED_ENV = 'VRAMSCOPE_MAX_EXPANDED_VALUES'
/** Values any snapshot may expand to, however small its file. */
const BASE_EXPANDED = 1 << 20
/** Values more per byte of the file: a real snapshot spends at least two bytes on each value it holds. */
const EXPANDED_PER_BYTE = 4

/**
 * How many values the import may visit in the snapshot's generic parts (allocator_settings, segments
 * and their blocks, frames lists looked up again), a value shared through the pickle's memo counted
 * each time it is visited: ten nested lists of ten references to one list are 300 bytes but 10^10
 * values. The limit grows with the file (BASE_EXPANDED + EXPANDED_PER_BYTE per byte), so no
 * snapshot Python writes reaches it; options.maxExpandedValues or VRAMSCOPE_MAX_EXPANDED_VALUES
 * sets it instead. spend() throws a SnapshotImportError (code 'limit') naming the limit and where.
 */
export class ExpansionBudget {
  readonly limit: number
  private left: number

  constructor(
    private readonly file: string,
    fileBytes: number,
    given?: number,
  ) {
    const fromEnv = Number(process.env[MAX_EXPANDED_ENV] ?? NaN)
    this.limit =
      given !== undefined && given > 0
        ? given
        : Number.isSafeInteger(fromEnv) && fromEnv > 0
          ? fromEnv
          : BASE_EXPANDED + EXPANDED_PER_BYTE * (Number.isFinite(fileBytes) ? fileBytes : 0)
    this.left = this.limit
  }

  /** Counts `n` values visited at `path` (e.g. "allocator_settings"), throwing once past the limit. */
  spend(n: number, path: string): void {
    this.left -= n
    if (this.left < 0)
      throw new SnapshotImportError(
        this.file,
        'limit',
        undefined,
        `the snapshot expands to more than ${this.limit} values (the limit for a file of this size; a pickle can repeat one value many times by reference); ` +
          `set ${MAX_EXPANDED_ENV} to raise it`,
        path,
      )
  }
}

/** allocator_settings as keys and JSON-ready values (none when it is not a dict); every value visited is spent from `budget`. */
export function plainSettingsOf(settings: unknown, budget: ExpansionBudget): [string, unknown][] {
  return isDict(settings) ? entries(settings).map(([k, v]) => [String(k), plainJson(v, budget)]) : []
}

export function entries(dict: Dict): [unknown, unknown][] {
  return dict instanceof PickleDict ? [...dict.entries()] : Object.entries(dict)
}

/** Whether an object takes this key as an array index: a canonical integer ('17', not '017' or '1e3') below 2^32 - 1. */
function isArrayIndex(key: string): boolean {
  const n = Number(key)
  return Number.isInteger(n) && n >= 0 && n < 4294967295 && String(n) === key
}

/** A snapshot value as JSON-ready data (for parameters and properties). */
function plainJson(value: unknown, budget: ExpansionBudget, depth = 0): unknown {
  budget.spend(1, KEY.allocatorSettings)
  if (depth > 20) return null
  if (value instanceof PickleDict) {
    // A loop, not spread and map: the allocator settings go through here on every import.
    const list: [string, unknown][] = []
    let indexKeys = true
    for (const [k, v] of value.entries()) {
      const key = String(k)
      list.push([key, plainJson(v, budget, depth + 1)])
      if (indexKeys && !isArrayIndex(key)) indexKeys = false
    }
    if (!indexKeys || list.length < 2) return Object.fromEntries(list)
    // Only array-index keys (torch's roundup_power2_divisions: '1' to '32768'), which an object
    // lists in numeric order however they were added: added from the largest, the object takes
    // sparse elements at once instead of growing an array to 32768 first (1.5 us, not 7). A stable
    // sort keeps a repeated key's last value last, as fromEntries does.
    list.sort((a, b) => Number(b[0]) - Number(a[0]))
    const object: Record<string, unknown> = {}
    for (const [k, v] of list) object[k] = v
    return object
  }
  if (Array.isArray(value)) return value.map((v) => plainJson(v, budget, depth + 1))
  if (typeof value === 'bigint') return String(value)
  if (value instanceof Uint8Array) return Buffer.from(value).toString('hex')
  if (isDict(value)) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, plainJson(v, budget, depth + 1)]))
  return value
}
