// Starts workload-child.ts with plain Node, as bin/vramscope.mjs starts the CLI.
import { tsImport } from 'tsx/esm/api'

const recorder = await tsImport('./workload-child.ts', import.meta.url)
await recorder.main()
