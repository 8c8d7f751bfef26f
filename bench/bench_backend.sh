#!/usr/bin/env bash
# bench_backend.sh [BINARY] [STEPS] — the emulated IPU backend's benchmarks
# (issue 4), every number measured in this one run with `packtrain bench`
# (real training steps of seed 000's SchNet: H=F=100, T=4, G=25, 6 Å):
#
#   ablation  like seed 000 Figure 6, QM9 subset, R=2 replicas, ~32 molecules
#             per step: padding baseline (one molecule per pack, inline loader,
#             one all-reduce per tensor) -> + packing (LPFHP) -> + async loader
#             -> + merged all-reduce -> + prefetch depth 3; graphs/s and the
#             speedup over the baseline.  The engine has only the fast, stable
#             softplus, so that part of seed 000's row cannot be ablated here.
#   batching  padding vs LPFHP packing vs tuple packing vs jraph-style dynamic
#             batching, on the QM9 subset and on the water clusters, R=1.
#   scaling   R = 1, 2, 4, 8 replicas at a fixed global batch of 16 packs
#             (b = 16/R), QM9; R above the core count is time-shared.
#
# Every table runs with backend.static_shapes = true: the filter network on
# every edge slot, padding included, as the IPU's static program computes it
# (the comparison seed 000 and issue 4 are about).  Two extra rows measure
# padding vs LPFHP with the CPU default (static_shapes false: once per bond,
# padding edges skipped), where packing saves only the padded nodes' work.
#
# Prints one JSON object on stdout and the same tables as Markdown on stderr.
# STEPS measured steps per run (default 50; water runs use STEPS/2), after
# WARMUP (default 5) steps; REPEAT (default 2) rounds over all
# configurations, each row keeping its best round (on a shared machine the
# best run is the least disturbed; every round's figure is in the JSON).
# About 2 minutes per round on 2 cores.  Datasets: ../shared/data (README).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-bin/packtrain}
steps=${2:-50}
warmup=${WARMUP:-5}
repeat=${REPEAT:-2}
water_steps=$(( steps / 2 > 5 ? steps / 2 : 5 ))
data=../shared/data
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$bin" ingest "$data/qm9_13k.extxyz.gz" --out "$tmp/qm9.ptd" >/dev/null
"$bin" ingest "$data/water_20k.extxyz.gz" --out "$tmp/water.ptd" >/dev/null

cat >"$tmp/qm9.json" <<'EOF'
{"target":"energy_U0",
 "model":{"hidden":100,"filters":100,"interactions":4,"gaussians":25,"cutoff":6.0,"max_neighbors":32},
 "batching":{"method":"lpfhp","model_batch_size":16},
 "training":{"lr":0.0005,"split":[0.9,0.05,0.05],"seed":0},
 "backend":{"static_shapes":true}}
EOF
sed 's/"energy_U0"/"energy"/' "$tmp/qm9.json" >"$tmp/water.json"

# Configurations are declared first, then run REPEAT rounds, each round
# every configuration once, so a slow spell of the machine hits all rows
# alike; each row keeps its best round.
names=(); specs=()
def() { names+=("$1"); specs+=("${*:2}"); }

# --- ablation (R=2: 2 x 16 padded molecules, or 2 x 8 packs of ~2 molecules)
R2="--set backend.replication_factor=2"
def abl_pad      qm9 "$steps" qm9 $R2 --set batching.method=pad --set batching.model_batch_size=16 \
    --set backend.use_async_loader=false --set backend.merge_all_reduce=false
def abl_pack     qm9 "$steps" qm9 $R2 --set batching.model_batch_size=8 \
    --set backend.use_async_loader=false --set backend.merge_all_reduce=false
def abl_async    qm9 "$steps" qm9 $R2 --set batching.model_batch_size=8 \
    --set backend.prefetch_depth=1 --set backend.merge_all_reduce=false
def abl_merged   qm9 "$steps" qm9 $R2 --set batching.model_batch_size=8 --set backend.prefetch_depth=1
def abl_prefetch qm9 "$steps" qm9 $R2 --set batching.model_batch_size=8 --set backend.prefetch_depth=3

# --- batching methods, one replica, ~32 QM9 molecules / ~6 water clusters per step.
# Tuple packing's automatic limits cannot reach 95% efficiency on these sets,
# so it gets LPFHP's pack size (QM9: 2 x 36 nodes; water: LPFHP's auto limits)
# with the edge bound tightened; dynamic batching gets one graph slot more
# than the molecules it should hold (jraph keeps one for its padding graph).
def qm9_pad     qm9 "$steps" qm9 --set batching.method=pad --set batching.model_batch_size=32
def qm9_lpfhp   qm9 "$steps" qm9 --set batching.method=lpfhp --set batching.model_batch_size=16
def qm9_tuple   qm9 "$steps" qm9 --set batching.method=tuple --set batching.max_nodes=72 \
    --set batching.max_edges=1216 --set batching.model_batch_size=8
def qm9_pad_rows   qm9 "$steps" qm9 --set batching.method=pad --set batching.model_batch_size=32 \
    --set backend.static_shapes=false
def qm9_lpfhp_rows qm9 "$steps" qm9 --set batching.method=lpfhp --set batching.model_batch_size=16 \
    --set backend.static_shapes=false
def qm9_dynamic qm9 "$steps" qm9 --set batching.method=dynamic --set batching.max_graphs=33 \
    --set batching.model_batch_size=1
def water_pad     water "$water_steps" water --set batching.method=pad --set batching.model_batch_size=6
def water_lpfhp   water "$water_steps" water --set batching.method=lpfhp --set batching.model_batch_size=3
def water_tuple   water "$water_steps" water --set batching.method=tuple --set batching.max_nodes=141 \
    --set batching.max_edges=4500 --set batching.model_batch_size=3
def water_dynamic water "$water_steps" water --set batching.method=dynamic --set batching.max_graphs=8 \
    --set batching.model_batch_size=1

# --- replica scaling at 16 packs per step
for r in 1 2 4 8; do
  def "scale_$r" qm9 "$steps" qm9 --set backend.replication_factor=$r \
      --set batching.model_batch_size=$((16 / r))
done

for ((round = 0; round < repeat; round++)); do
  for i in "${!names[@]}"; do
    # shellcheck disable=SC2206  # the spec is a word list without quoting
    spec=(${specs[$i]})
    "$bin" bench "$tmp/${spec[0]}.ptd" --steps "${spec[1]}" --config "$tmp/${spec[2]}.json" \
      --warmup "$warmup" "${spec[@]:3}" >"$tmp/${names[$i]}.$round.json" ||
      { echo "bench_backend: ${names[$i]} failed" >&2; exit 1; }
  done
  echo "bench_backend: round $((round + 1)) of $repeat done" >&2
done

/usr/bin/python3 - "$tmp" "$steps" "$warmup" "$repeat" "$bin bench" <<'PY'
import json, os, platform, sys
tmp, steps, warmup, repeat, cmd = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
def load(name):
    runs = [json.load(open(os.path.join(tmp, f"{name}.{k}.json"))) for k in range(repeat)]
    best = max(runs, key=lambda r: r["graphs_per_s"])
    best["rounds_graphs_per_s"] = [round(r["graphs_per_s"], 1) for r in runs]
    return best
def row(name, label, base=None):
    r = load(name)
    out = {"row": label, "graphs_per_s": round(r["graphs_per_s"], 1),
           "graphs_per_step": round(r["graphs"] / max(r["steps"], 1), 1),
           "padding_fraction": round(r["padding_fraction"], 3),
           "edge_padding_fraction": round(r["edge_padding_fraction"], 3),
           "rounds_graphs_per_s": r["rounds_graphs_per_s"],
           "step_ms": round(r["step_ms"], 1),
           "phases_ms": {k: (round(v, 2) if v is not None else None) for k, v in r["phases_ms"].items()},
           "limits": r["limits"], "micro_packs": r["backend"]["micro_packs"],
           "replicas": r["backend"]["replication_factor"],
           "blas_threads": r["backend"]["blas_threads"]}
    if base is not None:
        out["speedup"] = round(r["graphs_per_s"] / base, 3)
    return out
base = load("abl_pad")["graphs_per_s"]
ablation = [row("abl_pad", "padding baseline", base), row("abl_pack", "+ packing (LPFHP)", base),
            row("abl_async", "+ async loader", base), row("abl_merged", "+ merged all-reduce", base),
            row("abl_prefetch", "+ prefetch depth 3", base)]
batching = {}
for ds in ("qm9", "water"):
    b = load(ds + "_pad")["graphs_per_s"]
    batching[ds] = [row(f"{ds}_{m}", label, b) for m, label in
                    (("pad", "padding"), ("lpfhp", "packing LPFHP"), ("tuple", "packing tuple"),
                     ("dynamic", "dynamic batching"))]
s1 = load("scale_1")["graphs_per_s"]
scaling = [row(f"scale_{r}", f"R={r}", s1) for r in (1, 2, 4, 8)]
packed_over_padded = load("qm9_lpfhp")["graphs_per_s"] / load("qm9_pad")["graphs_per_s"]
rows_pad, rows_lpfhp = load("qm9_pad_rows")["graphs_per_s"], load("qm9_lpfhp_rows")["graphs_per_s"]
result = {
    "machine": {"cores": os.cpu_count(), "cpu": platform.processor() or platform.machine()},
    "command": cmd, "steps": steps, "warmup": warmup, "repeat": repeat,
    "note": "fast softplus is always on in this engine, so seed 000's '+ fast softplus' is not ablated",
    "ablation_qm9_r2": ablation, "batching": batching, "scaling_qm9_16_packs": scaling,
    "qm9_packed_over_padded": round(packed_over_padded, 3),
    "target_packed_over_padded": 1.4, "meets_target": packed_over_padded >= 1.4,
    "cpu_rows_qm9": {"padding_graphs_per_s": round(rows_pad, 1), "lpfhp_graphs_per_s": round(rows_lpfhp, 1),
                     "packed_over_padded": round(rows_lpfhp / rows_pad, 3)},
}
print(json.dumps(result, indent=1))
def table(title, rows):
    lines = [f"\n{title}\n", "| row | graphs/s | speedup | graphs/step | node / edge padding | step ms | io | fwd | bwd | allreduce | other+opt |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        p = r["phases_ms"]
        lines.append(f"| {r['row']} | {r['graphs_per_s']} | {r.get('speedup', '')} | {r['graphs_per_step']} | "
                     f"{r['padding_fraction']} / {r['edge_padding_fraction']} | {r['step_ms']} | {p['io']} | {p['forward']} | {p['backward']} | "
                     f"{p['allreduce']} | {round((p['other'] or 0) + p['outside'], 2)} |")
    return "\n".join(lines)
sys.stderr.write(table("Ablation, QM9, R=2 (seed 000 Fig. 6)", ablation) + "\n")
sys.stderr.write(table("Batching, QM9, R=1", batching["qm9"]) + "\n")
sys.stderr.write(table("Batching, water clusters, R=1", batching["water"]) + "\n")
sys.stderr.write(table("Replica scaling, QM9, 16 packs per step", scaling) + "\n")
sys.stderr.write(f"\nQM9 packed / padded, static shapes (IPU): {packed_over_padded:.2f}x (target 1.4x)\n")
sys.stderr.write(f"QM9 packed / padded, CPU default (filter once per bond, padding edges skipped): "
                 f"{rows_lpfhp / rows_pad:.2f}x ({rows_lpfhp:.0f} vs {rows_pad:.0f} graphs/s)\n")
PY
