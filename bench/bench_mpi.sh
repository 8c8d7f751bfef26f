#!/usr/bin/env bash
# bench_mpi.sh [BINARY] [STEPS] — backend.kind "mpi" against one process on
# this machine (issue 7), every number measured in this one run: seed 000's
# SchNet (H=F=100, T=4, G=25, 6 Å) on the QM9 subset, LPFHP packs, a global
# batch of 32 packs (about 64 molecules) per optimizer step in every row:
#
#   one_r2     1 process, 2 replicas x 16 packs (1 BLAS thread each)   the peer
#   one_r1a2   1 process, 1 replica x 2 accumulation x 16 (all cores)
#   mpi_2x1    2 ranks x 1 replica x 16 packs (mpirun, loopback)
#   one_r4     1 process, 4 replicas x 8 packs
#   mpi_2x2    2 ranks x 2 replicas x 8 packs
#
# graphs/s is taken from the training's own step lines (`packtrain train`,
# log every WARMUP steps): the wall-time weighted mean of graphs_per_s over
# the STEPS steps after the first WARMUP, so start-up, neighbour lists and
# the final validation are outside it.  REPEAT (default 3) rounds over all
# rows; each row reports its best round (on a shared machine the least
# disturbed) and its median, every round is in the JSON.  Prints one JSON object
# on stdout and a Markdown table on stderr.  On one host the ranks share its
# cores and talk through shared memory: this measures what MPI costs, not
# what more machines add.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(realpath "${1:-bin/packtrain}")
steps=${2:-50}
warmup=${WARMUP:-10}
repeat=${REPEAT:-3}
py=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if ! "$bin" mpirun --ranks 1 --print -- version >/dev/null 2>"$tmp/probe"; then
  echo "bench_mpi: $(tail -1 "$tmp/probe")" >&2
  exit 1
fi
export PACKTRAIN_MPI_ARGS=${PACKTRAIN_MPI_ARGS:-"--mca btl self,vader,tcp --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo"}
"$bin" ingest ../shared/data/qm9_13k.extxyz.gz --out "$tmp/qm9.ptd" >/dev/null

config() { # NAME KIND RANKS R A B
  cat >"$tmp/$1.json" <<EOF
{"target": "energy_U0",
 "model": {"hidden": 100, "filters": 100, "interactions": 4, "gaussians": 25, "cutoff": 6.0,
           "max_neighbors": 32},
 "batching": {"method": "lpfhp", "model_batch_size": $6},
 "training": {"lr": 0.0005, "split": [0.9, 0.05, 0.05], "seed": 0, "epochs": 1,
              "max_steps": $((steps + warmup)), "log_every": $warmup, "checkpoint_every": null},
 "backend": {"kind": "$2", "ranks": $3, "replication_factor": $4, "gradient_accumulation": $5}}
EOF
}
names=(one_r2 one_r1a2 mpi_2x1 one_r4 mpi_2x2)
config one_r2 ipu-emulated 1 2 1 16
config one_r1a2 ipu-emulated 1 1 2 16
config mpi_2x1 mpi 2 2 1 16
config one_r4 ipu-emulated 1 4 1 8
config mpi_2x2 mpi 2 4 1 8

# graphs/s after the warm-up window, from a run's step lines
rate() {
  "$py" - "$1" <<'EOF'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{"kind":"step"')]
prev, g, s = lines[0]["seconds"], 0.0, 0.0
for l in lines[1:]:
    dt = l["seconds"] - prev
    g += l["graphs_per_s"] * dt
    s += dt
    prev = l["seconds"]
print(f"{g / s:.1f}")
EOF
}

for round in $(seq 1 "$repeat"); do
  for n in "${names[@]}"; do
    out="$tmp/$n.$round"
    if [[ $n == mpi_* ]]; then
      "$bin" mpirun --config "$tmp/$n.json" -- train "$tmp/qm9.ptd" --config "$tmp/$n.json" --out "$out" \
        >"$out.lines" 2>"$out.err"
    else
      "$bin" train "$tmp/qm9.ptd" --config "$tmp/$n.json" --out "$out" >"$out.lines" 2>"$out.err"
    fi || { echo "bench_mpi: $n failed:" >&2; cat "$out.err" >&2; exit 1; }
    rate "$out.lines" >"$out.rate"
    echo "round $round $n: $(cat "$out.rate") graphs/s" >&2
  done
done

"$py" - "$tmp" "$repeat" "$steps" "$warmup" "$(nproc)" "${names[@]}" <<'EOF'
import json, sys
tmp, repeat, steps, warmup, cores, names = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6:]
layout = {"one_r2": (1, 2, 1, 16), "one_r1a2": (1, 1, 2, 16), "mpi_2x1": (2, 1, 1, 16),
          "one_r4": (1, 4, 1, 8), "mpi_2x2": (2, 2, 1, 8)}
peer = {"one_r2": "one_r2", "one_r1a2": "one_r2", "mpi_2x1": "one_r2", "one_r4": "one_r4", "mpi_2x2": "one_r4"}
rows = {}
for n in names:
    rounds = [float(open(f"{tmp}/{n}.{r}.rate").read()) for r in range(1, repeat + 1)]
    ranks, rep, acc, b = layout[n]
    rows[n] = {"ranks": ranks, "replicas_per_rank": rep, "accumulation": acc, "packs_per_micro_batch": b,
               "global_packs": ranks * rep * acc * b, "graphs_per_s": max(rounds),
               "median_graphs_per_s": sorted(rounds)[len(rounds) // 2], "rounds": rounds}
for n, r in rows.items():
    r["vs"] = peer[n]
    r["ratio"] = round(r["graphs_per_s"] / rows[peer[n]]["graphs_per_s"], 3)
    r["median_ratio"] = round(r["median_graphs_per_s"] / rows[peer[n]]["median_graphs_per_s"], 3)
print(json.dumps({"bench": "mpi", "cores": cores, "steps": steps, "warmup": warmup,
                  "model": "SchNet H=F=100 T=4 G=25 6 A", "dataset": "qm9_13k", "rows": rows}, indent=1))
print(f"\n| run | ranks x replicas x A x b | graphs/s best | vs | median | vs |", file=sys.stderr)
print("|---|---|---|---|---|---|", file=sys.stderr)
for n, r in rows.items():
    print(f"| {n} | {r['ranks']} x {r['replicas_per_rank']} x {r['accumulation']} x {r['packs_per_micro_batch']}"
          f" | {r['graphs_per_s']:.0f} | {r['ratio']:.2f}x {r['vs']} | {r['median_graphs_per_s']:.0f}"
          f" | {r['median_ratio']:.2f}x |", file=sys.stderr)
EOF
