#!/usr/bin/env bash
# Simulated hosts: run the mpi conduit across several "hosts" on this machine.
#
# `scripts/simulated-hosts.sh [HOSTS]` (default 2, at most 8) creates HOSTS network
# namespaces joined by veth pairs to a bridge (10.77.0.0/24, private, inside this
# machine), and starts ranks in them through Open MPI over TCP: mpirun runs here and
# reaches each namespace through a tiny launch agent (`ip netns exec` plus `unshare --uts`,
# so that each namespace has its own host name and MPI sees separate hosts). Each
# namespace is given its share of this machine's cores (`taskset`: one core each where
# there are more hosts than cores), and MPI is told to yield while it waits
# (`mpi_yield_when_idle`), so that ranks of different "hosts" on one core take turns
# instead of spinning against each other.
# With 2 hosts: the conduit conformance suite at 4 ranks (2 + 2) and 3 ranks (2 + 1), NPB
# IS and CG class S at 4 ranks, the busy_target example with the progress thread (reads
# from a computing rank must complete), and OpenSHMEM C programs at 3 PEs (2 + 1).
# With more: the conformance suite and NPB IS, CG and MG class S with 2 ranks per host,
# and the cross-host barrier beside MPI_Barrier (`bench rma`, one rank per host).
# Everything it created is removed, even on failure.
# `scripts/simulated-hosts.sh run A,B,... ARGS...` runs one tessera command instead, with
# A ranks on the first host, B on the second, and so on.
#
# Needs root (namespaces), iproute2, util-linux's unshare and taskset, Open MPI, and a
# tessera built with the mpi feature (TESSERA_BIN, default target/release/tessera).
# Without root or without these it says so and exits 0 (skipped), so CI can always call
# it.
set -euo pipefail
cd "$(dirname "$0")/.."

skip() {
  echo "simulated hosts: SKIPPED: $*"
  exit 0
}
[ "$(id -u)" -eq 0 ] || skip "needs root to create network namespaces"
for tool in ip unshare mpirun taskset; do
  command -v "$tool" >/dev/null 2>&1 || skip "needs $tool"
done
tessera=${TESSERA_BIN:-target/release/tessera}
[ -x "$tessera" ] || skip "no $tessera (build with: cargo build --release --features tessera-cli/mpi)"

if [ "${1:-}" = "run" ]; then
  IFS=, read -r -a counts <<<"${2:?usage: simulated-hosts.sh run A,B,... TESSERA-ARGS...}"
  nhosts=${#counts[@]}
else
  nhosts=${1:-2}
fi
case $nhosts in
  [2-8]) ;;
  *) echo "simulated hosts: the host count must be 2 to 8, not $nhosts" >&2; exit 2 ;;
esac

tag=$$
bridge=tsbr$tag
hosts=()
for ((i = 0; i < nhosts; i++)); do hosts+=("tshost$i-$tag"); done
agent=$(mktemp /tmp/tessera-ns-agent.XXXXXX)
cleanup() {
  for ((i = 0; i < nhosts; i++)); do
    ip netns del "${hosts[$i]}" 2>/dev/null || true
    ip link del "tsv$i$tag" 2>/dev/null || true
  done
  ip link del "$bridge" 2>/dev/null || true
  rm -f "$agent"
}
trap cleanup EXIT

echo "== simulated hosts: $nhosts namespaces ${hosts[*]} on bridge $bridge (10.77.0.0/24)"
ip netns add "${hosts[0]}" 2>/dev/null || skip "cannot create network namespaces here"
for ((i = 1; i < nhosts; i++)); do ip netns add "${hosts[$i]}"; done
ip link add "$bridge" type bridge
ip addr add 10.77.0.1/24 dev "$bridge"
ip link set "$bridge" up
for ((i = 0; i < nhosts; i++)); do
  ns=${hosts[$i]}
  ip link add "tsv$i$tag" type veth peer name eth0 netns "$ns"
  ip link set "tsv$i$tag" master "$bridge" up
  ip netns exec "$ns" ip addr add "10.77.0.1$i/24" dev eth0
  ip netns exec "$ns" ip link set eth0 up
  ip netns exec "$ns" ip link set lo up
done

# Each host's share of the cores: contiguous ranges where cores outnumber hosts, else one
# core each, taken in turn.
cores=$(nproc)
cpus_of() {
  local i=$1
  if [ "$nhosts" -ge "$cores" ]; then
    echo $((i % cores))
  else
    local per=$((cores / nhosts))
    echo "$((i * per))-$((i * per + per - 1))"
  fi
}
# The launch agent mpirun uses instead of ssh: `agent HOST COMMAND...`.
{
  echo '#!/bin/sh'
  echo 'host=$1'
  echo 'shift'
  echo 'case $host in'
  for ((i = 0; i < nhosts; i++)); do echo "  ${hosts[$i]}) cpus=$(cpus_of "$i") ;;"; done
  echo '  *) echo "unknown simulated host $host" >&2; exit 1 ;;'
  echo 'esac'
  echo 'exec ip netns exec "$host" taskset -c "$cpus" unshare --uts sh -c "hostname $host; $*"'
} >"$agent"
chmod +x "$agent"

# TCP between hosts (on the bridge only), shared memory within one; MPI windows through
# osc/pt2pt, which works over TCP (Debian's Open MPI turns it off by default).
common="--mca plm_rsh_agent $agent --mca plm_rsh_no_tree_spawn 1"
common="$common --mca oob_tcp_if_include 10.77.0.0/24 --mca btl tcp,self,vader"
common="$common --mca btl_tcp_if_include 10.77.0.0/24 --mca osc pt2pt"
# Each namespace's daemon believes it has the machine's cores to itself and would bind its
# first rank to core 0 on both "hosts": the two ranks would then share one core and every
# round trip would wait for a scheduler tick (8 ms instead of 8 us).
common="$common --bind-to none --mca mpi_yield_when_idle 1"

run() {
  local slots=$1
  shift
  local list=() placed=() i=0
  IFS=, read -r -a list <<<"$slots"
  for n in "${list[@]}"; do
    placed+=("${hosts[$i]}:$n")
    i=$((i + 1))
  done
  local hostlist
  hostlist=$(IFS=,; echo "${placed[*]}")
  echo "-- $* on $hostlist"
  # The (sub)command words come first; the conduit options go before the first option,
  # so they never land after a `--` meant for the program.
  local words=()
  for arg in "$@"; do
    case $arg in -*) break ;; esac
    words+=("$arg")
  done
  TESSERA_MPIRUN_ARGS="--host $hostlist $common" \
    timeout 300 "$tessera" "${words[@]}" --conduit mpi --timeout 280 "${@:${#words[@]}+1}"
}
if [ "${1:-}" = "run" ]; then
  # scripts/simulated-hosts.sh run A,B,... TESSERA-ARGS...: one tessera command, A ranks
  # on the first host, B on the second, ... (e.g. `run 1,1 bench rma -n 2 --json
  # out.json`, or `run 1,1 run -n 2 -- target/release/examples/busy_target 1`).
  shift
  slots=$1
  shift
  run "$slots" "$@"
  exit
fi
if [ "$nhosts" -gt 2 ]; then
  two=$(for ((i = 0; i < nhosts; i++)); do printf '2,'; done)
  two=${two%,}
  one=$(for ((i = 0; i < nhosts; i++)); do printf '1,'; done)
  one=${one%,}
  ranks=$((2 * nhosts))
  run "$two" selftest -n "$ranks" --segment 64M
  for kernel in is cg mg; do
    run "$two" npb "$kernel" --class S -n "$ranks"
  done
  # The cross-host barrier beside MPI_Barrier in the same job, one rank per host.
  out=$(run "$one" bench rma --quick -n "$nhosts" --barrier-ranks "$nhosts")
  echo "$out" | grep -E "barrier" || { echo "$out"; echo "simulated hosts: FAILED: no barrier row in bench rma" >&2; exit 1; }
  echo "== simulated hosts ($nhosts): passed"
  exit
fi
run 2,2 selftest -n 4 --segment 64M
run 2,1 selftest -n 3 --segment 64M
run 2,2 npb is --class S -n 4
run 2,2 npb cg --class S -n 4
# The progress thread: gets from a rank that computes for a second without entering MPI
# complete meanwhile (without the thread the first one waits out the whole second).
example=target/release/examples/busy_target
if [ ! -x "$example" ]; then
  echo "simulated hosts: FAILED: no $example; build it with: cargo build --release --features tessera-cli/mpi -p tessera-cli --examples" >&2
  exit 1
fi
out=$(TESSERA_MPI_PROGRESS=100 run 1,1 run -n 2 -- "$example" 1)
echo "$out"
gets=$(echo "$out" | sed -n 's/^rank 1: \([0-9]*\) gets.*/\1/p')
if [ "${gets:-0}" -lt 10 ]; then
  echo "simulated hosts: FAILED: with the progress thread only ${gets:-0} gets completed while the target computed" >&2
  exit 1
fi
# OpenSHMEM C programs across the two hosts: globals, heap, RMA, AMOs, waits, locks and
# active-set collectives, 1.5 teams (SHMEM_TEAM_SHARED is each host's PEs), put-with-signal
# (one message to the other host), multi-valued waits, and threads (SERIALIZED there:
# the PE on the other host is not mapped), with the library installed from the same build.
shmem=$(mktemp -d /tmp/tessera-shmem-hosts.XXXXXX)
trap 'cleanup; rm -rf "$shmem"' EXIT
"$tessera" shmem install --prefix "$shmem" >/dev/null
for t in setup collectives teams signals waits threads; do
  cp "crates/tessera-shmem/tests/c/$t.c" "$shmem/"
done
cp crates/tessera-shmem/tests/c/check.h "$shmem/"
for t in setup collectives teams signals waits threads; do
  "$shmem/bin/oshcc" -O1 -std=c99 "$shmem/$t.c" -o "$shmem/$t"
  out=$(run 2,1 run -n 3 -- "$shmem/$t")
  echo "$out"
  echo "$out" | grep -q "^$t: OK" || { echo "simulated hosts: FAILED: OpenSHMEM $t across hosts" >&2; exit 1; }
done
echo "== simulated hosts: passed"
