// The CLI's strategy-list syntax at its lowest level, with no native library behind it, so the
// renderer can use it too: splitting at top-level separators, outside brackets.

/** Splits at top-level separators (outside brackets), keeping empty items so they can be reported. */
export function splitTopLevel(text: string, separator: string): string[] {
  const parts: string[] = []
  let depth = 0
  let start = 0
  for (let i = 0; i < text.length; i++) {
    const c = text[i]
    if (c === '[' || c === '(' || c === '{') depth++
    else if ((c === ']' || c === ')' || c === '}') && depth > 0) depth--
    else if (c === separator && depth === 0) {
      parts.push(text.slice(start, i))
      start = i + 1
    }
  }
  parts.push(text.slice(start))
  return parts.map((p) => p.trim())
}
