#!/usr/bin/env bash
# bench_ase_db.sh [PACKTRAIN] [--keep DIR] — reading an ASE database (.db):
# packtrain ingest against ASE's own ase.db.connect(path).select(), same
# file, same run.
#
# The database is made first from ../shared/data/emt_20k.extxyz.gz (20,000
# periodic structures, 1-50 atoms) with ASE, as a calculation writes one:
# energy, forces and stress in the calculator columns (bench/ase_db_bench.py
# make; about a minute, not timed; --keep DIR keeps it in DIR for later runs).
# Then, timing only the read on both sides:
#   packtrain: "parse_seconds" of `packtrain ingest DB --json` (open, survey
#              every row, decode, validate, stream the columns; best of 5),
#              and the wall time of the whole command (with the .ptd write);
#   ASE:       the select() loop of bench/ase_db_bench.py read, touching
#              numbers, positions, cell, pbc, energy, forces, stress (best of 3;
#              importing ASE not timed).
set -euo pipefail
cd "$(dirname "$0")/.."

bin=bin/packtrain
keep=""
while [ $# -gt 0 ]; do
  case $1 in
    --keep) keep=$2; shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) bin=$1 ;;
  esac
  shift
done
src=../shared/data/emt_20k.extxyz.gz
python=/usr/bin/python3
[ -x "$bin" ] || { echo "bench_ase_db: no packtrain binary at $bin (run make first)" >&2; exit 2; }
[ -f "$src" ] || { echo "bench_ase_db: missing $src" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
dir=${keep:-$tmp}
mkdir -p "$dir"
db=$dir/emt_20k.db
if [ ! -s "$db" ]; then
  echo "making $db from $src with ASE (not timed) ..." >&2
  "$python" bench/ase_db_bench.py make "$src" "$db" >/dev/null
fi

field() { "$python" -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
minimum() { "$python" -c 'import sys; print(min(float(x) for x in sys.argv[1:]))' "$@"; }

pt_parse=() pt_wall=()
for _ in 1 2 3 4 5; do
  t0=$(date +%s.%N)
  "$bin" ingest "$db" --out "$tmp/out.ptd" --json >"$tmp/pt.json"
  t1=$(date +%s.%N)
  pt_parse+=("$(field parse_seconds <"$tmp/pt.json")")
  pt_wall+=("$("$python" -c "print($t1 - $t0)")")
done
n_pt=$(field structures <"$tmp/pt.json")
atoms_pt=$(field atoms <"$tmp/pt.json")
ase=()
for _ in 1 2 3; do
  "$python" bench/ase_db_bench.py read "$db" >"$tmp/ase.json"
  ase+=("$(field seconds <"$tmp/ase.json")")
done
n_ase=$(field rows <"$tmp/ase.json")
atoms_ase=$(field atoms <"$tmp/ase.json")
[ "$n_pt" == "$n_ase" ] && [ "$atoms_pt" == "$atoms_ase" ] || {
  echo "bench_ase_db: the two sides read different data: packtrain $n_pt/$atoms_pt, ASE $n_ase/$atoms_ase" >&2; exit 1; }

p=$(minimum "${pt_parse[@]}"); w=$(minimum "${pt_wall[@]}"); a=$(minimum "${ase[@]}")
"$python" - "$p" "$w" "$a" "$n_pt" "$atoms_pt" "$(stat -c %s "$db")" <<'EOF'
import sys
p, w, a = (float(x) for x in sys.argv[1:4])
n, atoms, size = (int(x) for x in sys.argv[4:7])
print(f"ASE database: {n} structures, {atoms} atoms, {size / 1e6:.1f} MB")
print(f"{'reader':44s} {'seconds':>8s} {'ratio':>8s}")
print(f"{'ASE ase.db.connect().select() (best of 3)':44s} {a:8.3f} {1:8.2f}")
print(f"{'packtrain ingest, parse_seconds (best of 5)':44s} {p:8.3f} {a / p:7.1f}x")
print(f"{'packtrain ingest, whole command (best of 5)':44s} {w:8.3f} {a / w:7.1f}x")
EOF
