// `npm run serve`: the headless mode (the UI over HTTP on 127.0.0.1, for a GPU server reached
// through an SSH tunnel) comes with the web host and is not implemented yet. It exits 1: nothing
// is served, and a script that starts it must not believe otherwise.
console.error('vramscope serve: not implemented yet. The headless mode (the same UI in a browser, served on')
console.error('127.0.0.1 for a GPU server reached through an SSH tunnel) comes with the web host.')
console.error('Today: `npm start` shows what works, `npm test` runs the suites, `npm run bench` times the strategies.')
process.exit(1)
