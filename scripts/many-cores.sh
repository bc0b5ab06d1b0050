#!/usr/bin/env bash
# Many-core figures in one prepared run, for a machine with 16 cores or more: every NPB
# kernel at the given classes and rank counts with --bounds, beside NPB's OpenMP
# reference binaries where the caller has built them (in turns, one after the other), and
# `bench coll` at each rank count (every point: the model and online tuning, with built-in
# and with calibrated parameters). Prints a summary table; every JSON and log stays in OUT.
#
#   scripts/many-cores.sh [OUT=./many-cores]
#   RANKS="8 16" CLASSES="B C" KERNELS="ep is cg mg ft" ROUNDS=2 NPB_OMP_DIR=/tmp/npb/bin \
#       BIND_TOO="cg mg" NPB_GRID_TOO=1 SWEEPS="builtin calibrated" scripts/many-cores.sh /tmp/out
#
# Calls with different settings may share one OUT (the summary reads every run in it), so a
# short lease can run the points that matter first: KERNELS="" runs no NPB kernel, and
# SWEEPS names the `bench coll` sweeps at each rank count ("builtin": the model with
# built-in parameters and online trials; "calibrated": both again after `tune
# --calibrate`, which also times long messages read directly and through the mailbox and
# keeps the faster way, named in the summary; "ways": online tuning with every long
# message read directly, then with every one through the mailbox (TESSERA_DIRECT=on and
# off), so that the summary judges the default's tuned rows from 32 KiB, which try both
# ways, against the best fixed algorithm of either way; "plain": online tuning with the
# buffers in `Vec`s (`--plain-buffers`, as the tables recorded before `bench coll` put
# them on huge pages), which the summary sets beside the "builtin" online sweep's long
# rows; "" none).
#
# BIND_TOO names kernels that also run with each rank pinned to a processor of its own
# (TESSERA_BIND=1, as OMP_PROC_BIND=true pins OpenMP's threads), in the same turns.
# NPB_GRID_TOO=1 also runs MG on NPB's process grid (TESSERA_MG_GRID=npb; x split from 8
# ranks) in the same turns, so that one binary measures what keeping x whole gains.
#
# NPB_OMP_DIR names a folder of NPB 3.4 OpenMP binaries built by hand (`ep.B.x`, ...);
# without it only Tessera runs. Link them dynamically (statically linked gfortran and
# libgomp binaries crashed at start), and where the machine lacks libgfortran or libgomp,
# set LD_LIBRARY_PATH to a folder holding them. Each OpenMP binary runs with OMP_NUM_THREADS set to the
# rank count and OMP_PROC_BIND=true. TESSERA_BIN names the tessera executable (default
# target/release/tessera). Every Tessera run must verify; a failed one is reported in the
# table and the script goes on. Quick check on 2 cores:
#   RANKS=2 CLASSES=S ROUNDS=1 scripts/many-cores.sh /tmp/mc
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-many-cores}
ranks=${RANKS:-"8 16"}
classes=${CLASSES:-"B C"}
kernels=${KERNELS-"ep is cg mg ft"}
sweeps=${SWEEPS-"builtin calibrated"}
rounds=${ROUNDS:-2}
omp=${NPB_OMP_DIR:-}
bind_too=${BIND_TOO:-}
npb_grid_too=${NPB_GRID_TOO:-}
tessera=${TESSERA_BIN:-target/release/tessera}
if [ ! -x "$tessera" ]; then
  echo "many-cores: no tessera at $tessera; build it (cargo build --release) or set TESSERA_BIN" >&2
  exit 2
fi
if [ -n "$omp" ] && [ ! -d "$omp" ]; then
  echo "many-cores: NPB_OMP_DIR=$omp is not a folder of NPB OpenMP binaries" >&2
  exit 2
fi
mkdir -p "$out"
{
  grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs
  echo "cores: $(nproc); $(grep -q avx512f /proc/cpuinfo && echo AVX-512 || echo 'AVX2 only')"
  echo "tessera: $("$tessera" --version 2>/dev/null || echo unknown)"
} > "$out/host.txt"
cat "$out/host.txt"

for class in $classes; do
  for n in $ranks; do
    for k in $kernels; do
      for r in $(seq "$rounds"); do
        tag="$k-$class-$n-$r"
        echo "npb $k class $class, $n ranks, round $r" >&2
        "$tessera" npb "$k" --class "$class" -n "$n" --bounds --json "$out/npb-$tag.json" \
          > "$out/npb-$tag.log" 2>&1 || echo "  failed: see $out/npb-$tag.log" >&2
        if [[ " $bind_too " == *" $k "* ]]; then
          TESSERA_BIND=1 "$tessera" npb "$k" --class "$class" -n "$n" --bounds \
            --json "$out/bound-$tag.json" > "$out/bound-$tag.log" 2>&1 \
            || echo "  failed pinned: see $out/bound-$tag.log" >&2
        fi
        if [ -n "$npb_grid_too" ] && [ "$k" = mg ]; then
          TESSERA_MG_GRID=npb "$tessera" npb mg --class "$class" -n "$n" --bounds \
            --json "$out/npbgrid-$tag.json" > "$out/npbgrid-$tag.log" 2>&1 \
            || echo "  failed on NPB's grid: see $out/npbgrid-$tag.log" >&2
        fi
        if [ -n "$omp" ] && [ -x "$omp/$k.$class.x" ]; then
          OMP_NUM_THREADS=$n OMP_PROC_BIND=true "$omp/$k.$class.x" > "$out/omp-$tag.log" 2>&1 \
            || echo "  the OpenMP binary failed: see $out/omp-$tag.log" >&2
        fi
      done
    done
  done
done

# Every collective point (a full sweep takes under half a minute at 16 ranks on 16
# cores): the model with built-in parameters and online trials, then both again with the
# model calibrated at that team size (in a private HOME, so the caller's calibration is
# neither used nor replaced).
calibrated_home=$(mktemp -d)
trap 'rm -rf "$calibrated_home"' EXIT
# The online sweeps' logs carry every decision's trial times (TESSERA_TUNING_TRACE).
for n in $ranks; do
  if [[ " $sweeps " == *" builtin "* ]]; then
    for tuning in none online; do
      echo "bench coll, $n ranks, TESSERA_TUNING=$tuning, built-in parameters" >&2
      HOME="$calibrated_home" TESSERA_CALIBRATION=none TESSERA_TUNING=$tuning TESSERA_TUNING_TRACE=1 \
        "$tessera" bench coll -n "$n" --model --json "$out/coll-$n-$tuning.json" \
        > "$out/coll-$n-$tuning.log" 2>&1 || echo "  failed: see $out/coll-$n-$tuning.log" >&2
    done
  fi
  if [[ " $sweeps " == *" ways "* ]]; then
    for way in direct mailbox; do
      direct=$([[ $way == direct ]] && echo on || echo off)
      echo "bench coll, $n ranks, online, TESSERA_DIRECT=$direct, built-in parameters" >&2
      HOME="$calibrated_home" TESSERA_CALIBRATION=none TESSERA_TUNING=online TESSERA_DIRECT=$direct \
        "$tessera" bench coll -n "$n" --json "$out/coll-$n-$way.json" \
        > "$out/coll-$n-$way.log" 2>&1 || echo "  failed: see $out/coll-$n-$way.log" >&2
    done
  fi
  if [[ " $sweeps " == *" plain "* ]]; then
    echo "bench coll, $n ranks, online, buffers in Vecs, built-in parameters" >&2
    HOME="$calibrated_home" TESSERA_CALIBRATION=none TESSERA_TUNING=online \
      "$tessera" bench coll -n "$n" --plain-buffers --json "$out/coll-$n-plain.json" \
      > "$out/coll-$n-plain.log" 2>&1 || echo "  failed: see $out/coll-$n-plain.log" >&2
  fi
  [[ " $sweeps " == *" calibrated "* ]] || continue
  HOME="$calibrated_home" "$tessera" tune --calibrate -n "$n" > "$out/calibrate-$n.log" 2>&1 \
    || echo "  calibration failed: see $out/calibrate-$n.log" >&2
  for tuning in none online; do
    echo "bench coll, $n ranks, TESSERA_TUNING=$tuning, calibrated" >&2
    HOME="$calibrated_home" TESSERA_TUNING=$tuning TESSERA_TUNING_TRACE=1 \
      "$tessera" bench coll -n "$n" --model --json "$out/coll-$n-$tuning-calibrated.json" \
      > "$out/coll-$n-$tuning-calibrated.log" 2>&1 \
      || echo "  failed: see $out/coll-$n-$tuning-calibrated.log" >&2
  done
  rm -f "$calibrated_home/.config/tessera/calibration.json"
done

python3 - "$out" <<'PY'
import glob, json, os, re, sys, collections
out = sys.argv[1]
best = collections.defaultdict(dict)  # (kernel, class, ranks) -> {tessera, omp, bound, verified}
for path in glob.glob(os.path.join(out, "npb-*.json")):
    try:
        d = json.load(open(path))
    except (OSError, ValueError):
        continue
    key = (d["kernel"], d["class"], d["ranks"])
    row = best[key]
    if d.get("verified") and d["time_s"] < row.get("tessera", float("inf")):
        row["tessera"] = d["time_s"]
        row["bound"] = (d.get("bound") or {}).get("fraction")
    row["failed"] = row.get("failed", 0) + (0 if d.get("verified") else 1)
for path in glob.glob(os.path.join(out, "omp-*.log")):
    k, c, n, _ = os.path.basename(path)[4:-4].split("-")
    text = open(path, errors="replace").read()
    t = re.search(r"Time in seconds\s*=\s*([0-9.eE+-]+)", text)
    ok = re.search(r"Verification\s*=\s*SUCCESSFUL", text)
    if t and ok:
        row = best[(k.upper(), c, int(n))]
        row["omp"] = min(float(t.group(1)), row.get("omp", float("inf")))
def fastest(prefix):
    # (kernel, class, ranks) -> the fastest verified time among OUT/prefix-*.json
    times = {}
    for path in glob.glob(os.path.join(out, prefix + "-*.json")):
        try:
            d = json.load(open(path))
        except (OSError, ValueError):
            continue
        if d.get("verified"):
            key = (d["kernel"], d["class"], d["ranks"])
            times[key] = min(d["time_s"], times.get(key, float("inf")))
    return times
pinned = fastest("bound")
npb_grid = fastest("npbgrid")
print(f"\n{'kernel':<6} {'class':<5} {'ranks':>5} {'Tessera s':>10} {'OpenMP s':>9} {'OMP/Tessera':>11} {'bound':>6}")
for key in sorted(best):
    row = best[key]
    t, o, b = row.get("tessera"), row.get("omp"), row.get("bound")
    fmt = lambda v, f: f.format(v) if v is not None else "-"
    ratio = f"{o / t:.2f}" if (t and o) else "-"
    note = f"  ({row['failed']} run(s) did not verify)" if row.get("failed") else ""
    if key in pinned:
        note += f"  (pinned: {pinned[key]:.3f} s" + (f", OMP/Tessera {o / pinned[key]:.2f})" if o else ")")
    if key in npb_grid:
        note += f"  (NPB's grid: {npb_grid[key]:.3f} s" + (f", x whole {npb_grid[key] / t:.2f}x faster)" if t else ")")
    print(f"{key[0]:<6} {key[1]:<5} {key[2]:>5} {fmt(t, '{:.3f}'):>10} {fmt(o, '{:.3f}'):>9} {ratio:>11} {fmt(b and 100 * b, '{:.1f}%'):>6}{note}")
print()
for path in sorted(glob.glob(os.path.join(out, "calibrate-*.log"))):
    n = os.path.basename(path)[10:-4]
    for line in open(path, errors="replace"):
        if line.strip().startswith("long messages ") and ("read directly" in line or "mailbox" in line):
            print(f"calibration, {n} ranks: {line.strip()}")
for path in sorted(glob.glob(os.path.join(out, "coll-*.log"))):
    summary = [l for l in open(path, errors="replace") if "within" in l]
    name = os.path.basename(path)[5:-4]
    for line in summary:
        print(f"bench coll {name}: {line.strip()}")
# The "ways" sweeps: the default's tuned row (online, both ways tried) from 32 KiB against
# the fastest fixed algorithm of the sweeps that read every long message directly and
# that send every one through the mailbox. Other forms of a call are not its algorithms:
# the rows `bench coll`'s own summary leaves out (`is_other_form` in
# crates/tessera-cli/src/bench/coll.rs; keep the two lists alike).
OTHER = {"tuned", "nonblocking", "single_address", "single_address_strict",
         "single_address_loose", "rendezvous", "rendezvous_fresh", "split",
         "then_read_whole", "then_read_split"}
def latencies(path):
    rows = collections.defaultdict(dict)
    try:
        results = json.load(open(path))["results"]
    except (OSError, ValueError, KeyError):
        return rows
    for r in results:
        if r.get("metric") == "latency_us" and r["bytes"] >= 32768:
            rows[(r["op"], r["bytes"])][r.get("algorithm")] = r["value"]
    return rows
for path in sorted(glob.glob(os.path.join(out, "coll-*-direct.json"))):
    n = os.path.basename(path)[5:-12]
    tuned = latencies(os.path.join(out, f"coll-{n}-online.json"))
    ways = [latencies(path), latencies(os.path.join(out, f"coll-{n}-mailbox.json"))]
    ratios = []
    for key, row in sorted(tuned.items()):
        fixed = [v for way in ways for a, v in way.get(key, {}).items() if a not in OTHER]
        if "tuned" in row and fixed:
            ratios.append((row["tuned"] / min(fixed), f"{key[0]} {key[1]} B"))
    if ratios:
        within = sum(r <= 1.10 for r, _ in ratios)
        worst = max(ratios)
        print(f"long messages both ways, {n} ranks: online tuned within 10% of the best fixed "
              f"algorithm of either way at {within} of {len(ratios)} points from 32 KiB "
              f"(worst {worst[0]:.2f}x, {worst[1]})")
# The "plain" sweeps: the online tuned rows of 256 KiB and 1 MiB with the buffers on huge
# pages (the "builtin" online sweep) over the same rows with the buffers in Vecs.
for path in sorted(glob.glob(os.path.join(out, "coll-*-plain.json"))):
    n = os.path.basename(path)[5:-11]
    huge, plain = latencies(os.path.join(out, f"coll-{n}-online.json")), latencies(path)
    ratios = sorted((huge[key]["tuned"] / row["tuned"], f"{key[0]} {key[1]} B")
                    for key, row in plain.items()
                    if key[1] >= 262144 and "tuned" in row and "tuned" in huge.get(key, {}))
    if ratios:
        print(f"buffers on huge pages over Vecs, {n} ranks, tuned rows of 256 KiB and 1 MiB: "
              f"{ratios[0][0]:.2f}x ({ratios[0][1]}) to {ratios[-1][0]:.2f}x ({ratios[-1][1]}), "
              f"median {ratios[len(ratios) // 2][0]:.2f}x over {len(ratios)} points")
PY
