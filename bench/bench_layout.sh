#!/usr/bin/env bash
# bench_layout.sh [PACKTRAIN] [STEPS] — which backend layout is the fastest
# default on this machine (issue 13): the same job and the same global batch
# of 16 LPFHP packs (≈32 QM9 molecules per optimizer step), computed as
#
#   one_replica   1 replica × `cores` OpenBLAS threads (the old default)
#   per_core      `cores` replicas × 1 OpenBLAS thread, 16/cores packs each
#                 (replication_factor "auto", the default now)
#   auto          the default configuration, nothing set: checks that
#                 "auto" resolves to per_core here
#
# with `packtrain bench` (training throughput over STEPS optimizer steps
# after 5 warm-up steps) on the QM9 subset, interleaved in ROUNDS rounds
# (default 3: the machine is shared, so only ratios from the same run mean
# something).  Prints one JSON line per run, then the best and median
# graphs/s of each layout and per_core / one_replica.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-bin/packtrain}
steps=${2:-40}
rounds=${ROUNDS:-3}
cores=$(nproc)
py=/usr/bin/python3
[ -x "$bin" ] || { echo "bench_layout: no packtrain binary at $bin" >&2; exit 2; }
if [ $((16 % cores)) -ne 0 ] && [ "$cores" -lt 16 ]; then
  echo "bench_layout: $cores cores: per_core uses the largest power of two below, as auto does" >&2
fi
per=1; while [ $((per * 2)) -le "$cores" ] && [ $((per * 2)) -le 16 ]; do per=$((per * 2)); done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" ingest ../shared/data/qm9_13k.extxyz.gz --out "$tmp/qm9.ptd" >/dev/null
cat >"$tmp/job.json" <<EOF
{"target":"energy_U0",
 "model":{"hidden":100,"filters":100,"interactions":4,"gaussians":25,"cutoff":6.0,"max_neighbors":32,"readout":"sum"},
 "batching":{"method":"lpfhp"},
 "training":{"lr":0.0005}}
EOF

run() {  # NAME [--set ...]
  local name=$1; shift
  "$bin" bench "$tmp/qm9.ptd" --config "$tmp/job.json" --steps "$steps" --warmup 5 "$@" \
    >"$tmp/out.json" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
  "$py" - "$name" "$tmp/out.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[2]))
b = r["backend"]
print(json.dumps({"layout": sys.argv[1], "graphs_per_s": round(r["graphs_per_s"], 1),
                  "replicas": b["replication_factor"], "micro_packs": b["micro_packs"],
                  "global_packs": b["global_packs"], "blas_threads": b["blas_threads"]}))
PY
}

echo "# bench_layout: $cores cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'))," \
     "$steps steps x $rounds rounds, load $(cut -d' ' -f1-3 /proc/loadavg)," \
     "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}"
for r in $(seq "$rounds"); do
  run one_replica --set backend.replication_factor=1 --set batching.model_batch_size=16 \
    --set backend.threads="$cores"
  run per_core --set backend.replication_factor="$per" --set batching.model_batch_size=$((16 / per)) \
    --set backend.threads="$cores"
  run auto
done | tee "$tmp/runs.jsonl"
"$py" - "$tmp/runs.jsonl" "$cores" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
by = {}
for r in runs:
    by.setdefault(r["layout"], []).append(r)
for name, rs in by.items():
    if len({r["global_packs"] for r in rs}) != 1 or rs[0]["global_packs"] != 16:
        sys.exit(f"bench_layout: {name} did not run a global batch of 16 packs: {rs}")
auto, per = by["auto"][0], by["per_core"][0]
if (auto["replicas"], auto["micro_packs"]) != (per["replicas"], per["micro_packs"]):
    sys.exit(f"bench_layout: auto resolved to {auto['replicas']} x {auto['micro_packs']}, not per_core")
print("| layout | replicas × packs | BLAS threads | best graphs/s | median |")
print("|---|---|---:|---:|---:|")
best = {}
for name, rs in by.items():
    g = [r["graphs_per_s"] for r in rs]
    best[name] = max(g)
    print(f"| {name} | {rs[0]['replicas']} × {rs[0]['micro_packs']} | {rs[0]['blas_threads']} | "
          f"{max(g):.0f} | {statistics.median(g):.0f} |")
print(json.dumps({"cores": int(sys.argv[2]),
                  "per_core_over_one_replica": round(best["per_core"] / best["one_replica"], 2),
                  "auto_over_one_replica": round(best["auto"] / best["one_replica"], 2)}))
PY
