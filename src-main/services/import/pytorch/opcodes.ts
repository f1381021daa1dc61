// The one table of pickle opcodes (CPython's pickletools), for both lanes of the reader
// (pickle-reader.ts, fast-lane.ts): their codes, their names for errors, and which ones a snapshot
// may never hold (FORBIDDEN) or does not hold (UNSUPPORTED).

export const enum Op {
  MARK = 0x28, EMPTY_TUPLE = 0x29, STOP = 0x2e, POP = 0x30, POP_MARK = 0x31, DUP = 0x32,
  BINBYTES = 0x42, SHORT_BINBYTES = 0x43, FLOAT = 0x46, BINFLOAT = 0x47, INT = 0x49, BININT = 0x4a,
  BININT1 = 0x4b, LONG = 0x4c, BININT2 = 0x4d, NONE = 0x4e, PERSID = 0x50, BINPERSID = 0x51,
  REDUCE = 0x52, STRING = 0x53, BINSTRING = 0x54, SHORT_BINSTRING = 0x55, UNICODE = 0x56,
  BINUNICODE = 0x58, EMPTY_LIST = 0x5d, APPEND = 0x61, BUILD = 0x62, GLOBAL = 0x63, DICT = 0x64,
  APPENDS = 0x65, GET = 0x67, BINGET = 0x68, INST = 0x69, LONG_BINGET = 0x6a, LIST = 0x6c, OBJ = 0x6f,
  PUT = 0x70, BINPUT = 0x71, LONG_BINPUT = 0x72, SETITEM = 0x73, TUPLE = 0x74, SETITEMS = 0x75,
  EMPTY_DICT = 0x7d, PROTO = 0x80, NEWOBJ = 0x81, EXT1 = 0x82, EXT2 = 0x83, EXT4 = 0x84, TUPLE1 = 0x85,
  TUPLE2 = 0x86, TUPLE3 = 0x87, NEWTRUE = 0x88, NEWFALSE = 0x89, LONG1 = 0x8a, LONG4 = 0x8b,
  SHORT_BINUNICODE = 0x8c, BINUNICODE8 = 0x8d, BINBYTES8 = 0x8e, EMPTY_SET = 0x8f, ADDITEMS = 0x90,
  FROZENSET = 0x91, NEWOBJ_EX = 0x92, STACK_GLOBAL = 0x93, MEMOIZE = 0x94, FRAME = 0x95,
  BYTEARRAY8 = 0x96, NEXT_BUFFER = 0x97, READONLY_BUFFER = 0x98,
}

const OPCODE_NAMES: Record<number, string> = {
  0x28: 'MARK', 0x29: 'EMPTY_TUPLE', 0x2e: 'STOP', 0x30: 'POP', 0x31: 'POP_MARK', 0x32: 'DUP',
  0x42: 'BINBYTES', 0x43: 'SHORT_BINBYTES', 0x46: 'FLOAT', 0x47: 'BINFLOAT', 0x49: 'INT', 0x4a: 'BININT',
  0x4b: 'BININT1', 0x4c: 'LONG', 0x4d: 'BININT2', 0x4e: 'NONE', 0x50: 'PERSID', 0x51: 'BINPERSID',
  0x52: 'REDUCE', 0x53: 'STRING', 0x54: 'BINSTRING', 0x55: 'SHORT_BINSTRING', 0x56: 'UNICODE',
  0x58: 'BINUNICODE', 0x5d: 'EMPTY_LIST', 0x61: 'APPEND', 0x62: 'BUILD', 0x63: 'GLOBAL', 0x64: 'DICT',
  0x65: 'APPENDS', 0x67: 'GET', 0x68: 'BINGET', 0x69: 'INST', 0x6a: 'LONG_BINGET', 0x6c: 'LIST', 0x6f: 'OBJ',
  0x70: 'PUT', 0x71: 'BINPUT', 0x72: 'LONG_BINPUT', 0x73: 'SETITEM', 0x74: 'TUPLE', 0x75: 'SETITEMS',
  0x7d: 'EMPTY_DICT', 0x80: 'PROTO', 0x81: 'NEWOBJ', 0x82: 'EXT1', 0x83: 'EXT2', 0x84: 'EXT4', 0x85: 'TUPLE1',
  0x86: 'TUPLE2', 0x87: 'TUPLE3', 0x88: 'NEWTRUE', 0x89: 'NEWFALSE', 0x8a: 'LONG1', 0x8b: 'LONG4',
  0x8c: 'SHORT_BINUNICODE', 0x8d: 'BINUNICODE8', 0x8e: 'BINBYTES8', 0x8f: 'EMPTY_SET', 0x90: 'ADDITEMS',
  0x91: 'FROZENSET', 0x92: 'NEWOBJ_EX', 0x93: 'STACK_GLOBAL', 0x94: 'MEMOIZE', 0x95: 'FRAME',
  0x96: 'BYTEARRAY8', 0x97: 'NEXT_BUFFER', 0x98: 'READONLY_BUFFER',
}

/** "GLOBAL (0x63)", or "unknown opcode 0xff". */
export function describeOpcode(op: number): string {
  const hex = `0x${op.toString(16).padStart(2, '0')}`
  const name = OPCODE_NAMES[op]
  return name === undefined ? `unknown opcode ${hex}` : `${name} (${hex})`
}

/** Opcodes that import, call or construct objects: a snapshot never needs them. */
export const FORBIDDEN = new Set<number>([
  Op.GLOBAL, Op.STACK_GLOBAL, Op.REDUCE, Op.BUILD, Op.INST, Op.OBJ, Op.NEWOBJ, Op.NEWOBJ_EX,
  Op.EXT1, Op.EXT2, Op.EXT4, Op.PERSID, Op.BINPERSID,
])
/** Known opcodes for values a snapshot does not contain. */
export const UNSUPPORTED: Record<number, string> = {
  [Op.EMPTY_SET]: 'sets are not part of a snapshot',
  [Op.ADDITEMS]: 'sets are not part of a snapshot',
  [Op.FROZENSET]: 'sets are not part of a snapshot',
  [Op.NEXT_BUFFER]: 'out-of-band buffers are not part of a snapshot',
  [Op.READONLY_BUFFER]: 'out-of-band buffers are not part of a snapshot',
  [Op.STRING]: 'protocol 0 quoted strings (snapshots are written with protocol 2 or later)',
  [Op.UNICODE]: 'protocol 0 escaped strings (snapshots are written with protocol 2 or later)',
}
