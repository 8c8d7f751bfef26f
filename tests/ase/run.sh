#!/usr/bin/env bash
# run.sh [PACKTRAIN] — periodic structures against ASE (python3-ase), on the
# periodic test slice tests/data/periodic_slice.extxyz.gz (made by
# make_periodic_slice.py: bulk cells of 1, 4 and 32 atoms, slabs "T T F" and
# fully periodic with vacuum, wires along each axis, slabs along other axis
# pairs, very skewed triclinic bases, atoms outside their cell):
#   - `packtrain ingest` stores what ase.io.read reads (ptd_vs_ase.py):
#     numbers, positions, cell, pbc, forces, stress, energy;
#   - the neighbour graphs of `packtrain pack --dump-graphs` equal
#     ase.neighborlist.primitive_neighbor_list (graphs_vs_ase.py): the same
#     (receiver, sender, shift) triples and distances within 1e-5 Å, for
#     several cutoffs, with max_neighbors unlimited and capped (the nearest k
#     by distance, sender, shift, applied to ASE's list in Python), in radius
#     and knn mode.
# Fails when ASE is missing (make test installs it).  The last line is
# "N passed, N failed".
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=${1:-${PACKTRAIN_BIN:-$root/bin/packtrain}}
py=/usr/bin/python3
data=$root/tests/data/periodic_slice.extxyz.gz
passed=0; failed=0

if ! "$py" -c 'import ase' 2>/dev/null; then
  echo "FAIL: python3-ase is not installed (make test installs it as root; or SKIP=ase)"
  echo "0 passed, 1 failed"; exit 1
fi
if [ ! -x "$bin" ]; then
  echo "FAIL: no packtrain binary at $bin"; echo "0 passed, 1 failed"; exit 1
fi
work=$(mktemp -d /tmp/pt_ase_XXXXXX)
trap 'rm -rf "$work"' EXIT

check() {  # name, command...
  local name=$1; shift
  if "$@" >"$work/out" 2>&1; then
    echo "ok   $name: $(tail -1 "$work/out")"; passed=$((passed + 1))
  else
    echo "FAIL $name"; cat "$work/out"; failed=$((failed + 1))
  fi
}

check "ingest the periodic slice" "$bin" ingest "$data" --out "$work/slice.ptd"
check "stored structures equal ASE's reading" "$py" "$here/ptd_vs_ase.py" "$data" "$work/slice.ptd"

graphs() {  # name, pack options...
  local name=$1; shift
  if ! "$bin" pack "$work/slice.ptd" --dump-graphs "$work/g" "$@" >"$work/out" 2>&1; then
    echo "FAIL $name: packtrain pack $*"; cat "$work/out"; failed=$((failed + 1)); return
  fi
  check "$name" "$py" "$here/graphs_vs_ase.py" "$data" "$work/g"
}
graphs "graphs, cutoff 6 Å, unlimited" --cutoff 6 --max-neighbors unlimited
graphs "graphs, cutoff 6 Å, max_neighbors 32" --cutoff 6 --max-neighbors 32
graphs "graphs, cutoff 6 Å, knn k = 24" --cutoff 6 --max-neighbors 24 --knn
graphs "graphs, cutoff 4.5 Å, max_neighbors 12" --cutoff 4.5 --max-neighbors 12
graphs "graphs, cutoff 8 Å, unlimited" --cutoff 8 --max-neighbors unlimited
graphs "graphs, cutoff 2.2 Å, unlimited" --cutoff 2.2 --max-neighbors unlimited

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
