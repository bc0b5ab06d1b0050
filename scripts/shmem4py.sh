#!/usr/bin/env bash
# shmem4py, Python's OpenSHMEM bindings, built from PyPI's source distribution against
# Tessera's installation with its oshcc (as shmem4py's build documents: the compiler is
# whatever `oshcc` is on the PATH), then shmem4py's own test suite, which ships in that
# source distribution, run under oshrun at 1, 2 and 4 PEs. Prints one line per run with the
# suite's counts, and fails if any run fails.
#
#   scripts/shmem4py.sh            (uses target/release/tessera; TESSERA_BIN overrides)
set -euo pipefail
cd "$(dirname "$0")/.."
tessera=${TESSERA_BIN:-target/release/tessera}
work=$(mktemp -d /tmp/tessera-shmem4py.XXXXXX)
trap 'rm -rf "$work"' EXIT

"$tessera" shmem install --prefix "$work/prefix" >/dev/null
python3 -m venv "$work/venv"
# shellcheck disable=SC1091
. "$work/venv/bin/activate"
# Pinned: shmem4py 1.0.0 and what it builds with. Its tests predate numpy 2 (they rely
# on numpy 1's copy and integer-overflow rules), so numpy stays at 1.26.
pip install -q --disable-pip-version-check "cffi==2.0.0" "numpy==1.26.4" "setuptools==80.9.0" "wheel==0.45.1"
pip download -q --disable-pip-version-check --no-binary :all: --no-deps "shmem4py==1.0.0" -d "$work"
PATH="$work/prefix/bin:$PATH" pip install -q --disable-pip-version-check \
  --no-binary shmem4py --no-build-isolation "$work/shmem4py-1.0.0.tar.gz"
tar xzf "$work/shmem4py-1.0.0.tar.gz" -C "$work"

status=0
for pes in 1 2 4; do
  log="$work/test-$pes.log"
  if "$work/prefix/bin/oshrun" -np "$pes" --timeout 600 \
      python -m unittest discover -s "$work/shmem4py-1.0.0/test" >"$log" 2>&1; then
    outcome=passed
  else
    outcome=FAILED
    status=1
  fi
  # Every PE runs the whole suite and prints its own summary (the PEs' lines may run
  # together); the first of each is reported, the exit status covers them all.
  ran=$( (grep -o 'Ran [0-9]* tests' "$log" || echo 'Ran ? tests') | sed -n 1p)
  summary=$( (grep -oE '^(OK|FAILED)( \([^)]*\))?' "$log" || echo '?') | sed -n 1p)
  echo "shmem4py 1.0.0 at $pes PE(s): $outcome: $ran, $summary"
  if [ "$outcome" = FAILED ]; then
    tail -40 "$log" >&2
  fi
done
exit $status
