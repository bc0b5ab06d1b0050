#!/usr/bin/env bash
# Dense applications against ScaLAPACK, in the same job each time, as a Markdown table.
#
#   scripts/apps-vs-scalapack.sh "SIZES" "RANKS" [BLOCK]
#   scripts/apps-vs-scalapack.sh "2048 4096 8192" "2 4" 128
#   REPEAT=3 RUNS="cholesky:blocking cholesky:lookahead1" scripts/apps-vs-scalapack.sh "2048" "2 4"
#
# RUNS picks the app:variant rows (default: every variant of every app). With REPEAT=R
# each row runs R times, in turns with the other rows, and the table gives the median
# times, the ratio of the medians and the range of the R ratios (each ratio is one job's:
# ScaLAPACK and Tessera on the same ranks, one after the other).
#
# Needs a tessera built with the scalapack feature (cargo build --release --features
# tessera-cli/scalapack); TESSERA_BIN overrides target/release/tessera.
set -euo pipefail
sizes=${1:-"2048 4096"}
ranks=${2:-"2 4"}
block=${3:-128}
repeat=${REPEAT:-1}
runs=${RUNS:-"summa:prefetch summa:blocking summa:onesided cholesky:blocking cholesky:lookahead cholesky:lookahead1 lu:blocking"}
tessera=${TESSERA_BIN:-target/release/tessera}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
simd=$(grep -q avx512f /proc/cpuinfo && echo "AVX-512" || echo "AVX2 only")
echo "Host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores, $simd; block $block; $repeat run(s) per row."
echo
echo "| app | variant | N | ranks | grid | Tessera s | GFLOP/s | per rank / DGEMM core | comm | ScaLAPACK s | ScaLAPACK / Tessera | range |"
echo "|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---|"
for n in $sizes; do
  for r in $ranks; do
    for k in $(seq "$repeat"); do
      for run in $runs; do
        app=${run%%:*} variant=${run#*:}
        out="$dir/$app-$variant-$n-$r-$k.json"
        "$tessera" app "$app" --variant "$variant" -n "$r" --size "$n" --block "$block" --conduit mpi \
          --baseline scalapack --timeout 1800 --json "$out" >/dev/null 2>"$dir/err" || {
          echo "| $app | $variant | $n | $r | failed: $(tail -1 "$dir/err") |"; rm -f "$out"; }
      done
    done
    for run in $runs; do
      app=${run%%:*} variant=${run#*:}
      python3 - "$dir" "$app-$variant-$n-$r" <<'PY'
import glob, json, statistics, sys
files = sorted(glob.glob(f"{sys.argv[1]}/{sys.argv[2]}-*.json"))
if not files:
    sys.exit(0)
reports = [json.load(open(f)) for f in files]
def median(key):
    return statistics.median(key(r) for r in reports)
r = reports[0]
p = r["problem"]
n = p["n"]
flops = {"summa": 2 * n**3, "cholesky": n**3 / 3, "lu": 2 * n**3 / 3}[p["app"]]
ours = median(lambda r: r["outcome"]["seconds"])
theirs = median(lambda r: r["baseline"]["seconds"])
comm = median(lambda r: r["outcome"]["comm_seconds"] / r["outcome"]["seconds"])
core = median(lambda r: r["dgemm_flops_per_core"])
ratios = sorted(r["baseline"]["seconds"] / r["outcome"]["seconds"] for r in reports)
rate = flops / ours
per = rate / r["ranks"] / core
span = f"{ratios[0]:.2f}–{ratios[-1]:.2f}" if len(ratios) > 1 else ""
print(f"| {p['app']} | {p['variant']} | {n} | {r['ranks']} | {p['grid'][0]}×{p['grid'][1]} "
      f"| {ours:.3f} | {rate*1e-9:.1f} | {100*per:.0f}% | {100*comm:.0f}% "
      f"| {theirs:.3f} | **{theirs/ours:.2f}** | {span} |")
PY
    done
  done
done
