#!/usr/bin/env python3
"""Reads vramscope trace files with pyarrow alone and prints their tables and counts.

Proves that a trace file (docs/trace-format.md) is plain Arrow: every chunk is an Arrow IPC stream
that pyarrow.ipc.open_stream reads, the CRC-32 rule reproduces from Python, and the committed samples
hold what their *.expected.json say (the same expectations test/unit/services/trace/trace-fixtures.test.ts checks in
Node). Needs only pyarrow; run on the GPU machine:

    python3 scripts/gpu/check_pyarrow.py                    # the samples in test/fixtures/trace
    python3 scripts/gpu/check_pyarrow.py FILE.vramscope ... # any trace files (no expectations)

Exit status 0 when every file reads and matches its expectations, 1 otherwise.
"""

import json
import os
import struct
import sys
import zlib

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLES = [os.path.join(HERE, "..", "..", "test", "fixtures", "trace", n) for n in ("sample.vramscope", "sample-recording.vramscope")]
EVENT_KINDS = {0: "alloc", 1: "free", 2: "marker", 3: "oom"}
EOS_BYTES = 8


class Torn(Exception):
    """The file ends inside a chunk: the tail of a recording that was killed mid-write."""


def frame_message(data, pos):
    """End offset of the Arrow IPC message at pos, and whether it is the end-of-stream marker.

    Encapsulated message: 0xFFFFFFFF, int32 metadata size, flatbuffer Message (its field 3 is
    bodyLength), then the body. Parsed here by hand so chunk boundaries do not depend on how a
    pyarrow reader buffers its input.
    """
    if pos + 8 > len(data):
        raise Torn()
    marker, size = struct.unpack_from("<Ii", data, pos)
    if marker != 0xFFFFFFFF:
        raise ValueError("byte %d: expected an Arrow message (ffffffff), found %08x" % (pos, marker))
    if size == 0:
        return pos + 8, True
    meta = pos + 8
    if size < 0 or meta + size > len(data):
        raise Torn()
    table = meta + struct.unpack_from("<I", data, meta)[0]
    vtable = table - struct.unpack_from("<i", data, table)[0]
    vtable_size = struct.unpack_from("<H", data, vtable)[0]
    body = 0
    if vtable_size > 10:
        field = struct.unpack_from("<H", data, vtable + 10)[0]
        if field:
            body = struct.unpack_from("<q", data, table + field)[0]
    end = meta + size + body
    if end > len(data):
        raise Torn()
    return end, False


def split_chunks(data):
    """(start, schema_end, end) of each chunk, and the number of torn bytes at the end."""
    chunks = []
    pos = 0
    while pos < len(data):
        start = pos
        try:
            pos, eos = frame_message(data, pos)
            schema_end = pos
            while not eos:
                pos, eos = frame_message(data, pos)
        except Torn:
            return chunks, len(data) - start
        chunks.append((start, schema_end, pos))
    return chunks, 0


def text_metadata(schema):
    return {k.decode(): v.decode() for k, v in (schema.metadata or {}).items()}


def read_trace(path):
    with open(path, "rb") as f:
        data = f.read()
    chunks, torn = split_chunks(data)
    sections = {}  # (section, strategy or None) -> [tables]
    order = []
    info = {"bytes": len(data), "chunks": len(chunks), "torn": torn, "crc_ok": 0}
    for index, (start, schema_end, end) in enumerate(chunks):
        reader = ipc.open_stream(pa.py_buffer(data[start:end]))
        table = reader.read_all()
        md = text_metadata(reader.schema)
        if md.get("vramscope.format") != "vramscope-trace":
            raise ValueError("chunk %d at byte %d is not a vramscope section: %r" % (index, start, md))
        if index == 0:
            info["version"] = md["vramscope.version"]
            info["writer"] = md.get("vramscope.writer", "file")
        stored = md.get("vramscope.crc32")
        computed = "%08x" % (zlib.crc32(data[schema_end:end - EOS_BYTES]) & 0xFFFFFFFF)
        if stored != computed:
            raise ValueError("chunk %d at byte %d: CRC-32 stored %s, computed %s" % (index, start, stored, computed))
        info["crc_ok"] += 1
        key = (md["vramscope.section"], md.get("vramscope.strategy"))
        if key not in sections:
            sections[key] = []
            order.append(key)
        sections[key].append(table)
    tables = {key: pa.concat_tables(sections[key]) for key in order}
    info["chunks_by_section"] = {key: len(sections[key]) for key in order}
    return tables, order, info


def simple_loop_chunks(path):
    """What a user would write first: open_stream again and again on one reader until the end."""
    with open(path, "rb") as f:
        source = pa.BufferReader(f.read())
    count = 0
    try:
        while source.tell() < source.size():
            ipc.open_stream(source).read_all()
            count += 1
    except Exception as error:  # a torn tail, or a reader that read past its stream
        return count, str(error)
    return count, None


def meta_of(tables):
    meta = {"source": "", "warnings": [], "properties": {}}
    if ("meta", None) not in tables:
        return meta
    for key, value in zip(*(tables[("meta", None)].column(c).to_pylist() for c in ("key", "value"))):
        if key in ("source", "origin", "gpu", "driver"):
            meta[key] = value
        elif key == "warning":
            meta["warnings"].append(value)
        else:
            meta["properties"][key[len("property."):] if key.startswith("property.") else key] = value
    return meta


def summary_of(path, tables, order, info):
    """The same facts test/fixtures/trace/make.ts writes to *.expected.json."""
    empty = pa.table({})
    events = tables.get(("events", None), empty)
    rows = {name: tables[(name, None)].num_rows if (name, None) in tables else 0 for name in ("events", "streams", "frames", "stacks", "tags", "markers")}
    kinds = {name: 0 for name in EVENT_KINDS.values()}
    if events.num_rows:
        for kind, count in zip(*pc.value_counts(events.column("kind")).flatten()):
            kinds[EVENT_KINDS.get(kind.as_py(), str(kind.as_py()))] = count.as_py()
    strategies = []
    if ("strategies", None) in tables:
        s = tables[("strategies", None)]
        for name, strategy, params in zip(*(s.column(c).to_pylist() for c in ("name", "strategy", "params"))):
            layout = tables.get(("layout", name))
            metrics = tables.get(("metrics", name))
            summary = tables.get(("summary", name))
            strategies.append({
                "name": name,
                "strategy": strategy,
                "params": json.loads(params),
                "layoutRows": layout.num_rows if layout is not None else 0,
                "firstAddress": "0x%x" % layout.column("address")[0].as_py() if layout is not None and layout.num_rows else None,
                "metricsRows": metrics.num_rows if metrics is not None else 0,
                "summary": dict(zip(summary.column("key").to_pylist(), summary.column("value").to_pylist())) if summary is not None else None,
            })
    return {
        "version": info.get("version"),
        "writer": info.get("writer"),
        "complete": ("end", None) in tables,
        "meta": meta_of(tables),
        "rows": rows,
        "eventKinds": kinds,
        "sizeSum": pc.sum(events.column("size")).as_py() or 0 if events.num_rows else 0,
        "lastTime": events.column("time")[events.num_rows - 1].as_py() if events.num_rows else None,
        "strategies": strategies,
    }


def check_end(tables, info):
    """The end section's counts against what the file holds; [] when they agree."""
    if ("end", None) not in tables:
        return []
    end = tables[("end", None)]
    listed = {s: (c, r) for s, c, r in zip(*(end.column(n).to_pylist() for n in ("section", "chunks", "rows")))}
    held = {}
    for (section, _), table in tables.items():
        if section == "end":
            continue
        chunks, rows = held.get(section, (0, 0))
        held[section] = (chunks + info["chunks_by_section"][(section, _)], rows + table.num_rows)
    return ["end section lists %s for %s, the file holds %s" % (listed.get(s), s, held.get(s)) for s in set(listed) | set(held) if listed.get(s) != held.get(s)]


def differences(actual, expected, where=""):
    if isinstance(expected, dict) and isinstance(actual, dict):
        out = []
        for key in sorted(set(expected) | set(actual)):
            out += differences(actual.get(key), expected.get(key), "%s.%s" % (where, key) if where else key)
        return out
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        return [d for i, (a, e) in enumerate(zip(actual, expected)) for d in differences(a, e, "%s[%d]" % (where, i))]
    return [] if actual == expected else ["%s: pyarrow read %r, expected %r" % (where, actual, expected)]


def check(path):
    print("== %s" % os.path.relpath(path))
    tables, order, info = read_trace(path)
    print("   %d bytes, trace format %s, writer %s, %d chunks (CRC-32 ok: %d)%s" % (
        info["bytes"], info.get("version"), info.get("writer"), info["chunks"], info["crc_ok"],
        ", torn tail of %d bytes (an interrupted recording)" % info["torn"] if info["torn"] else ""))
    print("   %-12s %-22s %6s %8s  %s" % ("section", "strategy", "chunks", "rows", "columns"))
    for key in order:
        table = tables[key]
        columns = ", ".join("%s: %s" % (f.name, f.type) for f in table.schema)
        print("   %-12s %-22s %6d %8d  %s" % (key[0], key[1] or "", info["chunks_by_section"][key], table.num_rows, columns))
    summary = summary_of(path, tables, order, info)
    print("   events by kind: %s" % ", ".join("%s %d" % kv for kv in summary["eventKinds"].items()))
    problems = check_end(tables, info)
    # Informational: whether the shortest reading (no framing of our own) works with this pyarrow.
    loop_count, loop_error = simple_loop_chunks(path)
    print("   open_stream in a loop on one BufferReader: %d streams, %s%s" % (
        loop_count, "the same chunks" if loop_count == info["chunks"] else "NOT the same chunks (frame them as this script does)",
        "; stopped: %s" % loop_error if loop_error else ""))
    expected_path = path[: -len(".vramscope")] + ".expected.json" if path.endswith(".vramscope") else None
    if expected_path and os.path.exists(expected_path):
        with open(expected_path) as f:
            expected = json.load(f)
        if not summary["complete"]:
            # The Node reader adds its own warning about the interruption; pyarrow reads the file's.
            expected["meta"]["warnings"] = [w for w in expected["meta"]["warnings"] if not w.startswith("the recording did not finish")]
        problems += differences(summary, expected)
        print("   expectations: %s" % ("match %s" % os.path.basename(expected_path) if not problems else "DIFFER"))
    for p in problems:
        print("   PROBLEM: %s" % p)
    return not problems


def main(argv):
    paths = argv[1:] or SAMPLES
    print("pyarrow %s" % pa.__version__)
    ok = True
    for path in paths:
        try:
            ok = check(path) and ok
        except Exception as error:  # report every file, then fail
            print("   FAILED: %s: %s" % (type(error).__name__, error))
            ok = False
    print("check_pyarrow: %s" % ("all files read" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
