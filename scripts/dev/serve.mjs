// `npm run serve -- [FILE] [--host H] [--port P]`: the same as `npx vramscope serve`.
import { spawn } from 'node:child_process'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
const child = spawn(process.execPath, [join(root, 'bin', 'vramscope.mjs'), 'serve', ...process.argv.slice(2)], { cwd: root, stdio: 'inherit' })
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal))
child.on('exit', (code, signal) => process.exit(code ?? (signal ? 0 : 1)))
