#!/usr/bin/env bash
# Each NPB kernel's communication, as seed 003 characterises them: one run of every kernel
# with statistics on, its per-kind table (operations and bytes per rank), and the heat map
# of bytes between ranks, copied to docs/pictures/npb-<kernel>-<class>-<ranks>.png.
#
#   scripts/npb-communication.sh [CLASS=B] [RANKS=4]
#   TESSERA_BIN=/path/to/tessera OUT=/tmp/npb-comm scripts/npb-communication.sh B 4
#
# TESSERA_BIN names the tessera executable (default target/release/tessera); OUT keeps the
# statistics, results and reports (default ./npb-communication).
set -euo pipefail
cd "$(dirname "$0")/.."
class=${1:-B}
ranks=${2:-4}
tessera=${TESSERA_BIN:-target/release/tessera}
out=${OUT:-npb-communication}
if [ ! -x "$tessera" ]; then
  echo "npb-communication: no tessera at $tessera; build it (cargo build --release) or set TESSERA_BIN" >&2
  exit 1
fi
mkdir -p "$out" docs/pictures
lower=$(echo "$class" | tr '[:upper:]' '[:lower:]')
"$tessera" npb all --class "$class" -n "$ranks" --quiet \
  --stats "$out/stats.json" --json "$out/npb.json" > "$out/npb.txt"
for kernel in ep is cg mg ft; do
  file="$out/stats.$kernel.json"
  [ -f "$file" ] || continue
  echo "== $kernel"
  "$tessera" report "$file" -o "$out/$kernel" --format png | sed -n '/Traffic between ranks/,/^$/p'
  cp "$out/$kernel/heatmap.png" "docs/pictures/npb-$kernel-$lower-$ranks.png"
done
