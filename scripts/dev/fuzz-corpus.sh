# Sourced by native/scripts/fuzz.sh and scripts/dev/fuzz-ts.sh: a kept fuzz corpus is one file of base64
# lines (small, diffable); libFuzzer wants a directory of inputs. Both go through node (always
# there: npm runs the fuzz scripts).

unpack() {  # file dir: each line an input named by its SHA-1
  node -e '
    const fs = require("fs"), path = require("path"), crypto = require("crypto")
    const [file, dir] = process.argv.slice(1)
    fs.mkdirSync(dir, { recursive: true })
    if (!fs.existsSync(file)) process.exit(0)
    for (const line of fs.readFileSync(file, "utf8").split("\n")) {
      if (!line.trim()) continue
      const bytes = Buffer.from(line.trim(), "base64")
      fs.writeFileSync(path.join(dir, crypto.createHash("sha1").update(bytes).digest("hex")), bytes)
    }' "$1" "$2"
}

pack() {  # dir file: sorted, so that a merge changes only the lines it adds or drops
  node -e '
    const fs = require("fs"), path = require("path")
    const [dir, file] = process.argv.slice(1)
    const lines = fs.readdirSync(dir).map((f) => fs.readFileSync(path.join(dir, f)).toString("base64")).sort()
    fs.writeFileSync(file, lines.join("\n") + "\n")' "$1" "$2"
}
