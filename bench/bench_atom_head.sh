#!/usr/bin/env bash
# bench_atom_head.sh [BINARY] [EPOCHS] [N] — what a per-atom head costs and
# gives (issue 20): on the first N structures of ../shared/data/emt_20k
# (slabs and bulk cells) with ASE's per-atom EMT energies added (made here by
# tests/data/make_emt_atom_energies.py, which checks they sum to each stored
# EMT energy), the same SchNet trained on the energy alone and on the energy
# plus an atom-level head on the per-atom energies ({"key": "energies",
# "level": "atom"}), same data, split, seed, optimizer and epochs, energy
# only (forces_weight 0) so that the one difference is the second head.
#
# Printed: training throughput (graphs/s over the optimizer steps, from
# result.json: graphs / step_seconds) and wall seconds of each run, their
# ratio (2-head / energy alone, measured in the same run, runs alternating
# over ROUNDS rounds, default 2), the test energy MAE of both, and the atom
# head's per-atom test MAE/RMSE next to the spread (std) of the per-atom
# energies, the error of predicting their mean.  The load average before
# and after is printed with the numbers.  Defaults: 8 epochs, N = 2000
# (a few minutes on 2 cores).  Raw results as JSON in $OUT
# (default /tmp/bench_atom_head.json).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-bin/packtrain}
epochs=${2:-8}
n=${3:-2000}
rounds=${ROUNDS:-2}
out=${OUT:-/tmp/bench_atom_head.json}
cores=$(nproc)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
/usr/bin/python3 tests/data/make_emt_atom_energies.py ../shared/data/emt_20k.extxyz.gz \
  "$tmp/emt_atom.extxyz.gz" "$n" >&2
"$bin" ingest "$tmp/emt_atom.extxyz.gz" --out "$tmp/emt.ptd" >/dev/null

# run NAME TARGETS-JSON ROUND
run() {
  local name=$1 targets=$2 round=$3
  cat >"$tmp/$name.json" <<JSON
{"targets":$targets,
 "model":{"hidden":64,"filters":64,"interactions":3,"gaussians":25,"cutoff":5.0,"max_neighbors":32},
 "batching":{"method":"lpfhp","model_batch_size":8},
 "training":{"epochs":$epochs,"lr":0.0005,"log_every":1000,"seed":0,"loss":{"forces_weight":0}},
 "backend":{"threads":$cores}}
JSON
  local t0 t1
  t0=$(date +%s.%N)
  "$bin" train "$tmp/emt.ptd" --config "$tmp/$name.json" --out "$tmp/$name.$round" >/dev/null \
    2>"$tmp/$name.err" || { cat "$tmp/$name.err" >&2; exit 1; }
  t1=$(date +%s.%N)
  echo "{\"name\":\"$name\",\"round\":$round,\"wall\":$(echo "$t1 - $t0" | bc)}" >>"$tmp/runs.jsonl"
  echo "bench_atom_head: $name round $round done ($(echo "$t1 - $t0" | bc | cut -c1-6) s)" >&2
}

for r in $(seq 1 "$rounds"); do
  run energy '[{"key":"energy"}]' "$r"
  run energy_atom '[{"key":"energy"},{"key":"energies","level":"atom"}]' "$r"
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

/usr/bin/python3 - "$tmp" "$out" "$epochs" "$n" "$load_before" "$load_after" "$cores" <<'PY'
import gzip, io, json, statistics, sys
import numpy as np
from ase.io import iread
tmp, out, epochs, n, lb, la, cores = sys.argv[1:8]
runs = []
for line in open(f"{tmp}/runs.jsonl"):
    r = json.loads(line)
    res = json.load(open(f"{tmp}/{r['name']}.{r['round']}/result.json"))
    r["graphs_per_s"] = res["graphs"] / res["step_seconds"]
    r["test_mae"] = res["test_mae"]
    if "heads" in res:
        r["atom_test_mae"] = res["heads"]["energies"]["test_mae"]
        r["atom_test_rmse"] = res["heads"]["energies"]["test_rmse"]
    runs.append(r)
with gzip.open(f"{tmp}/emt_atom.extxyz.gz", "rt") as f:
    e = np.concatenate([a.calc.results["energies"]
                        for a in iread(io.StringIO(f.read()), index=":", format="extxyz")])
spread = float(e.std())
by = {k: [r for r in runs if r["name"] == k] for k in ("energy", "energy_atom")}
rate = {k: statistics.mean(r["graphs_per_s"] for r in v) for k, v in by.items()}
wall = {k: statistics.mean(r["wall"] for r in v) for k, v in by.items()}
mae = {k: statistics.mean(r["test_mae"] for r in v) for k, v in by.items()}
ratios = [b["graphs_per_s"] / a["graphs_per_s"] for a, b in zip(by["energy"], by["energy_atom"])]
print(f"SchNet H=F=64, T=3, cutoff 5 Å, 32 neighbours; first {n} structures of emt_20k with ASE's "
      f"per-atom EMT energies, split 0.8/0.1/0.1, {epochs} epochs, seed 0, energy only "
      f"(forces_weight 0), {cores} cores, {len(by['energy'])} rounds (mean); load average before {lb}, "
      f"after {la}.\n")
print("| model | graphs/s | wall s | test energy MAE (eV) | per-atom test MAE / RMSE (eV) |")
print("|---|---:|---:|---:|---:|")
print(f"| energy alone | {rate['energy']:.0f} | {wall['energy']:.1f} | {mae['energy']:.4g} | |")
a = by["energy_atom"]
print(f"| energy + per-atom energies (atom head) | {rate['energy_atom']:.0f} | {wall['energy_atom']:.1f} | "
      f"{mae['energy_atom']:.4g} | {statistics.mean(r['atom_test_mae'] for r in a):.4g} / "
      f"{statistics.mean(r['atom_test_rmse'] for r in a):.4g} |")
print(f"| ratio (2 heads / energy alone) | {rate['energy_atom'] / rate['energy']:.2f}x "
      f"(per round {', '.join(f'{x:.2f}' for x in ratios)}) | | "
      f"{mae['energy_atom'] / mae['energy']:.2f}x | spread of the per-atom energies {spread:.4g} |")
json.dump({"epochs": int(epochs), "n": int(n), "cores": int(cores), "load_before": lb,
           "load_after": la, "spread": spread, "runs": runs}, open(out, "w"), indent=1)
PY
