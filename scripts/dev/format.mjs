// `npm run format` / `npm run format:check`: Prettier over the TypeScript, JavaScript and Svelte
// sources (.prettierrc.json, .prettierignore), clang-format over native/'s C++ and CUDA
// (.clang-format). Both come from devDependencies (the clang-format package ships the binary; a
// clang-format on PATH is used where it has none for this platform).
//   node scripts/dev/format.mjs           rewrite the files in place
//   node scripts/dev/format.mjs --check   change nothing; list the files that differ, exit 1 if any
import { spawnSync } from 'node:child_process'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { arch, platform } from 'node:os'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
const check = process.argv.includes('--check')

const prettier = spawnSync(
  process.execPath,
  [join(root, 'node_modules', 'prettier', 'bin', 'prettier.cjs'), check ? '--check' : '--write', '--log-level', 'warn', '**/*.{ts,mts,cts,js,mjs,cjs,svelte}'],
  { cwd: root, stdio: 'inherit' },
)
if (prettier.error) console.error(`format: prettier did not run (${prettier.error.message}): npm install`)

function nativeSources(dir, out = []) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name)
    if (entry.isDirectory() && !entry.name.startsWith('build') && entry.name !== 'corpus') nativeSources(path, out)
    else if (entry.isFile() && /\.(c|cc|cpp|h|hpp|cu|cuh)$/.test(entry.name)) out.push(path)
  }
  return out
}

/** The clang-format binary: the npm package's for this platform, else the one on PATH. */
function clangFormat() {
  const bundled = join(root, 'node_modules', 'clang-format', 'bin', `${platform()}_${arch()}`, platform() === 'win32' ? 'clang-format.exe' : 'clang-format')
  return existsSync(bundled) ? bundled : 'clang-format'
}

const binary = clangFormat()
const files = nativeSources(join(root, 'native'))
let clangOk = true
if (check) {
  const differ = []
  for (const file of files) {
    const formatted = spawnSync(binary, ['--style=file', file], { cwd: root, maxBuffer: 64 << 20 })
    if (formatted.error || formatted.status !== 0) {
      console.error(`format: clang-format did not run on ${relative(root, file)} (${formatted.error?.message ?? formatted.stderr.toString().trim()})`)
      clangOk = false
      break
    }
    if (!formatted.stdout.equals(readFileSync(file))) differ.push(relative(root, file))
  }
  for (const file of differ) console.log(`[warn] ${file}`)
  if (differ.length > 0)
    console.log(`[warn] clang-format: ${differ.length} of ${files.length} native files differ from .clang-format. Run npm run format to fix.`)
  clangOk &&= differ.length === 0
} else {
  const run = spawnSync(binary, ['-i', '--style=file', ...files], { cwd: root, stdio: 'inherit' })
  if (run.error || run.status !== 0) {
    console.error(`format: clang-format failed (${run.error?.message ?? `exit ${run.status}`})`)
    clangOk = false
  }
}
process.exitCode = prettier.status === 0 && clangOk ? 0 : 1
