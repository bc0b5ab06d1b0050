#!/usr/bin/env bash
# Slurm on this one machine: start jobs the way a cluster's batch system does.
#
# Installs Slurm and munge from the distribution where they are missing (as root), starts
# a private Slurm (its own configuration, state and ports in a fresh directory: one node
# with this machine's processors, more tasks than processors allowed), and checks that:
#   - `srun -n 4` starts a Tessera program built with the mpi feature (4 ranks greet);
#   - inside `salloc`, `tessera npb is --class S -n 4 --conduit mpi` starts its ranks with
#     srun, not mpirun (TESSERA_MPIRUN points nowhere), and verifies;
#   - inside `salloc`, `oshrun -np 4 --conduit mpi` does the same for an OpenSHMEM C
#     program built with Tessera's oshcc;
#   - `--launcher mpirun` inside the allocation uses mpirun after all.
# Then stops the daemons it started and removes the directory, even on failure.
#
# Needs root, apt-get (or Slurm and munge installed), Open MPI, and a tessera built with
# the mpi feature (TESSERA_BIN, default target/release/tessera). Without root it says so
# and exits 0 (skipped), so CI can always call it.
set -euo pipefail
cd "$(dirname "$0")/.."

skip() {
  echo "slurm: SKIPPED: $*"
  exit 0
}
fail() {
  echo "slurm: FAILED: $*" >&2
  exit 1
}
[ "$(id -u)" -eq 0 ] || skip "needs root to install and start Slurm"
tessera=${TESSERA_BIN:-target/release/tessera}
[ -x "$tessera" ] || skip "no $tessera (build with: cargo build --release --features tessera-cli/mpi)"
hello=target/release/examples/hello
[ -x "$hello" ] || fail "no $hello; build it with: cargo build --release --features tessera-cli/mpi -p tessera --examples"
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v srun >/dev/null || ! command -v munged >/dev/null; then
  command -v apt-get >/dev/null || skip "Slurm is not installed and there is no apt-get"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurmd slurmctld slurm-client munge >/dev/null
fi

dir=$(mktemp -d /tmp/tessera-slurm.XXXXXX)
chmod 755 "$dir"
started=()
cleanup() {
  for pid in "${started[@]}"; do kill "$pid" 2>/dev/null || true; done
  sleep 0.5
  for pid in "${started[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT
# The pid a daemon writes to FILE once it runs (it forks first): wait up to 10 s.
pid_in() {
  for _ in $(seq 100); do
    [ -s "$1" ] && { cat "$1"; return; }
    sleep 0.1
  done
  fail "no pid in $1: $2 did not start"
}

# munge authenticates Slurm's messages: a private daemon with its own socket.
mkdir -p "$dir/munge"
chown munge:munge "$dir/munge" 2>/dev/null || true
key=/etc/munge/munge.key
[ -r "$key" ] || fail "no munge key at $key (the munge package creates it)"
runuser -u munge -- munged --socket="$dir/munge/socket" --key-file="$key" \
  --pid-file="$dir/munge/pid" --log-file="$dir/munge/log" --seed-file="$dir/munge/seed" \
  || fail "munged did not start (see $dir/munge/log)"
started+=("$(pid_in "$dir/munge/pid" munged)")

host=$(hostname)
cpus=$(nproc)
mkdir -p "$dir/ctld" "$dir/d"
cat >"$dir/slurm.conf" <<CONF
ClusterName=tessera-ci
SlurmctldHost=$host
SlurmctldPort=16817
SlurmdPort=16818
AuthType=auth/munge
AuthInfo=socket=$dir/munge/socket
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
SlurmUser=root
SlurmdUser=root
SlurmctldPidFile=$dir/ctld/pid
SlurmdPidFile=$dir/d/pid
StateSaveLocation=$dir/ctld
SlurmdSpoolDir=$dir/d
SlurmctldLogFile=$dir/ctld/log
SlurmdLogFile=$dir/d/log
NodeName=$host CPUs=$cpus State=UNKNOWN
PartitionName=ci Nodes=ALL Default=YES MaxTime=30 State=UP OverSubscribe=FORCE:8
CONF
export SLURM_CONF=$dir/slurm.conf
slurmctld -f "$SLURM_CONF" || fail "slurmctld did not start: $(tail -5 "$dir/ctld/log" 2>/dev/null)"
started+=("$(pid_in "$dir/ctld/pid" slurmctld)")
slurmd -f "$SLURM_CONF" || fail "slurmd did not start: $(tail -5 "$dir/d/log" 2>/dev/null)"
started+=("$(pid_in "$dir/d/pid" slurmd)")
for _ in $(seq 100); do
  sinfo -h -o %t 2>/dev/null | grep -q idle && break
  sleep 0.2
done
sinfo -h -o %t | grep -q idle || fail "the node did not come up: $(sinfo 2>&1; tail -5 "$dir/ctld/log")"
echo "== slurm: $(srun --version) on $host ($cpus processors), MPI plugins: $(srun --mpi=list 2>&1 | tr -s '\n\t' '  ')"

echo "-- srun -n 4 $hello"
out=$(timeout 120 srun -n 4 --overcommit --mpi=pmix "$hello")
echo "$out"
[ "$(echo "$out" | grep -c 'of 4 (mpi conduit)')" -eq 4 ] || fail "srun -n 4 did not start 4 ranks of the mpi conduit"

echo "-- salloc -n 4: tessera npb is --class S -n 4 --conduit mpi (mpirun pointing nowhere)"
out=$(TESSERA_MPIRUN=/nonexistent timeout 200 salloc -n 4 --overcommit \
  "$tessera" npb is --class S -n 4 --conduit mpi --timeout 150 2>&1)
echo "$out" | grep -E "Total processes|Verification"
echo "$out" | grep -q "Verification    =               SUCCESSFUL" || { echo "$out"; fail "npb is inside salloc"; }

echo "-- salloc -n 4: oshrun -np 4 --conduit mpi of an OpenSHMEM program"
"$tessera" shmem install --prefix "$dir/shmem" >/dev/null
cp crates/tessera-shmem/tests/c/setup.c crates/tessera-shmem/tests/c/check.h "$dir/shmem/"
"$dir/shmem/bin/oshcc" -O1 -std=c99 "$dir/shmem/setup.c" -o "$dir/shmem/setup"
out=$(TESSERA_MPIRUN=/nonexistent timeout 200 salloc -n 4 --overcommit \
  "$dir/shmem/bin/oshrun" -np 4 --conduit mpi --timeout 150 "$dir/shmem/setup" 2>&1)
echo "$out" | grep "^setup:"
echo "$out" | grep -q "^setup: OK" || { echo "$out"; fail "oshrun inside salloc"; }

echo "-- salloc -n 2: --launcher mpirun uses mpirun after all"
out=$(TESSERA_MPIRUN=/nonexistent timeout 120 salloc -n 2 --overcommit \
  "$tessera" run --launcher mpirun --conduit mpi -n 2 -- "$hello" 2>&1 || true)
echo "$out" | grep -q "starting /nonexistent for the mpi conduit" || { echo "$out"; fail "--launcher mpirun inside salloc"; }
echo "== slurm: passed"
