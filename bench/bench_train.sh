#!/usr/bin/env bash
# bench_train.sh [BINARY] [STEPS] — training throughput of seed 000's SchNet
# (H=F=100, T=4, G=25, cutoff 6 Å, 32 neighbours) on the QM9 subset, LPFHP
# packing, 16 packs of ~2 molecules per step (about 32 molecules), threads =
# cores.  In the same run it measures OpenBLAS's sgemm rate on the model's own
# product shapes (bench/sgemm_rate.c), and prints one JSON object:
#   graphs_per_s        median over the logged windows after the first (warm-up)
#   best_graphs_per_s   the fastest of those windows
#   graphs_per_step     real molecules per optimizer step
#   flops_per_graph     training FLOPs per molecule on its real atoms and edges
#                       (forward matrix products + message sums, x3 for the
#                       backward pass, less the input gradient the first filter
#                       layer does not need)
#   executed_flops_per_graph  the same over the padded slots actually computed
#   sgemm_gflops        the machine's rate on those shapes, in this run: the
#                       best of four measurements, two before and two after
#                       training (on a shared machine single runs vary ~2x)
#   fraction_of_sgemm   best_graphs_per_s x executed_flops_per_graph / sgemm
#                       rate (best against best, so load noise cancels)
#   useful_fraction     the same with flops_per_graph
#   load_average        1-minute load when the run ended: on a machine shared
#                       with other work both rates move and the ratio is noise
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-bin/packtrain}
steps=${2:-120}
data=../shared/data/qm9_13k.extxyz.gz
cores=$(nproc)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$bin" ingest "$data" --out "$tmp/qm9.ptd" >/dev/null
cc -O3 -march=${ARCH:-x86-64-v3} -std=c11 -D_GNU_SOURCE $(pkg-config --cflags openblas) \
   bench/sgemm_rate.c -o "$tmp/sgemm_rate" $(pkg-config --libs openblas)
cat >"$tmp/job.json" <<EOF
{"target":"energy_U0",
 "model":{"hidden":100,"filters":100,"interactions":4,"gaussians":25,"cutoff":6.0,"max_neighbors":32},
 "batching":{"method":"lpfhp","model_batch_size":16},
 "training":{"epochs":1,"max_steps":$steps,"log_every":10,"lr":0.0005,"normalize":"atomref"},
 "backend":{"threads":$cores}}
EOF
# the shapes of one micro-batch need the pack limits: a 2-step dry run finds them
sed 's/"max_steps":[0-9]*/"max_steps":2/' "$tmp/job.json" >"$tmp/dry.json"
"$bin" train "$tmp/qm9.ptd" --config "$tmp/dry.json" --out "$tmp/dry" >/dev/null 2>"$tmp/train.err" || {
  cat "$tmp/train.err" >&2; exit 1; }
shapes=$(/usr/bin/python3 -c '
import json, sys
r = json.load(open(sys.argv[1])); b = r["micro_packs"]
N, E, H, F, G = b * r["max_nodes"], b * r["max_edges"], 100, 100, 25
print(" ".join(str(x) for s in [(E, G, F), (E, F, F), (N, H, F), (N, F, H), (N, H, H), (N, H, H // 2)] for x in s))
' "$tmp/dry/result.json")
for i in 1 2; do "$tmp/sgemm_rate" "$cores" $shapes >>"$tmp/sgemm.out"; done
"$bin" train "$tmp/qm9.ptd" --config "$tmp/job.json" --out "$tmp/run" >"$tmp/metrics.out" 2>"$tmp/train.err" || {
  cat "$tmp/train.err" >&2; exit 1; }
for i in 1 2; do "$tmp/sgemm_rate" "$cores" $shapes >>"$tmp/sgemm.out"; done

/usr/bin/python3 - "$tmp" "$cores" <<'PY'
import json, statistics, sys
tmp, cores = sys.argv[1], int(sys.argv[2])
res = json.load(open(f"{tmp}/run/result.json"))
steps = [json.loads(l) for l in open(f"{tmp}/metrics.out") if l.startswith("{")]
rates = [s["graphs_per_s"] for s in steps if s["kind"] == "step"][1:]
H, F, T, G = 100, 100, 4, 25
b = res["micro_packs"]
N, E = b * res["max_nodes"], b * res["max_edges"]          # slots of one micro-batch

def train_flops(n, e):
    """Training FLOPs of n atoms and e edges: forward x3, less the filter
    net's first-layer input gradient (its input e_ij is data)."""
    block = 2*e*G*F + 2*e*F*F + 2*n*H*F + 2*n*F*H + 2*n*H*H + 2*e*F
    fwd = T*block + 2*n*H*(H//2) + 2*n*(H//2)
    return 3*fwd - T*2*e*G*F

# the products one micro-batch runs, as (M, K, N), best rate of each
shapes = [(E, G, F), (E, F, F), (N, H, F), (N, F, H), (N, H, H), (N, H, H // 2)]
rate = {}
for line in open(f"{tmp}/sgemm.out"):
    r = json.loads(line)
    if "m" in r:
        key = (r["m"], r["k"], r["n"])
        rate[key] = max(rate.get(key, 0.0), r["gflops"])
# time the machine needs for one micro-batch's products at the measured rates
weights = [T*E*G*F, T*E*F*F, T*N*H*F, T*N*F*H, T*N*H*H, N*H*(H//2)]
secs = sum(w / rate[s] for w, s in zip(weights, shapes))
sgemm = sum(weights) / secs

graphs = res["graphs"]
per_graph = train_flops(res["nodes"] / graphs, res["edges"] / graphs)
executed = train_flops(res["node_slots"] / graphs, res["edge_slots"] / graphs)
gps, best = statistics.median(rates), max(rates)
print(json.dumps({
    "bench": "train", "dataset": "qm9_13k", "threads": cores, "steps": res["steps"],
    "graphs_per_s": round(gps, 1), "best_graphs_per_s": round(best, 1),
    "graphs_per_step": round(graphs / res["steps"], 2),
    "max_nodes": res["max_nodes"], "max_edges": res["max_edges"], "packs_per_step": b,
    "padding_fraction_nodes": round(1 - res["nodes"] / res["node_slots"], 4),
    "padding_fraction_edges": round(1 - res["edges"] / res["edge_slots"], 4),
    "flops_per_graph": round(per_graph), "executed_flops_per_graph": round(executed),
    "sgemm_gflops": round(sgemm, 1),
    "fraction_of_sgemm": round(best * executed / (sgemm * 1e9), 3),
    "useful_fraction": round(best * per_graph / (sgemm * 1e9), 3),
    "load_average": float(open("/proc/loadavg").read().split()[0]),
}))
PY
