#!/bin/sh
# NPB kernels at every instruction-set level this CPU has, in turns, best of N runs each:
# the AVX2 and scalar forms measured on the same host, in the same run, as the default.
#
#   scripts/npb-levels.sh [RUNS] [CLASSES] [KERNELS] [RANKS] [LEVELS]
#   scripts/npb-levels.sh 3 "A B" "ep is cg mg ft" 2 "avx512 avx2 scalar"
#
# A level named `prev` runs the binary in $PREV_BIN (an earlier build, at its own default
# level) in the same turns; classes it does not know are skipped for it. Every run of this
# build measures the hardware bounds (`--bounds`), and the last column is the first
# level's fraction of the limit that binds the kernel (memory bandwidth or the
# floating-point peak). Prints one line per kernel and class: the best time at each
# level, and each level's time over the first level's. Every run must verify; a failed
# one stops the script.
set -eu
runs=${1:-3}
classes=${2:-"A B"}
kernels=${3:-"ep is cg mg ft"}
ranks=${4:-2}
levels=${5:-"avx512 avx2 scalar"}
cd "$(dirname "$0")/.."
# Its own target directory: a build here, without the mpi or scalapack features, would
# otherwise replace the binary that other scripts built with them in target/release.
out="${CARGO_TARGET_DIR:-target/npb-levels}"
CARGO_TARGET_DIR="$out" cargo build --release --locked -q -p tessera-cli
bin="$out/release/tessera"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
grep -m1 'model name' /proc/cpuinfo | sed 's/.*: /host: /'
if grep -q avx512f /proc/cpuinfo; then echo "cpu: AVX-512"; else echo "cpu: AVX2 only"; fi
for c in $classes; do
    for k in $kernels; do
        for i in $(seq "$runs"); do
            for l in $levels; do
                json="$out/$k-$c-$l-$i.json"
                if [ "$l" = prev ]; then
                    # An earlier build may not know this class: skip it there.
                    "${PREV_BIN:?set PREV_BIN to the earlier build}" npb "$k" --class "$c" \
                        -n "$ranks" --json "$json" >/dev/null 2>"$out/log" || rm -f "$json"
                else
                    TESSERA_SIMD=$l $bin npb "$k" --class "$c" -n "$ranks" --bounds \
                        --json "$json" >/dev/null 2>"$out/log" \
                        || { cat "$out/log" >&2; exit 1; }
                fi
            done
        done
    done
done
python3 - "$out" "$runs" "$classes" "$kernels" "$levels" <<'PY'
import json, os, sys
out, runs, classes, kernels, levels = sys.argv[1], int(sys.argv[2]), *[a.split() for a in sys.argv[3:]]
print(f"{'kernel':<6} {'class':<5} " + " ".join(f"{l + ' (s)':>12}" for l in levels)
      + " " + " ".join(f"{l + '/' + levels[0]:>14}" for l in levels[1:]) + "  bound  level used")
for c in classes:
    for k in kernels:
        best, used, bound = [], [], "-"
        for l in levels:
            files = [f"{out}/{k}-{c}-{l}-{i}.json" for i in range(1, runs + 1)]
            rs = [json.load(open(f)) for f in files if os.path.exists(f)]
            if not rs:
                best.append(None); used.append("-"); continue
            assert all(r["verified"] is not False for r in rs), f"{k} {c} {l} did not verify"
            fastest = min(rs, key=lambda r: r["time_s"])
            best.append(fastest["time_s"])
            used.append(fastest.get("simd") or l)
            if l == levels[0] and "bound" in fastest:
                bound = f"{100 * fastest['bound']['fraction']:.1f}%"
        cell = lambda t: f"{t:>12.3f}" if t is not None else f"{'-':>12}"
        ratio = lambda t: f"{t / best[0]:>14.2f}" if t is not None and best[0] else f"{'-':>14}"
        print(f"{k.upper():<6} {c:<5} " + " ".join(cell(t) for t in best)
              + " " + " ".join(ratio(t) for t in best[1:]) + f"  {bound:>5}  " + ",".join(used))
PY
