#!/usr/bin/env bash
# Dense applications against ScaLAPACK, in the same job each time, as a Markdown table.
#
#   scripts/apps-vs-scalapack.sh "SIZES" "RANKS" [BLOCK]
#   scripts/apps-vs-scalapack.sh "2048 4096 8192" "2 4" 128
#
# Needs a tessera built with the scalapack feature (cargo build --release --features
# tessera-cli/scalapack); TESSERA_BIN overrides target/release/tessera.
set -euo pipefail
sizes=${1:-"2048 4096"}
ranks=${2:-"2 4"}
block=${3:-128}
tessera=${TESSERA_BIN:-target/release/tessera}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
simd=$(grep -q avx512f /proc/cpuinfo && echo "AVX-512" || echo "AVX2 only")
echo "Host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores, $simd; block $block."
echo
echo "| app | variant | N | ranks | grid | Tessera s | GFLOP/s | per rank / DGEMM core | comm | ScaLAPACK s | ScaLAPACK / Tessera |"
echo "|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|"
for n in $sizes; do
  for r in $ranks; do
    for run in "summa prefetch" "summa blocking" "summa onesided" "cholesky blocking" "cholesky lookahead" "cholesky lookahead1" "lu blocking"; do
      set -- $run
      out="$dir/$1-$2-$n-$r.json"
      "$tessera" app "$1" --variant "$2" -n "$r" --size "$n" --block "$block" --conduit mpi \
        --baseline scalapack --timeout 1800 --json "$out" >/dev/null 2>"$dir/err" || {
        echo "| $1 | $2 | $n | $r | failed: $(tail -1 "$dir/err") |"; continue; }
      python3 - "$out" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
p, o, b = r["problem"], r["outcome"], r["baseline"]
n = p["n"]
flops = {"summa": 2 * n**3, "cholesky": n**3 / 3, "lu": 2 * n**3 / 3}[p["app"]]
rate = flops / o["seconds"]
per = rate / r["ranks"] / r["dgemm_flops_per_core"]
print(f"| {p['app']} | {p['variant']} | {n} | {r['ranks']} | {p['grid'][0]}×{p['grid'][1]} "
      f"| {o['seconds']:.3f} | {rate*1e-9:.1f} | {100*per:.0f}% | {100*o['comm_seconds']/o['seconds']:.0f}% "
      f"| {b['seconds']:.3f} | **{b['seconds']/o['seconds']:.2f}** |")
PY
    done
  done
done
