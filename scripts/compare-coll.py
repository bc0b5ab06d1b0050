#!/usr/bin/env python3
"""Time `tessera bench coll` of two binaries in turns and compare them point by point.

    scripts/compare-coll.py OLD_TESSERA NEW_TESSERA [--rounds 5] [-n 2] [--bytes 8]

Each binary runs `bench coll -n N --json` ROUNDS times, alternating, so that both see the
same machine; every (operation, algorithm, size) keeps its best time over the rounds. The
table gives, at the chosen sizes, the old and new latency, the difference in nanoseconds
and the ratio, and a summary over every point. Used for PERFORMANCE.md's figures on the
cost of the always-on collective signatures, and to compare any two builds.

Both builds must time a batch the same way: from `12cb734` on, `bench coll` times each
batch on its slowest member, before it on rank 0 alone (a broadcast's or scatter's root,
which only sends, measured its own rate). Against a build before that, the rooted
operations' rows compare two different things.
"""
import argparse
import json
import subprocess
import sys
import tempfile


def run(binary, ranks, path):
    subprocess.run([binary, "bench", "coll", "-n", str(ranks), "--json", path],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(path) as f:
        return json.load(f)["results"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("-n", "--ranks", type=int, default=2)
    ap.add_argument("--bytes", type=int, nargs="*", default=[8])
    a = ap.parse_args()
    best = {"old": {}, "new": {}}
    with tempfile.TemporaryDirectory() as d:
        for r in range(a.rounds):
            for which, binary in (("old", a.old), ("new", a.new)):
                for row in run(binary, a.ranks, f"{d}/{which}.json"):
                    if row["metric"] != "latency_us":
                        continue
                    key = (row["op"], row["algorithm"], row["bytes"])
                    best[which][key] = min(best[which].get(key, 1e99), row["value"])
            print(f"round {r + 1} of {a.rounds} done", file=sys.stderr)
    keys = sorted(set(best["old"]) & set(best["new"]))
    print(f"{'op':<10} {'algorithm':<20} {'bytes':>8} {'old us':>9} {'new us':>9} {'diff ns':>8} {'new/old':>8}")
    for key in keys:
        if key[2] in a.bytes or (key[0] == "barrier" and 0 in a.bytes + [0]):
            o, n = best["old"][key], best["new"][key]
            print(f"{key[0]:<10} {key[1]:<20} {key[2]:>8} {o:9.3f} {n:9.3f} {1000 * (n - o):8.1f} {n / o:8.3f}")
    ratios = sorted(best["new"][k] / best["old"][k] for k in keys)
    within = sum(1 for k in keys if best["new"][k] <= max(1.02 * best["old"][k], best["old"][k] + 0.020))
    print(f"\n{len(keys)} points; new/old median {ratios[len(ratios) // 2]:.3f}, "
          f"min {ratios[0]:.3f}, max {ratios[-1]:.3f}; within 2 % or 20 ns: {within} of {len(keys)}")


if __name__ == "__main__":
    main()
