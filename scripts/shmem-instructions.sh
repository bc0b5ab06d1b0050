#!/usr/bin/env bash
# What the C layer costs per call, counted rather than timed: instructions per call of
# each operation of crates/tessera-shmem/bench/shmem_bench.c (`count OP N` mode) against
# the same call through the Rust API (examples/shmem_twin.rs, `count OP N`), under
# valgrind's callgrind at one PE, where nothing waits. A count does not move with the
# load on a shared host, as times do; it shows the fixed cost the C layer adds to each
# call, which is what separates the two once the communication is the same.
# Each figure is (instructions of a run with N calls - those of a run with none) / N.
#
#   scripts/shmem-instructions.sh [N=20000] [OPS="put8 get8 ..."]
# Needs valgrind (apt-get install valgrind).
set -euo pipefail
cd "$(dirname "$0")/.."
calls="${1:-20000}"
ops="${2:-put8 get8 fetch_add8 put_signal8 put_fence_set8 barrier_all broadcast32 fcollect64 sum_to_all team_sum_world team_sum_split team_alltoall_world}"
command -v valgrind >/dev/null || { echo "shmem-instructions: needs valgrind (apt-get install valgrind)" >&2; exit 1; }
# Its own target directory: a build here, without the mpi or scalapack features, would
# otherwise replace the binaries that other scripts built with them; and the tessera
# binary is built too, since it installs the library being measured.
out="${CARGO_TARGET_DIR:-target/shmem-bench}"
CARGO_TARGET_DIR="$out" cargo build --quiet --release --locked -p tessera-cli --bins --examples
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$out/release/tessera" shmem install --prefix "$work/tessera" >/dev/null
"$work/tessera/bin/oshcc" -O2 -std=gnu99 crates/tessera-shmem/bench/shmem_bench.c -o "$work/bench"
vg=(valgrind --tool=callgrind --callgrind-out-file=/dev/null)
# Instructions counted in a run's output.
collected() { awk '/Collected :/ { gsub(",", "", $NF); print $NF }' | tail -1; }
# Instructions of the C program, or of the Rust twin, making N calls of OP at one PE.
c_count() { "$work/tessera/bin/oshrun" -np 1 "${vg[@]}" "$work/bench" count "$1" "$2" 2>&1 | collected; }
r_count() { "$out/release/tessera" run -n 1 -- "${vg[@]}" "$out/release/examples/shmem_twin" count "$1" "$2" 2>&1 | collected; }
printf "%-22s %12s %12s %10s %9s\n" operation "C instr" "Rust instr" "C - Rust" "C / Rust"
for op in $ops; do
  c0=$(c_count "$op" 0); c1=$(c_count "$op" "$calls")
  r0=$(r_count "$op" 0); r1=$(r_count "$op" "$calls")
  python3 -c "
c = ($c1 - $c0) / $calls; r = ($r1 - $r0) / $calls
print(f'{\"$op\":<22} {c:>12.1f} {r:>12.1f} {c - r:>+10.1f} {c / r:>9.3f}')"
done
