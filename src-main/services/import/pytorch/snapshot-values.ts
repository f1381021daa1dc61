// Reading a snapshot's values whichever form they came in (a PickleDict from the pickle reader,
// a plain object from JSON.parse), describing them in errors, and turning them into JSON-ready data
// for parameters and properties.
import { PickleDict } from './pickle-reader.ts'

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

/** allocator_settings as keys and JSON-ready values (none when it is not a dict). */
export function plainSettingsOf(settings: unknown): [string, unknown][] {
  return isDict(settings) ? entries(settings).map(([k, v]) => [String(k), plainJson(v)]) : []
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
function plainJson(value: unknown, depth = 0): unknown {
  if (depth > 20) return null
  if (value instanceof PickleDict) {
    // A loop, not spread and map: the allocator settings go through here on every import.
    const list: [string, unknown][] = []
    let indexKeys = true
    for (const [k, v] of value.entries()) {
      const key = String(k)
      list.push([key, plainJson(v, depth + 1)])
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
  if (Array.isArray(value)) return value.map((v) => plainJson(v, depth + 1))
  if (typeof value === 'bigint') return String(value)
  if (value instanceof Uint8Array) return Buffer.from(value).toString('hex')
  if (isDict(value)) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, plainJson(v, depth + 1)]))
  return value
}
