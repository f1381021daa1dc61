// The renderer's count of the strategies a spec names, to hold a map pane for each while their
// replays run. The host parses and checks specs (src-main/services/replay/strategy-spec.ts); this only
// counts, with the same splitter, and a unit test holds it to the host's parser.
import { splitTopLevel } from '../../src-shared/strategy-text.ts'

/**
 * How many strategies a spec in the CLI's syntax names: items at top-level commas that start a
 * strategy (`name:key=value`, or a bare known name), not a `key=value` item nor a size list's
 * value continuing the item before.
 */
export function strategiesNamed(spec: string, known: readonly string[]): number {
  let count = 0
  for (const item of splitTopLevel(spec, ',')) {
    const [head, ...rest] = splitTopLevel(item, ':')
    if (!head!.includes('=') && (rest.length > 0 || known.includes(head!))) count++
  }
  return count
}
