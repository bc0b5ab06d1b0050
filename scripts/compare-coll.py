#!/usr/bin/env python3
"""Time `tessera bench coll` of two binaries in turns and compare them point by point.

    scripts/compare-coll.py OLD_TESSERA NEW_TESSERA [--rounds 5] [-n 2] [--bytes 8]

Each binary runs `bench coll -n N --json` ROUNDS times, alternating, so that both see the
same machine; every (operation, algorithm, size) keeps its best time over the rounds. The
table gives, at the chosen sizes, the old and new latency, the difference in nanoseconds
and the ratio, and a summary over every point. Used for PERFORMANCE.md's figures on the
cost of the always-on collective signatures, and to compare any two builds.

Before and after each run it times a store crossing between CPUs 0 and 1
(target/release/examples/core_to_core, when built: `cargo build --release --examples -p
tessera-cli`). On a virtual machine that time moves between placements of the virtual
CPUs (23, about 50-60 or about 210-265 ns on the 2-core Zen 4 guest, changing within
seconds), and every small collective moves with it; so only runs whose slower crossing
was within 25 % of the fastest seen are compared, when each build has at least one.

Both builds must time a batch the same way: from `12cb734` on, `bench coll` times each
batch on its slowest member, before it on rank 0 alone (a broadcast's or scatter's root,
which only sends, measured its own rate). Against a build before that, the rooted
operations' rows compare two different things.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

DEFAULT_PROBE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "target", "release",
                             "examples", "core_to_core")


def crossing(probe):
    """Half a round trip between CPUs 0 and 1 in ns, or None without the probe."""
    if not probe or not os.path.exists(probe):
        return None
    out = subprocess.run([probe], capture_output=True, text=True)
    try:
        return float(out.stdout.strip())
    except ValueError:
        return None


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
    ap.add_argument("--probe", default=DEFAULT_PROBE,
                    help="the core-to-core probe (empty: none); default target/release/examples/core_to_core")
    a = ap.parse_args()
    runs = []  # (which, crossing ns or None, {key: us})
    with tempfile.TemporaryDirectory() as d:
        for r in range(a.rounds):
            for which, binary in (("old", a.old), ("new", a.new)):
                before = crossing(a.probe)
                got = {}
                for row in run(binary, a.ranks, f"{d}/{which}.json"):
                    if row["metric"] == "latency_us":
                        got[(row["op"], row["algorithm"], row["bytes"])] = row["value"]
                after = crossing(a.probe)
                ns = None if before is None or after is None else max(before, after)
                runs.append((which, ns, got))
            seen = " ".join(f"{w} {ns:.0f}" for w, ns, _ in runs[-2:] if ns is not None)
            print(f"round {r + 1} of {a.rounds} done" + (f" (core-to-core ns: {seen})" if seen else ""),
                  file=sys.stderr)
    kept = runs
    probed = [ns for _, ns, _ in runs if ns is not None]
    if len(probed) == len(runs):
        fastest = min(probed)
        same = [run_ for run_ in runs if run_[1] <= 1.25 * fastest]
        if {w for w, _, _ in same} == {"old", "new"}:
            kept = same
            print(f"compared: {sum(w == 'old' for w, _, _ in kept)} old and "
                  f"{sum(w == 'new' for w, _, _ in kept)} new runs whose core-to-core time was within "
                  f"25 % of the fastest ({fastest:.1f} ns)")
        else:
            print("warning: no placement of the two cores was seen by both builds; comparing every run",
                  file=sys.stderr)
    best = {"old": {}, "new": {}}
    for which, _, got in kept:
        for key, value in got.items():
            best[which][key] = min(best[which].get(key, 1e99), value)
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
