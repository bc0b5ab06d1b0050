#!/usr/bin/env python3
"""Tessera's collectives beside the OSU micro-benchmarks on MPI, in turns, on one host.

    scripts/compare-osu.py OSU_DIR [--rounds 3] [-n 2 4] [--tessera target/release/tessera]
                           [--plain-buffers]

OSU_DIR holds the OSU micro-benchmarks' blocking collective programs (`osu_barrier`,
`osu_bcast`, `osu_reduce`, `osu_allreduce`, `osu_gather`, `osu_allgather`, `osu_scatter`,
`osu_alltoall`), built by hand from their public sources with the MPI's `mpicc`; this
script only runs them (with `mpirun`, `--oversubscribe` where ranks outnumber cores).
Each round runs `tessera bench coll -n N --json` (the tuned row of each operation, calls
back to back, from buffers on huge pages, or in `Vec`s with `--plain-buffers` as OSU's
own buffers are: a peer reads long messages between huge pages about twice as fast) and
then every OSU program at 8 bytes and 1 MiB per rank; every point keeps the best of its
rounds. The ratio is OSU's time over Tessera's: above 1, Tessera is
faster. OSU times each call on its own, with a barrier between calls, and prints
microseconds with two decimals, so its 8-byte figures are rounded to about 3 %.

Before and after each run it times a store crossing between CPUs 0 and 1
(target/release/examples/core_to_core, when built); on a virtual machine that time moves
with the host's placement of the virtual CPUs, and every small operation with it, so only
runs whose slower crossing was within 25 % of the fastest seen are compared, when each
side has at least one (as `compare-coll.py` and `shmem-bench.sh` do).
"""
import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
# The crossing probe of compare-coll.py, shared rather than written again.
_spec = importlib.util.spec_from_file_location("compare_coll", os.path.join(HERE, "compare-coll.py"))
compare_coll = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(compare_coll)
# Tessera's operation, the OSU program of the same collective.
OPS = [
    ("barrier", "osu_barrier"),
    ("broadcast", "osu_bcast"),
    ("reduce", "osu_reduce"),
    ("allreduce", "osu_allreduce"),
    ("gather", "osu_gather"),
    ("allgather", "osu_allgather"),
    ("scatter", "osu_scatter"),
    ("exchange", "osu_alltoall"),
]
SIZES = [8, 1 << 20]


def tessera_run(binary, ranks, plain_buffers=False):
    """The tuned row of each operation, {(op, bytes): µs}."""
    extra = ["--plain-buffers"] if plain_buffers else []
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        subprocess.run([binary, "bench", "coll", "-n", str(ranks), "--json", f.name, "-q"] + extra,
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        results = json.load(open(f.name))["results"]
    wanted = {op for op, _ in OPS}
    return {(r["op"], r["bytes"]): r["value"] for r in results
            if r["algorithm"] == "tuned" and r["op"] in wanted
            and (r["op"] == "barrier" or r["bytes"] in SIZES)}


def osu_run(osu_dir, ranks, mpirun):
    """Every OSU program at each size, {(op, bytes): µs}."""
    env = dict(os.environ, OMPI_MCA_osc=os.environ.get("OMPI_MCA_osc", "^rdma"))
    cmd = [mpirun, "-np", str(ranks)]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    if ranks > (os.cpu_count() or 1):
        cmd.append("--oversubscribe")
    times = {}
    for op, prog in OPS:
        path = os.path.join(osu_dir, prog)
        for size in ([0] if op == "barrier" else SIZES):
            iters = ["-i", "10000", "-x", "1000"] if size <= 8 else ["-i", "200", "-x", "20"]
            if op != "barrier":
                iters += ["-m", f"{size}:{size}"]
            out = subprocess.run(cmd + [path] + iters, capture_output=True, text=True,
                                 env=env, timeout=300)
            rows = [line.split() for line in out.stdout.splitlines()
                    if line.strip() and not line.startswith("#")]
            if out.returncode != 0 or not rows:
                sys.exit(f"compare-osu: {prog} failed:\n{out.stdout}{out.stderr}")
            # The last column of the last row is the average latency in µs (barrier: the
            # only column).
            times[(op, size)] = float(rows[-1][-1])
    return times


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("osu_dir")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-n", "--ranks", type=int, nargs="*", default=[2, 4])
    ap.add_argument("--tessera", default=os.path.join(HERE, "..", "target", "release", "tessera"))
    ap.add_argument("--mpirun", default="mpirun")
    ap.add_argument("--plain-buffers", action="store_true",
                    help="Tessera's buffers in Vecs, as OSU's are (default: on huge pages)")
    args = ap.parse_args()
    for _, prog in OPS:
        path = os.path.join(args.osu_dir, prog)
        if not os.access(path, os.X_OK):
            sys.exit(f"compare-osu: {path} is missing or not executable; build the OSU "
                     "micro-benchmarks' blocking collectives and name their folder")
    if not os.access(args.tessera, os.X_OK):
        sys.exit(f"compare-osu: {args.tessera} is missing; build it with cargo build --release")
    for ranks in args.ranks:
        runs = {"tessera": [], "osu": []}
        for _ in range(args.rounds):
            for side in ("tessera", "osu"):
                before = compare_coll.crossing(compare_coll.DEFAULT_PROBE)
                t = (tessera_run(args.tessera, ranks, args.plain_buffers) if side == "tessera"
                     else osu_run(args.osu_dir, ranks, args.mpirun))
                after = compare_coll.crossing(compare_coll.DEFAULT_PROBE)
                slow = None if before is None or after is None else max(before, after)
                runs[side].append((slow, t))
        # As compare-coll.py: only runs near the fastest crossing, when both sides have
        # one (and every run was probed); otherwise every run, said so.
        probed = [s for side in runs.values() for s, _ in side if s is not None]
        fastest = min(probed) if len(probed) == 2 * args.rounds else None
        kept = {side: [t for s, t in runs[side] if fastest is not None and s <= 1.25 * fastest]
                for side in runs}
        if not all(kept.values()):
            print("warning: no placement of the two cores was seen by both sides; "
                  "comparing every run", file=sys.stderr)
            kept = {side: [t for _, t in runs[side]] for side in runs}
            fastest = None
        best = {side: {} for side in runs}
        for side in runs:
            for t in kept[side]:
                for key, v in t.items():
                    best[side][key] = min(v, best[side].get(key, v))
        crossings = {side: [s for s, _ in runs[side]] for side in runs}
        print(f"\n{ranks} ranks, best of {args.rounds} (crossing ns per run: "
              + "; ".join(f"{k} " + " ".join(f"{s:.0f}" if s else "-" for s in v)
                          for k, v in crossings.items())
              + (f"; kept: within 25 % of {fastest:.1f} ns)" if fastest else "; every run kept)"))
        print(f"{'operation':<11} {'bytes':>8} {'Tessera µs':>11} {'OSU µs':>9} {'speed-up':>9}")
        for op, _ in OPS:
            for size in ([0] if op == "barrier" else SIZES):
                t, o = best["tessera"].get((op, size)), best["osu"].get((op, size))
                if t is None or o is None:
                    continue
                print(f"{op:<11} {size:>8} {t:>11.3f} {o:>9.2f} {o / t:>9.2f}")


if __name__ == "__main__":
    main()
