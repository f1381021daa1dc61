// A command line typed into the app's Record panel, split into words as a POSIX shell splits them
// (blanks between words; '...' literal; "..." with \" \\ \$ \` escaped; a backslash outside quotes
// takes the next character), with no expansion of any kind: no variables, globs, pipes or
// redirections, so what runs is exactly the words shown.

/** The words of `line`; throws an Error naming the problem for an unclosed quote or a trailing backslash. */
export function splitCommandLine(line: string): string[] {
  const words: string[] = []
  let word = ''
  let inWord = false
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!
    if (c === "'") {
      const end = line.indexOf("'", i + 1)
      if (end < 0) throw new Error(`an unclosed ' at character ${i + 1}`)
      word += line.slice(i + 1, end)
      inWord = true
      i = end
    } else if (c === '"') {
      inWord = true
      let j = i + 1
      for (; j < line.length && line[j] !== '"'; j++) {
        if (line[j] === '\\' && j + 1 < line.length && '"\\$`'.includes(line[j + 1]!)) j++
        word += line[j]
      }
      if (j >= line.length) throw new Error(`an unclosed " at character ${i + 1}`)
      i = j
    } else if (c === '\\') {
      if (i + 1 >= line.length) throw new Error('a backslash at the end, with nothing to escape')
      word += line[++i]
      inWord = true
    } else if (c === ' ' || c === '\t' || c === '\n') {
      if (inWord) words.push(word)
      word = ''
      inWord = false
    } else {
      word += c
      inWord = true
    }
  }
  if (inWord) words.push(word)
  return words
}
