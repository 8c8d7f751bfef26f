#!/usr/bin/env bash
# bench_train_forces.sh [PACKTRAIN] [STEPS] — training on energies and forces:
# throughput in structures/s of packtrain against the same SchNet in PyTorch
# doing the same, at its real best, measured in one run with the two sides
# interleaved (the machine is shared: only ratios measured side by side mean
# something).  One command reproduces the README's table.
#
#   ROUNDS=2         rounds; each runs every layout of both sides, per case
#   PEER_STEPS=12    timed steps per PyTorch run (the best 5-step window kept)
#   CASES=emt,water  which cases
#   DATA_DIR=../shared/data
#
# The job: seed 000's SchNet (H=F=100, T=4, G=25, 6 Å cutoff, sum readout,
# fp32), trained on energies and forces with packtrain's default loss on data
# with forces (training.loss "auto": MSE(E/N) + MSE(F components)), Adam.
#   emt    emt_20k.extxyz.gz (periodic slabs and bulk cells, EMT labels),
#          every neighbour within 6 Å (model.max_neighbors null, as dense
#          metals need)
#   water  water_20k.extxyz.gz (water clusters, TIP4P labels), 32 neighbours
#
# packtrain: `packtrain bench` on the job (the training loop with its
# loader, packing (LPFHP, auto limits), backend and optimizer; evaluation
# excluded), in two layouts — the default ("auto": one single-threaded
# replica per core, a global batch of 16 packs, for a forces job in
# micro-batches of one pack) and one replica with every core as BLAS
# threads, the same global batch in 16 micro-batches of one pack.
# PyTorch: bench/torch_schnet_bench.py --mode forces (bench/torch_peer.py:
# forces by torch.autograd.grad with create_graph=True from positions that
# require grad, periodic graphs from ASE's primitive_neighbor_list), the same
# number of structures per step as packtrain's steps hold on average, in the
# layouts a PyTorch user would try: 1 thread, `cores` threads, and
# DistributedDataParallel over `cores` single-threaded processes (gloo on
# loopback).  Graphs and batches are built before timing (fair to PyTorch).
# The ratio is packtrain's best layout over PyTorch's best layout, best
# against best over the rounds.
#
# Printed: the conditions (date, CPU, cores, commit, torch, load average at
# the start and after every round) on stderr and in the table, one JSON line
# per measurement, then the table.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-bin/packtrain}
steps=${2:-30}
warmup=4
rounds=${ROUNDS:-2}
peer_steps=${PEER_STEPS:-12}
cases=${CASES:-emt,water}
data=${DATA_DIR:-../shared/data}
cores=$(nproc)
py=/usr/bin/python3
[ -x "$bin" ] || { echo "bench_train_forces: no packtrain binary at $bin (make)" >&2; exit 2; }
"$py" -c 'import torch, ase' 2>/dev/null ||
  { echo "bench_train_forces: needs /usr/bin/python3 with torch and ase (python3-torch, python3-ase)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out="$tmp/results.jsonl"
: >"$out"

"$py" - >"$tmp/conditions.json" <<'PY'
import json, os, subprocess, torch
info = open("/proc/cpuinfo").read().splitlines()
cpu = next((l.split(":", 1)[1].strip() for l in info if l.startswith("model name")), "?")
run = lambda *c: subprocess.run(list(c), capture_output=True, text=True).stdout.strip()
print(json.dumps({"date": run("date", "-Iseconds"), "cpu": cpu, "cores": os.cpu_count(),
                  "commit": run("git", "rev-parse", "--short", "HEAD"), "torch": torch.__version__,
                  "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE", "(unset)"),
                  "load_average_start": float(open("/proc/loadavg").read().split()[0])}))
PY
echo "bench_train_forces: $(cat "$tmp/conditions.json")" >&2

# job NAME MAX_NEIGHBORS REPLICAS ACCUMULATION PACKS THREADS
job() {
  cat >"$tmp/$1.json" <<EOF
{"target": "energy",
 "model": {"hidden": 100, "filters": 100, "interactions": 4, "gaussians": 25, "cutoff": 6.0,
           "max_neighbors": $2, "readout": "sum"},
 "batching": {"method": "lpfhp", "model_batch_size": $5},
 "training": {"epochs": 1000, "lr": 0.0005, "log_every": 1},
 "backend": {"replication_factor": $3, "gradient_accumulation": $4, "threads": $6}}
EOF
}

# packtrain_run CASE LAYOUT PTD ROUND
packtrain_run() {
  "$bin" bench "$3" --config "$tmp/$1.$2.json" --steps "$steps" --warmup "$warmup" \
    >"$tmp/pt" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
  "$py" - "$tmp/pt" "$1" "$2" "$4" >>"$out" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(json.dumps({"case": sys.argv[2], "side": "packtrain", "layout": sys.argv[3],
                  "round": int(sys.argv[4]), "graphs_per_s": round(r["graphs_per_s"], 1),
                  "graphs_per_step": round(r["graphs"] / r["steps"], 2), "step_ms": round(r["step_ms"], 1),
                  "replicas": r["backend"]["replication_factor"],
                  "accumulation": r["backend"]["gradient_accumulation"], "micro_packs": r["backend"]["micro_packs"],
                  "limits": r["limits"], "activations_mb": round(r["memplan"]["activations_bytes"] / 2**20, 1)}))
PY
}

# peer CASE SRC MAX_NEIGHBORS PER ROUND: the three PyTorch layouts
peer() {
  local c=$1 src=$2 nb=$3 per=$4 round=$5 lay name opt
  for lay in "threads:1" "threads:$cores" "ddp:$cores"; do
    if [ "${lay%%:*}" = ddp ]; then opt="--ranks ${lay#*:}" name="DDP $cores x 1 thread"
    else opt="--threads ${lay#*:}" name="${lay#*:} thread(s)"; fi
    # shellcheck disable=SC2086
    "$py" bench/torch_schnet_bench.py "$src" --target energy --mode forces --layout "${lay%%:*}" $opt \
      --max-neighbors "$nb" --graphs-per-step "$per" --molecules $(( per * (peer_steps + 3) )) \
      --steps "$peer_steps" --warmup 3 >"$tmp/tp" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
    "$py" - "$tmp/tp" "$c" "$name" "$round" >>"$out" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(json.dumps({"case": sys.argv[2], "side": "pytorch", "layout": sys.argv[3],
                  "round": int(sys.argv[4]), "graphs_per_s": r["best_graphs_per_s"],
                  "graphs_per_s_mean": r["graphs_per_s"], "graphs_per_step": r["graphs_per_step"],
                  "atoms_per_graph": r["atoms_per_graph"], "edges_per_graph": r["edges_per_graph"],
                  "torch": r["torch"]}))
PY
  done
}

IFS=',' read -r -a want <<<"$cases"
for c in "${want[@]}"; do
  case $c in
    emt) src="$data/emt_20k.extxyz.gz" nb=null tnb=0 ;;
    water) src="$data/water_20k.extxyz.gz" nb=32 tnb=32 ;;
    *) echo "bench_train_forces: unknown case '$c' (emt, water)" >&2; exit 2 ;;
  esac
  "$bin" ingest "$src" --out "$tmp/$c.ptd" >/dev/null
  job "$c.auto" "$nb" '"auto"' 1 '"auto"' '"auto"'
  job "$c.one" "$nb" 1 16 1 "$cores"
done

for round in $(seq "$rounds"); do
  for c in "${want[@]}"; do
    case $c in emt) src="$data/emt_20k.extxyz.gz" tnb=0 ;; water) src="$data/water_20k.extxyz.gz" tnb=32 ;; esac
    packtrain_run "$c" auto "$tmp/$c.ptd" "$round"
    packtrain_run "$c" one "$tmp/$c.ptd" "$round"
    # as many structures per step as packtrain's default layout takes
    per=$("$py" -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]; r=[x for x in r if x["case"]==sys.argv[2] and x["layout"]=="auto"]; print(max(1, round(r[0]["graphs_per_step"])))' "$out" "$c")
    peer "$c" "$src" "$tnb" "$per" "$round"
  done
  cut -d' ' -f1 /proc/loadavg >>"$tmp/loadavg"
  echo "bench_train_forces: round $round done, load average $(tail -1 "$tmp/loadavg")" >&2
done

cat "$out"
"$py" - "$out" "$tmp/conditions.json" "$tmp/loadavg" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
cond = json.load(open(sys.argv[2]))
loads = [float(x) for x in open(sys.argv[3]).read().split()]
print()
print(f"{cond['date']}  {cond['cpu']}, {cond['cores']} cores, commit {cond['commit']}, torch {cond['torch']}, "
      f"OPENBLAS_CORETYPE {cond['OPENBLAS_CORETYPE']}; load average {cond['load_average_start']} at the start, "
      f"{', '.join(str(x) for x in loads)} after each round")
print()
print("| case | side | layout | structures/s (best of rounds) | all rounds |")
print("|---|---|---|---:|---|")
best = {}
for case in dict.fromkeys(r["case"] for r in rows):
    for side in ("packtrain", "pytorch"):
        for lay in dict.fromkeys(r["layout"] for r in rows if r["case"] == case and r["side"] == side):
            v = [r["graphs_per_s"] for r in rows if (r["case"], r["side"], r["layout"]) == (case, side, lay)]
            print(f"| {case} | {side} | {lay} | {max(v):.1f} | {', '.join(f'{x:.1f}' for x in v)} |")
            if max(v) > best.get((case, side), (0, ""))[0]:
                best[(case, side)] = (max(v), lay)
print()
print("| case | structures/step | packtrain best (layout) | PyTorch best (layout) | ratio |")
print("|---|---:|---|---|---:|")
for case in dict.fromkeys(r["case"] for r in rows):
    per = next(r["graphs_per_step"] for r in rows if r["case"] == case and r["side"] == "pytorch")
    p, t = best[(case, "packtrain")], best[(case, "pytorch")]
    print(f"| {case} | {per} | {p[0]:.1f} ({p[1]}) | {t[0]:.1f} ({t[1]}) | **{p[0] / t[0]:.2f}x** |")
PY
