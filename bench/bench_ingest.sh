#!/usr/bin/env bash
# bench_ingest.sh [PACKTRAIN] [--quick] — ingest speed of packtrain vs ASE.
#
# Reads the QM9 subset (../shared/data/qm9_13k.extxyz.gz) with
# `packtrain ingest` and with ASE's ase.io.read(path, index=":") in the same
# run, timing only the parse on both sides: packtrain's "parse_seconds"
# (read + validate + stream columns, best of 5 runs) and the read call in
# bench/ingest_ase.py (best of 3; its import is not counted).
#
# Two comparisons are printed:
#   * the same uncompressed copy of the file for both parsers;
#   * the shipped .gz file for both.  ASE re-decompresses the gzip stream on
#     every backward seek of its frame scan, so this takes it ~10 minutes;
#     --quick skips it (and then compares packtrain on the .gz with ASE on
#     the uncompressed copy, ASE's best case).
set -euo pipefail
cd "$(dirname "$0")/.."

bin=bin/packtrain
quick=0
for arg in "$@"; do
  case $arg in
    --quick) quick=1 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) bin=$arg ;;
  esac
done
data=../shared/data/qm9_13k.extxyz.gz
python=/usr/bin/python3
[ -x "$bin" ] || { echo "bench_ingest: no packtrain binary at $bin (run make first)" >&2; exit 2; }
[ -f "$data" ] || { echo "bench_ingest: missing $data" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
plain=$tmp/qm9_13k.extxyz
zcat "$data" > "$plain"

json_field() { # json_field FIELD < json
  "$python" -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"
}

packtrain_best() { # packtrain_best FILE RUNS -> "seconds structures"
  local best="" n="" s
  for _ in $(seq "$2"); do
    "$bin" ingest "$1" --out "$tmp/out.ptd" --json > "$tmp/pt.json"
    s=$(json_field parse_seconds < "$tmp/pt.json")
    n=$(json_field structures < "$tmp/pt.json")
    best=$("$python" -c "print(min(float('$s'), float('${best:-inf}')))")
  done
  echo "$best $n"
}

ase_best() { # ase_best FILE RUNS -> "seconds structures"
  local best="" n="" s
  for _ in $(seq "$2"); do
    "$python" bench/ingest_ase.py "$1" > "$tmp/ase.json"
    s=$(json_field seconds < "$tmp/ase.json")
    n=$(json_field structures < "$tmp/ase.json")
    best=$("$python" -c "print(min(float('$s'), float('${best:-inf}')))")
  done
  echo "$best $n"
}

ratio() { "$python" -c "print('%.0fx' % ($1 / $2))"; }

read -r pt_plain n1 < <(packtrain_best "$plain" 5)
read -r pt_gz n2 < <(packtrain_best "$data" 5)
read -r ase_plain n3 < <(ase_best "$plain" 3)
if [ "$n1" != "$n3" ] || [ "$n2" != "$n3" ]; then
  echo "bench_ingest: structure counts differ (packtrain $n1/$n2, ASE $n3)" >&2
  exit 1
fi

echo "ingest: $data ($n3 structures), parse time only"
printf '  %-44s %10s %10s %8s\n' "input" "packtrain" "ASE" "ratio"
printf '  %-44s %9.3fs %9.2fs %8s\n' "uncompressed copy (both)" "$pt_plain" "$ase_plain" "$(ratio "$ase_plain" "$pt_plain")"
if [ $quick -eq 0 ]; then
  read -r ase_gz n4 < <(ase_best "$data" 1)
  [ "$n4" = "$n3" ] || { echo "bench_ingest: ASE read $n4 structures from the .gz" >&2; exit 1; }
  printf '  %-44s %9.3fs %9.2fs %8s\n' ".gz as shipped (both)" "$pt_gz" "$ase_gz" "$(ratio "$ase_gz" "$pt_gz")"
fi
printf '  %-44s %9.3fs %9.2fs %8s\n' ".gz (packtrain) vs uncompressed (ASE)" "$pt_gz" "$ase_plain" "$(ratio "$ase_plain" "$pt_gz")"
