#!/bin/sh
# NPB kernels at every instruction-set level this CPU has, in turns, best of N runs each:
# the AVX2 and scalar forms measured on the same host, in the same run, as the default.
#
#   scripts/npb-levels.sh [RUNS] [CLASSES] [KERNELS] [RANKS] [LEVELS]
#   scripts/npb-levels.sh 3 "A B" "ep is cg mg ft" 2 "avx512 avx2 scalar"
#
# Prints one line per kernel and class: the best time at each level, and each level's
# time over the first level's. Every run must verify; a failed one stops the script.
set -eu
runs=${1:-3}
classes=${2:-"A B"}
kernels=${3:-"ep is cg mg ft"}
ranks=${4:-2}
levels=${5:-"avx512 avx2 scalar"}
cd "$(dirname "$0")/.."
cargo build --release --locked -q -p tessera-cli
bin=target/release/tessera
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
grep -m1 'model name' /proc/cpuinfo | sed 's/.*: /host: /'
if grep -q avx512f /proc/cpuinfo; then echo "cpu: AVX-512"; else echo "cpu: AVX2 only"; fi
for c in $classes; do
    for k in $kernels; do
        for i in $(seq "$runs"); do
            for l in $levels; do
                TESSERA_SIMD=$l $bin npb "$k" --class "$c" -n "$ranks" \
                    --json "$out/$k-$c-$l-$i.json" >/dev/null 2>"$out/log" \
                    || { cat "$out/log" >&2; exit 1; }
            done
        done
    done
done
python3 - "$out" "$runs" "$classes" "$kernels" "$levels" <<'EOF'
import json, sys
out, runs, classes, kernels, levels = sys.argv[1], int(sys.argv[2]), *[a.split() for a in sys.argv[3:]]
print(f"{'kernel':<6} {'class':<5} " + " ".join(f"{l + ' (s)':>12}" for l in levels)
      + " " + " ".join(f"{l + '/' + levels[0]:>14}" for l in levels[1:]) + "  level used")
for c in classes:
    for k in kernels:
        best, used = [], []
        for l in levels:
            rs = [json.load(open(f"{out}/{k}-{c}-{l}-{i}.json")) for i in range(1, runs + 1)]
            assert all(r["verified"] for r in rs), f"{k} {c} {l} did not verify"
            best.append(min(r["time_s"] for r in rs))
            used.append(rs[0]["simd"])
        print(f"{k.upper():<6} {c:<5} " + " ".join(f"{t:>12.3f}" for t in best)
              + " " + " ".join(f"{t / best[0]:>14.2f}" for t in best[1:]) + "  " + ",".join(used))
EOF
