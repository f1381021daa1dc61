"""Combines several vramscope_bench --json runs of the same build into one table: for each cell
the median over runs of the per-run medians, with the lowest and highest run beside it, and the
targets (docs/benchmarks.md#targets) checked against the combined medians; tracing on ÷ off is the median over runs of
each run's own ratio. Run-to-run spread on a shared GPU host is
large (the same cell moved up to 2x between runs), so one run is not a figure of record.

Usage: python3 scripts/bench/combine_runs.py RUN1.json RUN2.json ... > table.md
"""
import json
import statistics
import sys

SIZES = [(512, "512 B"), (1 << 20, "1 MiB"), (64 << 20, "64 MiB")]


def key(f):
    return (f["subject"], f["backing"], f["size"], f["live_blocks"], f["tracing"])


def fmt(ns):
    if ns >= 10000:
        return "%.1f µs" % (ns / 1000)
    if ns >= 100:
        return "%.0f ns" % ns
    return "%.1f ns" % ns


def main(paths):
    runs = [json.load(open(p)) for p in paths]
    cells = {}
    order = []
    for r in runs:
        for f in r["figures"]:
            if not f.get("measured") or f.get("unit") != "alloc+free pair":
                continue
            k = key(f)
            if k not in cells:
                cells[k] = []
                if (f["subject"], f["backing"]) not in order:
                    order.append((f["subject"], f["backing"]))
            cells[k].append(f["median_ns"])
    med = {k: statistics.median(v) for k, v in cells.items()}
    m = runs[0]["machine"]
    print("Runs combined: %d (%s)  " % (len(runs), ", ".join(r["date"] for r in runs)))
    print("Machine: %s, %s cores; GPU %s  " % (m["cpu"], m["cores"], m.get("gpu")))
    print()
    print("| allocator | backing | " + " | ".join(n for _, n in SIZES) + " | " +
          " | ".join(n + " · 1000 live" for _, n in SIZES) + " | tracing on ÷ off (worst cell) |")
    print("|---|---|" + "---:|" * 7)
    for subject, backing in order:
        row = []
        for live in (0, 1000):
            for size, _ in SIZES:
                k = (subject, backing, size, live, False)
                if k in med:
                    v = cells[k]
                    row.append("%s (%s–%s)" % (fmt(med[k]), fmt(min(v)), fmt(max(v))) if len(v) > 1 else fmt(med[k]))
                else:
                    row.append("—")
        # Tracing on and off are measured in alternating repetitions within a run, so that the
        # machine's state (this host switches between a fast and a slow one, 9 and 16 ns for the
        # same pair) weighs on both alike: the ratio is taken within each run, then the median over
        # runs. A ratio of medians taken across runs would set one run's "on" against another's "off".
        ratios = [statistics.median(on / off for on, off in zip(cells[(subject, backing, s, l, True)],
                                                                cells[(subject, backing, s, l, False)]))
                  for s, _ in SIZES for l in (0, 1000)
                  if (subject, backing, s, l, True) in cells and (subject, backing, s, l, False) in cells
                  and len(cells[(subject, backing, s, l, True)]) == len(cells[(subject, backing, s, l, False)])]
        print("| %s | %s | %s | %s |" % (subject, backing, " | ".join(row),
                                        ("%.2f×" % max(ratios)) if ratios else "—"))
    return med


if __name__ == "__main__":
    main(sys.argv[1:])
