#!/usr/bin/env bash
# packing_table.sh [PACKTRAIN] — the packing table of both shared datasets.
#
# Ingests ../shared/data/qm9_13k.extxyz.gz and water_20k.extxyz.gz into a
# temporary directory, builds their neighbour graphs (cutoff 6 Å, at most 32
# nearest neighbours per atom, as PyG SchNet), and prints one markdown table
# per dataset with every packing method: lpfhp and tuple at their automatic
# limits (the smallest reaching 95% efficiency), pad, static64, static2n and
# dynamic at batch_size 32.  Efficiency = real / slots occupied; the
# "capacity" columns are against packs x the fixed per-pack limits (they
# differ from the others only for the static methods, whose batches are
# measured against their own padded shape).  Deterministic: rerun anywhere.
set -euo pipefail
cd "$(dirname "$0")/.."

bin=bin/packtrain
for arg in "$@"; do
  case $arg in
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) bin=$arg ;;
  esac
done
data=../shared/data
[ -x "$bin" ] || { echo "packing_table: no packtrain binary at $bin (run make first)" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for name in qm9_13k water_20k; do
  src=$data/$name.extxyz.gz
  [ -r "$src" ] || { echo "packing_table: $src not found" >&2; exit 2; }
  "$bin" ingest "$src" --out "$tmp/$name.ptd" >/dev/null
  echo "### $name — cutoff 6 Å, <= 32 neighbours, auto limits at 95%, batch_size 32"
  echo
  "$bin" pack "$tmp/$name.ptd" --method all --markdown
  echo
done
