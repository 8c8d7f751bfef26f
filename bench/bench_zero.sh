#!/usr/bin/env bash
# bench_zero.sh [BINARY] [STEPS] — ZeRO on the emulated IPUs (issue 19), in
# the spirit of the DeepSpeed report's tables: a large SchNet (H = F = 1024,
# T = 6, G = 25; 25.4 M parameters) at R = 4 replicas, one pack per
# micro-batch, QM9, trained with `packtrain bench` for STEPS (default 4)
# measured steps after one warm-up, under ZeRO stages 0-3 with and without
# optimizer offload.  Per configuration:
#
#   plan MB       the memory plan per replica (memplan.h): parameters,
#                 gradients, optimizer state on the device, activations, total
#   alloc MB      what the backend really allocated for its largest-shard
#                 replica (pt_backend_stats.replica_bytes; equal to the plan,
#                 which test_zero checks, printed as the measured figure)
#   RSS MB        peak resident memory of the whole process (all R emulated
#                 replicas, the host copy, data and graphs), /usr/bin/time
#   step ms       measured wall time per optimizer step; "+link" adds the
#                 offload transfer charged at PT_ZERO_LINK_GBPS (memplan.h)
#   ratios        against stage 0 measured in the same run
#
# and, from the memory plan with the limits these runs packed, the largest
# H = F (T = 6) whose replica fits 900 MB for each stage (bench/zero_fit.c).
#
# Prints one JSON object per configuration on stdout and the tables as
# Markdown on stderr, with the load average before and after.  R = 4
# replicas on 2 cores time-share (one BLAS thread each).  Needs
# build/bench/zero_fit (make bench, or make build/bench/zero_fit).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-bin/packtrain}
steps=${2:-4}
bdir=${BENCH_DIR:-build/bench}
data=../shared/data
[ -x "$bin" ] || { echo "bench_zero.sh: no packtrain binary at $bin" >&2; exit 2; }
[ -x "$bdir/zero_fit" ] || { echo "bench_zero.sh: $bdir/zero_fit missing (make build/bench/zero_fit)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "bench_zero.sh: needs /usr/bin/time (apt-get install time)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$bin" ingest "$data/qm9_13k.extxyz.gz" --out "$tmp/qm9.ptd" >/dev/null
cat >"$tmp/job.json" <<'EOF'
{"target": "energy_U0",
 "model": {"hidden": 1024, "filters": 1024, "interactions": 6, "gaussians": 25},
 "batching": {"model_batch_size": 1},
 "training": {"epochs": 1, "log_every": 1, "seed": 3},
 "backend": {"replication_factor": 4, "threads": 1, "device_memory_mb": 900}}
EOF
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
configs=("0 false" "1 false" "1 true" "2 false" "2 true" "3 false" "3 true")
for c in "${configs[@]}"; do
  read -r stage off <<<"$c"
  /usr/bin/time -f '%M' -o "$tmp/rss" "$bin" bench "$tmp/qm9.ptd" --config "$tmp/job.json" \
    --steps "$steps" --warmup 1 --set "backend.zero_stage=$stage" \
    --set "backend.offload_optimizer=$off" >"$tmp/out" 2>"$tmp/err" ||
    { echo "bench_zero.sh: stage $stage offload $off failed:" >&2; cat "$tmp/err" >&2; exit 1; }
  /usr/bin/python3 - "$tmp/out" "$tmp/rss" "$stage" "$off" "$steps" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
rss_kb = int(open(sys.argv[2]).read().split()[-1])
be, mp = j["backend"], j["memplan"]
steps = int(sys.argv[5])
print(json.dumps({"zero_stage": int(sys.argv[3]), "offload_optimizer": sys.argv[4] == "true",
                  "step_ms": j["step_ms"], "steps": j["steps"],
                  "link_ms": 1000.0 * be["offload_s"] / (steps + 1),
                  "replica_bytes": be["replica_bytes"], "rss_bytes": rss_kb * 1024,
                  "n_params": mp["n_params"], "memplan": mp, "limits": j["limits"],
                  "phases_ms": j["phases_ms"]}))
EOF
done >"$tmp/rows.jsonl"
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
read -r mn me mg <<<"$(/usr/bin/python3 -c 'import json,sys; l=json.loads(open(sys.argv[1]).readline())["limits"]; print(l["max_nodes"], l["max_edges"], l["max_graphs"])' "$tmp/rows.jsonl")"
"$bdir/zero_fit" "$mn" "$me" "$mg" 4 6 900 >"$tmp/fit.jsonl"
cat "$tmp/rows.jsonl" "$tmp/fit.jsonl"

/usr/bin/python3 - "$tmp/rows.jsonl" "$tmp/fit.jsonl" "$load_before" "$load_after" >&2 <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
fit = [json.loads(l) for l in open(sys.argv[2])]
MB = 1 << 20
ref = rows[0]
name = lambda r: f"{r['zero_stage']}{' + offload' if r['offload_optimizer'] else ''}"
lim = ref["limits"]
print(f"\nZeRO, SchNet H=F=1024 T=6 ({ref['n_params'] / 1e6:.1f} M parameters), R=4, 1 pack of "
      f"{lim['max_nodes']} nodes / {lim['max_edges']} edges per micro-batch, QM9; "
      f"load average {sys.argv[3]} before, {sys.argv[4]} after\n")
print("| stage | params MB | grads MB | optimizer MB (host) | activations MB | plan total MB | alloc MB | "
      "vs stage 0 | process RSS MB | step ms | + link ms | vs stage 0 |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    m = r["memplan"]
    host = f" ({m['optimizer_host_bytes'] / MB:.1f})" if m["optimizer_host_bytes"] else ""
    t = r["step_ms"] + r["link_ms"]
    print(f"| {name(r)} | {m['params_bytes'] / MB:.1f} | {m['grads_bytes'] / MB:.1f} | "
          f"{m['optimizer_bytes'] / MB:.1f}{host} | {m['activations_bytes'] / MB:.1f} | "
          f"{m['total_bytes'] / MB:.1f} | {r['replica_bytes'] / MB:.1f} | "
          f"{r['replica_bytes'] / ref['replica_bytes']:.2f} | {r['rss_bytes'] / MB:.0f} | "
          f"{r['step_ms']:.0f} | {r['link_ms']:.2f} | "
          f"{t / (ref['step_ms'] + ref['link_ms']):.2f} |")
print("\nLargest H = F (T = 6, R = 4, same pack) whose replica fits 900 MB, from the memory plan:\n")
print("| stage | H = F | parameters | plan total MB |")
print("|---|---|---|---|")
for f in fit:
    print(f"| {name(f)} | {f['hidden']} | {f['n_params'] / 1e6:.1f} M | {f['total_bytes'] / MB:.1f} |")
EOF
