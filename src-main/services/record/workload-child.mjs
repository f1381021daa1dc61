// Starts workload-child.ts with plain Node, as bin/vramscope.mjs starts the CLI.
import { tsImport } from 'tsx/esm/api'

await tsImport('./workload-child.ts', import.meta.url)
