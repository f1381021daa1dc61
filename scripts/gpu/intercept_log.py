"""Reads a raw libvramscope_intercept.so log (native/intercept/intercept_log.h) with Python alone,
for the GPU machine when Node is not there: counts of calls by op and status, whole records and a
torn tail. Usage: python3 intercept_log.py LOG [--expect "allocs N frees N oom N"] -> JSON on stdout;
exit 1 when --expect does not match."""
import collections
import json
import struct
import sys

DEVICE_ALLOCS = {1, 3, 5, 8, 16, 18, 20, 23}
DEVICE_FREES = {2, 4, 17, 19}

path = sys.argv[1]
data = open(path, "rb").read()
if data[:8] != b"VRSCPLOG":
    print(json.dumps({"error": "not an interposer log"}))
    sys.exit(1)
body = data[64:]
whole = len(body) // 64
ops = collections.Counter()
allocs = frees = ooms = 0
sequences_ok = True
for i in range(whole):
    t, addr, size, stream, aux, seq, tid, status, dur, op, flags = struct.unpack_from("<QQQQQQIiIHH", body, i * 64)
    if seq != i:
        sequences_ok = False
    ops[op] += 1
    if op in DEVICE_ALLOCS and status == 0:
        allocs += 1
    elif op in DEVICE_ALLOCS and status == 2:
        ooms += 1
    elif op in DEVICE_FREES and status == 0:
        frees += 1
result = {"records": whole, "tornBytes": len(body) % 64, "sequencesConsecutive": sequences_ok, "allocs": allocs, "frees": frees,
          "oom": ooms, "ops": {str(k): v for k, v in sorted(ops.items())}}
ok = True
if len(sys.argv) > 3 and sys.argv[2] == "--expect":
    words = sys.argv[3].split()
    want = {words[i]: int(words[i + 1]) for i in range(0, len(words) - 1, 2)}
    result["expected"] = want
    ok = all(result.get(k) == v for k, v in want.items())
result["ok"] = ok and sequences_ok
print(json.dumps(result))
sys.exit(0 if result["ok"] else 1)
