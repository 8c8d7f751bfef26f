#!/usr/bin/env bash
# bench_multitask.sh [BINARY] [EPOCHS] — what multi-task training costs and
# gives (issue 20): one SchNet with a head per target against separate
# single-target models, on the QM9 subset (../shared/data/qm9_13k.extxyz.gz),
# same model, data, split, seed, optimizer and epochs for every run:
#
#   gap alone                      1 model
#   homo + lumo + gap              one 3-head model  vs  3 single-target models
#   all QM9 targets of the subset  one 11-head model vs 11 single-target models
#                                  (QM9's 12 less r2, which the subset lacks)
#
# Every run is `packtrain train` of SchNet H=F=64, T=3, G=25, cutoff 5 Å, 32
# neighbours, LPFHP packs of ~2 molecules, 16 packs per step, Adam 5e-4,
# normalize atomref (sum readout; mu is a mean-readout, mean_std target
# whatever the run, as its atomref fit means nothing), split 0.8/0.1/0.1,
# seed 0, threads = cores.  Printed per run: training throughput (graphs/s
# over the optimizer steps, evaluation excluded: result.json's graphs /
# step_seconds) and wall seconds; per target the test MAE of the kept model
# (best validation loss) from the multi-task model and from its own model.
# Ratios in the same run: a K-head model's graphs/s over the single-target
# models' mean, the wall time of K single-target models over one K-head
# model, and each target's MAE (multi / single).  The load average before
# and after is printed with the numbers: on a shared machine throughput
# moves with it (the ratios much less: the runs alternate).
#
# EPOCHS defaults to 6 (a few minutes on 2 cores); the README's table says
# which it used.  Output: a markdown table on stdout, the raw results as
# JSON in $OUT (default /tmp/bench_multitask.json).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-bin/packtrain}
epochs=${2:-6}
out=${OUT:-/tmp/bench_multitask.json}
data=../shared/data/qm9_13k.extxyz.gz
cores=$(nproc)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

three="homo lumo gap"
all="mu alpha homo lumo gap zpve energy_U0 energy_U enthalpy_H free_energy cv"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
"$bin" ingest "$data" --out "$tmp/qm9.ptd" >/dev/null

# target_json KEY: one entry of "targets" (mu: mean readout, mean_std)
target_json() {
  if [ "$1" = mu ]; then printf '{"key":"mu","readout":"mean","normalize":"mean_std"}'
  else printf '{"key":"%s"}' "$1"; fi
}

# run NAME KEY...: trains one model on the keys (one key: a single target)
run() {
  local name=$1; shift
  local list="" k
  for k in "$@"; do list+="${list:+,}$(target_json "$k")"; done
  cat >"$tmp/$name.json" <<EOF
{"targets":[$list],
 "model":{"hidden":64,"filters":64,"interactions":3,"gaussians":25,"cutoff":5.0,"max_neighbors":32},
 "batching":{"method":"lpfhp","model_batch_size":16},
 "training":{"epochs":$epochs,"lr":0.0005,"log_every":1000,"seed":0,"normalize":"atomref"},
 "backend":{"threads":$cores}}
EOF
  local t0=$(date +%s.%N)
  "$bin" train "$tmp/qm9.ptd" --config "$tmp/$name.json" --out "$tmp/$name" >/dev/null 2>"$tmp/$name.err" || {
    cat "$tmp/$name.err" >&2; exit 1; }
  local t1=$(date +%s.%N)
  echo "{\"name\":\"$name\",\"keys\":\"$*\",\"wall\":$(echo "$t1 - $t0" | bc)}" >>"$tmp/runs.jsonl"
  echo "bench_multitask: $name done ($(echo "$t1 - $t0" | bc | cut -c1-6) s)" >&2
}

# single-target models first and multi-task models between them, so load
# drifts touch both kinds
for k in $all; do run "single_$k" "$k"; done
run multi3 $three
run multi11 $all
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

/usr/bin/python3 - "$tmp" "$out" "$epochs" "$load_before" "$load_after" "$cores" <<'PY'
import json, statistics, sys
tmp, out, epochs, lb, la, cores = sys.argv[1:7]
runs = {}
for line in open(f"{tmp}/runs.jsonl"):
    r = json.loads(line)
    res = json.load(open(f"{tmp}/{r['name']}/result.json"))
    r["graphs_per_s"] = res["graphs"] / res["step_seconds"]
    keys = r["keys"].split()
    if len(keys) == 1:
        r["test_mae"] = {keys[0]: res["test_mae"]}
    else:
        r["test_mae"] = {k: v["test_mae"] for k, v in res["heads"].items()}
    runs[r["name"]] = r
single = {k[len("single_"):]: r for k, r in runs.items() if k.startswith("single_")}
UNITS = {"mu": "D", "alpha": "a0³", "cv": "cal/(mol K)"}

def unit(k):
    return UNITS.get(k, "eV")

print(f"SchNet H=F=64, T=3, cutoff 5 Å; QM9 subset (13,000 molecules, split 0.8/0.1/0.1), "
      f"{epochs} epochs, seed 0, {cores} cores; load average before {lb}, after {la}.\n")
print("| model | heads | graphs/s | wall s |")
print("|---|---:|---:|---:|")
print(f"| gap alone | 1 | {single['gap']['graphs_per_s']:.0f} | {single['gap']['wall']:.1f} |")
for name, keys in (("multi3", "homo lumo gap"), ("multi11", None)):
    r = runs[name]
    ks = r["keys"].split()
    sep_rate = statistics.mean(single[k]["graphs_per_s"] for k in ks)
    sep_wall = sum(single[k]["wall"] for k in ks)
    print(f"| one {len(ks)}-head model ({'homo+lumo+gap' if len(ks) == 3 else 'all targets'}) | {len(ks)} | "
          f"{r['graphs_per_s']:.0f} | {r['wall']:.1f} |")
    print(f"| {len(ks)} single-target models | {len(ks)} x 1 | {sep_rate:.0f} (mean) | {sep_wall:.1f} (sum) |")
    print(f"| ratio (one {len(ks)}-head / separate) | | {r['graphs_per_s'] / sep_rate:.2f}x | "
          f"{sep_wall / r['wall']:.2f}x faster |")
print()
print("| target | unit | single-target test MAE | 3-head test MAE | 11-head test MAE | 11-head / single |")
print("|---|---|---:|---:|---:|---:|")
for k in single:
    s = single[k]["test_mae"][k]
    m3 = runs["multi3"]["test_mae"].get(k)
    m11 = runs["multi11"]["test_mae"][k]
    print(f"| {k} | {unit(k)} | {s:.4g} | {'' if m3 is None else f'{m3:.4g}'} | {m11:.4g} | {m11 / s:.2f} |")
json.dump({"epochs": int(epochs), "cores": int(cores), "load_before": lb, "load_after": la, "runs": runs},
          open(out, "w"), indent=1)
PY
