#!/usr/bin/env python3
"""Time `tessera bench rma -n 2` of two binaries in turns and compare them row by row.

    scripts/compare-rma.py OLD_TESSERA NEW_TESSERA [--rounds 5] [--all]

Each binary runs `bench rma -n 2 --json` ROUNDS times, alternating, so that both see the
same machine; every row keeps its best over the rounds, as nanoseconds per operation
(bandwidth rows converted: bytes / bandwidth). Rows that moved by more than 8 % are
printed (every row with --all), then the median, least and greatest new/old ratio over
all rows. Used for PERFORMANCE.md's "Runtime core" comparisons between builds.
"""
import argparse
import json
import statistics
import subprocess
import tempfile


def run(binary, path):
    subprocess.run([binary, "bench", "rma", "-n", "2", "--json", path],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(path) as f:
        return json.load(f)["results"]


def nanoseconds(row):
    """Time per operation in ns: latency rows are µs, bandwidth rows MB/s."""
    if "bandwidth" in row["metric"]:
        return row["bytes"] / row["value"] * 1e3 if row["value"] > 0 else float("inf")
    return row["value"] * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--all", action="store_true", help="print every row")
    a = ap.parse_args()
    best = {"old": {}, "new": {}}
    with tempfile.TemporaryDirectory() as d:
        for _ in range(a.rounds):
            for which, binary in (("old", a.old), ("new", a.new)):
                for row in run(binary, f"{d}/{which}.json"):
                    key = (row["op"], row["bytes"], row.get("ranks"), row["metric"])
                    t = nanoseconds(row)
                    if key not in best[which] or t < best[which][key]:
                        best[which][key] = t
    ratios = []
    for key in sorted(best["old"]):
        if key not in best["new"]:
            continue
        old, new = best["old"][key], best["new"][key]
        ratio = new / old
        ratios.append(ratio)
        if a.all or not 0.92 <= ratio <= 1.08:
            op, size, ranks, metric = key
            print(f"{op:<14} {size:>8} {ranks} {metric:<14} old {old:10.2f} ns "
                  f"new {new:10.2f} ns  {ratio:.3f}")
    print(f"rows {len(ratios)}  median {statistics.median(ratios):.3f}  "
          f"min {min(ratios):.3f}  max {max(ratios):.3f}")


if __name__ == "__main__":
    main()
