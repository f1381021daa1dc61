// Preloaded (NODE_OPTIONS=--require) into every Jazzer.js process of scripts/dev/fuzz-ts.sh. The
// linux-x64 libFuzzer addon that @jazzer.js/fuzzer 4.0 ships was built against glibc 2.38 and
// GCC 13's libstdc++, for three symbols only: __isoc23_strtol and __isoc23_strtoul (the C23 strtol
// of newer glibc headers) and std::ios_base_library_init (named by GCC 13's <iostream> so that the
// linker pulls in libstdc++'s stream setup, never called). Debian 12 has glibc 2.36 and GCC 12, so
// the stock addon fails to load. This hook loads, instead, a copy in build/fuzz-ts/ whose ELF
// tables bind the first two to plain strtol/strtoul (the same functions but for C23's 0b prefix,
// which libFuzzer's flag parsing never sees) and mark the GLIBC_2.38 and GLIBCXX_3.4.32 version
// needs weak. Where the stock addon loads, it is used as it is.
'use strict'
const fs = require('node:fs')
const path = require('node:path')
const Module = require('node:module')

const patchedDir = path.join(__dirname, '..', '..', 'build', 'fuzz-ts')
const loadNode = Module._extensions['.node']

Module._extensions['.node'] = function (module, filename) {
  if (!/[\\/]@jazzer\.js[\\/]fuzzer[\\/].*fuzzer-linux-x64\.node$/.test(filename)) return loadNode(module, filename)
  try {
    return loadNode(module, filename)
  } catch (error) {
    if (!/GLIBC_2\.38|GLIBCXX_3\.4\.32/.test(String(error && error.message))) throw error
    // Written afresh by each process (it is small) under a name of its own, loaded, then removed:
    // never stale, and never half written by a process that starts meanwhile (libFuzzer's merge).
    const patched = path.join(patchedDir, `fuzzer-linux-x64.glibc236.${process.pid}.node`)
    fs.mkdirSync(patchedDir, { recursive: true })
    fs.writeFileSync(patched, withoutNewerVersions(fs.readFileSync(filename), filename))
    try {
      return loadNode(module, patched)
    } finally {
      fs.rmSync(patched, { force: true })
    }
  }
}

/** The ELF64 little-endian shared object, its C23 strtol pair rebound and the two newer versions made weak. */
function withoutNewerVersions(elf, name) {
  const out = Buffer.from(elf)
  const fail = (why) => {
    throw new Error(`jazzer-addon.cjs: cannot adapt ${name} to this glibc: ${why}`)
  }
  if (out.readUInt32BE(0) !== 0x7f454c46 || out[4] !== 2 || out[5] !== 1) fail('not a 64-bit little-endian ELF file')
  const shoff = Number(out.readBigUInt64LE(0x28))
  const shentsize = out.readUInt16LE(0x3a)
  const shnum = out.readUInt16LE(0x3c)
  const sections = []
  for (let i = 0; i < shnum; i++) {
    const at = shoff + i * shentsize
    sections.push({
      type: out.readUInt32LE(at + 4),
      offset: Number(out.readBigUInt64LE(at + 0x18)),
      size: Number(out.readBigUInt64LE(at + 0x20)),
      link: out.readUInt32LE(at + 0x28),
    })
  }
  const dynsym = sections.find((s) => s.type === 11) // SHT_DYNSYM
  const versym = sections.find((s) => s.type === 0x6fffffff) // SHT_GNU_versym
  const verneed = sections.find((s) => s.type === 0x6ffffffe) // SHT_GNU_verneed
  if (!dynsym || !versym || !verneed) fail('no dynamic symbol or version tables')
  const dynstr = sections[dynsym.link]
  const string = (offset) => {
    const start = dynstr.offset + offset
    return out.toString('latin1', start, out.indexOf(0, start))
  }

  // Version needs: the indices of GLIBC_2.38 and GLIBCXX_3.4.32 (made weak) and of GLIBC_2.2.5
  // (the base x86-64 version, which the strtol pair is bound to).
  let v238 = -1
  let v432 = -1
  let v225 = -1
  for (let need = verneed.offset, more = true; more;) {
    const count = out.readUInt16LE(need + 2)
    let aux = need + out.readUInt32LE(need + 8)
    for (let k = 0; k < count; k++) {
      const version = string(out.readUInt32LE(aux + 8))
      const index = out.readUInt16LE(aux + 6)
      if (version === 'GLIBC_2.38') {
        v238 = index
        out.writeUInt16LE(out.readUInt16LE(aux + 4) | 2, aux + 4) // VER_FLG_WEAK
      } else if (version === 'GLIBCXX_3.4.32') {
        v432 = index
        out.writeUInt16LE(out.readUInt16LE(aux + 4) | 2, aux + 4)
      } else if (version === 'GLIBC_2.2.5') v225 = index
      aux += out.readUInt32LE(aux + 12)
    }
    const next = out.readUInt32LE(need + 12)
    more = next !== 0
    need += next
  }
  if (v238 < 0 || v225 < 0) fail('no GLIBC_2.38 or GLIBC_2.2.5 version need')

  // Symbols that need GLIBC_2.38: only __isoc23_* is expected; its st_name moves past the prefix,
  // onto the plain name that ends the same string, bound to the base version. GLIBCXX_3.4.32: only
  // the never-called marker, left unresolved (nothing relocates against it).
  const prefix = '__isoc23_'
  for (let i = 0; i * 24 < dynsym.size; i++) {
    const version = out.readUInt16LE(versym.offset + 2 * i) & 0x7fff
    const sym = dynsym.offset + i * 24
    const symbol = string(out.readUInt32LE(sym))
    if (version === v432 && v432 >= 0 && symbol !== '_ZSt21ios_base_library_initv') fail(`${symbol} needs GLIBCXX_3.4.32`)
    if (version !== v238) continue
    if (!symbol.startsWith(prefix) || !['strtol', 'strtoul', 'strtoll', 'strtoull'].includes(symbol.slice(prefix.length))) fail(`${symbol} needs GLIBC_2.38`)
    out.writeUInt32LE(out.readUInt32LE(sym) + prefix.length, sym)
    out.writeUInt16LE(v225, versym.offset + 2 * i)
  }
  return out
}
