// Strategies to replay, as a user writes them on one line:
//   caching:preset=pytorch,slab,buddy:pool_size=4GiB:min_block=512
// Commas separate items. An item `name` or `name:key=value:key=value` starts a strategy; an item
// `key=value` adds a parameter to the strategy before it; any other item continues the previous
// parameter's value, so a size list reads as it does elsewhere: `slab:classes=256,1KiB,4KiB`.
// Brackets protect a value's own commas and colons: `caching:roundup_power2_divisions=[256:1,512:2]`.
// `pytorch:[PYTORCH_ALLOC_CONF]` is PyTorch's allocator under a configuration in PyTorch's syntax
// (the caching strategy's pytorch preset with the parameters it maps to), labelled with it.
// Every name and value is checked against the native library before anything runs. Deprecated
// spellings (caching:preset=seed, now pow2) are accepted with a one-line warning and read as the
// new name, so labels and results carry it.
import { Allocator, listStrategies, type StrategyInfo } from './allocators.ts'
import { InputError } from '../input-error.ts'
import { defaultLabel } from './replay.ts'
import { splitTopLevel } from '../../../src-shared/strategy-text.ts'
import { ConfError, confModel, formatPytorchConf, parsePytorchConf, shownValue } from '../../../src-shared/pytorch-conf.ts'

export interface StrategySpec {
  /** Unique among the specs: "caching (pytorch)", "buddy (pool_size=4GiB)". */
  label: string
  strategy: string
  /** As written; the library parses the values ("4GiB", "true"). */
  params: Record<string, string>
  /**
   * The PyTorch configuration the spec was written as (pytorch:[...], --conf), as PyTorch prints
   * it: replayed exactly so, never under a snapshot's recorded settings, even where it only
   * restates a default (expandable_segments:False) and so gives the model no parameter.
   */
  conf?: string
}

/** A bad --strategies value: names the item and what is wrong with it (the CLI exits 2). */
export class StrategySpecError extends InputError {
  constructor(source: string, item: string, problem: string) {
    super(source, item ? `'${shownValue(item)}'` : '', problem)
  }
}

function knownList(all: readonly StrategyInfo[]): string {
  return all.map((s) => s.name).join(', ')
}

/** Parameter values renamed: still accepted, read as the new name, with a warning. */
const renamedValues: readonly { strategy: string; key: string; from: string; to: string }[] = [{ strategy: 'caching', key: 'preset', from: 'seed', to: 'pow2' }]

/** Where parseStrategySpecs reports a deprecated spelling it accepted: one line on stderr. */
export function warnOnStderr(message: string): void {
  process.stderr.write(`vramscope: warning: ${message}\n`)
}

function paramList(info: StrategyInfo): string {
  return info.params.length > 0 ? `it takes: ${info.params.map((p) => p.name).join(', ')}` : 'it takes none'
}

/**
 * Parses one or more --strategies values (each may list several strategies) into checked specs.
 * `source` names the option in errors; `warn` receives a line for each deprecated spelling
 * accepted (default: stderr).
 */
export function parseStrategySpecs(values: readonly string[], source = '--strategies', warn: (message: string) => void = warnOnStderr): StrategySpec[] {
  const all = listStrategies()
  const specs: { strategy: StrategyInfo; params: Record<string, string>; label?: string; conf?: string }[] = []
  for (const value of values) {
    let lastParam: { spec: (typeof specs)[number]; key: string } | undefined
    for (const item of splitTopLevel(value, ',')) {
      if (item === '') throw new StrategySpecError(source, value, 'an empty item (two commas in a row, or a comma at an end)')
      const [head, ...rest] = splitTopLevel(item, ':')
      if (head === PYTORCH) {
        specs.push(pytorchSpec(source, item, rest, all))
        lastParam = undefined
        continue
      }
      const isAssignment = head!.includes('=')
      if (!isAssignment && (rest.length > 0 || all.some((s) => s.name === head))) {
        const info = all.find((s) => s.name === head)
        if (!info) throw new StrategySpecError(source, item, `unknown strategy '${head}' (known: ${knownList(all)})`)
        const spec = { strategy: info, params: {} as Record<string, string> }
        specs.push(spec)
        lastParam = undefined
        for (const assignment of rest) lastParam = addParam(source, item, spec, assignment)
      } else if (isAssignment) {
        const spec = specs.at(-1)
        if (!spec) throw new StrategySpecError(source, item, 'a parameter before any strategy (write strategy:key=value)')
        for (const assignment of [head!, ...rest]) lastParam = addParam(source, item, spec, assignment)
      } else {
        const info = lastParam && lastParam.spec.strategy.params.find((p) => p.name === lastParam!.key)
        if (!lastParam || info?.kind !== 'size_list') throw new StrategySpecError(source, item, `unknown strategy '${item}' (known: ${knownList(all)})`)
        lastParam.spec.params[lastParam.key] += `,${item}`
      }
    }
  }
  if (specs.length === 0) throw new StrategySpecError(source, '', `no strategy given (known: ${knownList(all)})`)
  const result: StrategySpec[] = specs.map((s) => ({
    label: s.label ?? '',
    strategy: s.strategy.name,
    params: s.params,
    ...(s.conf !== undefined && { conf: s.conf }),
  }))
  for (const spec of result) renameDeprecated(source, spec, warn)
  for (const spec of result) checkWithLibrary(source, spec)
  assignLabels(result)
  return result
}

function addParam(
  source: string,
  item: string,
  spec: { strategy: StrategyInfo; params: Record<string, string> },
  assignment: string,
): { spec: typeof spec; key: string } {
  const at = assignment.indexOf('=')
  if (at <= 0) throw new StrategySpecError(source, item, `'${assignment}' is not key=value`)
  const key = assignment.slice(0, at).trim()
  let value = assignment.slice(at + 1).trim()
  if (value.startsWith('[') && value.endsWith(']') && spec.strategy.params.find((p) => p.name === key)?.kind !== 'string') value = value.slice(1, -1)
  if (!spec.strategy.params.some((p) => p.name === key))
    throw new StrategySpecError(source, item, `strategy '${spec.strategy.name}' has no parameter '${key}' (${paramList(spec.strategy)})`)
  if (key in spec.params) throw new StrategySpecError(source, item, `parameter '${key}' given twice`)
  if (value === '') throw new StrategySpecError(source, item, `parameter '${key}' has no value`)
  spec.params[key] = value
  return { spec, key }
}

function renameDeprecated(source: string, spec: StrategySpec, warn: (message: string) => void): void {
  for (const r of renamedValues) {
    if (spec.strategy !== r.strategy || spec.params[r.key] !== r.from) continue
    spec.params[r.key] = r.to
    warn(`${source}: ${r.strategy}:${r.key}=${r.from} is deprecated, use ${r.key}=${r.to} (the same ${r.key})`)
  }
}

/**
 * The library is the one authority on parameter values (sizes, presets, ranges): build the
 * strategy once on a simulated device, where that costs nothing, and report what it refuses.
 */
function checkWithLibrary(source: string, spec: StrategySpec): void {
  const written = `${spec.strategy}${Object.entries(spec.params)
    .map(([k, v]) => `:${k}=${v}`)
    .join('')}`
  let allocator: Allocator | undefined
  try {
    allocator = new Allocator(spec.strategy, spec.params, 'simulated')
  } catch (e) {
    const code = (e as { code?: unknown }).code
    if (code === 'INVALID_ARGUMENT' || e instanceof TypeError || e instanceof RangeError) throw new StrategySpecError(source, written, (e as Error).message)
    // Anything else (out of memory for a huge pool on the default device...) is for the replay to
    // meet and report as a failure.
  } finally {
    allocator?.dispose()
  }
}

/**
 * `pytorch` or `pytorch:[PYTORCH_ALLOC_CONF]`: PyTorch's allocator under a configuration written in
 * PyTorch's own syntax (brackets keep its commas and colons), as the model's strategy and
 * parameters, labelled with the configuration as PyTorch prints it: `pytorch (max_split_size_mb:64)`.
 * Bare `pytorch` is the model with no settings of its own (a snapshot's recorded ones apply).
 */
const PYTORCH = 'pytorch'

function pytorchSpec(
  source: string,
  item: string,
  rest: string[],
  all: readonly StrategyInfo[],
): { strategy: StrategyInfo; params: Record<string, string>; label: string; conf?: string } {
  let text = ''
  let assignments = rest
  const bracketed = rest[0]?.startsWith('[') === true
  if (bracketed) {
    if (!rest[0]!.endsWith(']')) throw new StrategySpecError(source, item, "the configuration's brackets are not closed")
    text = rest[0]!.slice(1, -1)
    assignments = rest.slice(1)
  }
  let conf
  try {
    conf = parsePytorchConf(text)
  } catch (e) {
    if (e instanceof ConfError) throw new StrategySpecError(source, item, e.message)
    throw e
  }
  // garbage_collection_threshold is a fraction of the limit; with none given, of the simulated
  // device's 80 GiB.
  let model
  try {
    model = confModel(conf, 0, 80 * 2 ** 30)
  } catch (e) {
    if (e instanceof ConfError) throw new StrategySpecError(source, item, e.message)
    throw e
  }
  const spec = { strategy: all.find((s) => s.name === model.strategy)!, params: model.params }
  // The model's own parameters may follow (pytorch:[max_split_size_mb:64]:max_reserved=8GiB), and
  // replace what the configuration gave them.
  for (const a of assignments) {
    if (!a.includes('='))
      throw new StrategySpecError(source, item, 'write the configuration in brackets: pytorch:[max_split_size_mb:128,expandable_segments:True]')
    delete spec.params[a.slice(0, a.indexOf('=')).trim()]
    addParam(source, item, spec, a)
  }
  const printed = formatPytorchConf(conf)
  return { ...spec, label: printed === '' ? PYTORCH : `${PYTORCH} (${printed})`, ...(bracketed && { conf: printed }) }
}

/** Labels as replay gives them ("caching (pytorch)"), numbered where two would be the same. */
function assignLabels(specs: StrategySpec[]): void {
  const seen = new Map<string, number>()
  for (const spec of specs) {
    const label = spec.label || defaultLabel(spec.strategy, spec.params)
    const count = (seen.get(label) ?? 0) + 1
    seen.set(label, count)
    spec.label = count > 1 ? `${label} #${count}` : label
  }
}
