#!/usr/bin/env bash
# bench_kernels.sh [PACKTRAIN] [BENCH_DIR] [SECONDS] — OpenBLAS against
# packtrain's own fp32 kernels (engine/model/sgemm_kernels.h) on the model's
# real products, at both OpenBLAS kernel sets: the environment's
# OPENBLAS_CORETYPE (Haswell here: AVX2) and OpenBLAS's own choice (the
# variable unset: Cooperlake, AVX-512, on this CPU).  The evidence behind the
# policy in sgemm_kernels.h.  Then bench/cfconv_rate: the convolution's
# kernels (engine/model/cfconv_kernels.h) per edge against their bound.
#
# The shapes are those of seed 000's SchNet in bench_speed.sh's layout (one
# replica per core, 16 LPFHP packs per step in all): U filter rows and N node
# slots of one replica's micro-batch, from bench/schnet_profile on QM9 and on
# the water clusters.  bench/sgemm_kernels runs each product (forward NT,
# input gradient NN, weight gradient TN of every Linear) on one thread in
# interleaved rounds, best round kept; one table per (data, kernel set), a
# column per implementation ("auto": what the policy picks), and the
# step-weighted rate of each.  The load average is printed: on a shared
# machine only the columns of one table compare.
#
# Needs: make BUILD=DIR DIR/bench/schnet_profile DIR/bench/sgemm_kernels
# (or `make bench`).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-bin/packtrain}
bdir=${2:-build/bench}
secs=${3:-2}
cores=$(nproc)
py=/usr/bin/python3
for prog in schnet_profile sgemm_kernels cfconv_rate; do
  [ -x "$bdir/$prog" ] || { echo "bench_kernels: $bdir/$prog missing: run 'make bench'" >&2; exit 2; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
env_core=${OPENBLAS_CORETYPE:-}
echo "bench_kernels: $(date -Iseconds), $(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2), $cores cores, OPENBLAS_CORETYPE=${env_core:-(unset)}, commit $(git rev-parse --short HEAD)"

b=$(( (16 + cores - 1) / cores ))
for ds in qm9 water; do
  if [ $ds = qm9 ]; then src=../shared/data/qm9_13k.extxyz.gz key=energy_U0
  else src=../shared/data/water_20k.extxyz.gz key=energy; fi
  "$bin" ingest "$src" --out "$tmp/$ds.ptd" >/dev/null
  cat >"$tmp/$ds.json" <<EOF
{"target":"$key","model":{"hidden":100,"filters":100,"interactions":4,"gaussians":25,"cutoff":6.0,"max_neighbors":32},
 "batching":{"method":"lpfhp","model_batch_size":$b},"training":{"epochs":1000,"lr":0.0005},
 "backend":{"replication_factor":1,"threads":1}}
EOF
  "$bdir/schnet_profile" "$tmp/$ds.ptd" "$tmp/$ds.json" 3 1 >"$tmp/$ds.profile"
  read -r U N < <("$py" -c 'import json,sys; r=json.load(open(sys.argv[1])); b=r["micro_packs"]; print(max(1, round(r["filter_rows_per_edge_slot"]*b*r["max_edges"])), b*r["max_nodes"])' "$tmp/$ds.profile")
  for core in "$env_core" ""; do
    if [ -n "$core" ]; then OPENBLAS_CORETYPE=$core "$bdir/sgemm_kernels" "$U" "$N" "$secs" >"$tmp/out"
    else env -u OPENBLAS_CORETYPE "$bdir/sgemm_kernels" "$U" "$N" "$secs" >"$tmp/out"; fi
    "$py" - "$tmp/out" "$ds" <<'PY'
import json, sys
rows, tot, head = {}, {}, None
for line in open(sys.argv[1]):
    r = json.loads(line)
    if "openblas_core" in r:
        head = r
    elif "op" in r:
        rows.setdefault((r["op"], r["m"], r["n"], r["k"]), {})[r["impl"]] = (r["gflops"], r["ran"])
    elif "weighted_gflops" in r:
        tot[r["impl"]] = r["weighted_gflops"]
impls = list(tot)
load = open("/proc/loadavg").read().split()[0]
print(f"\n{sys.argv[2]}: U={head['U']} filter rows, N={head['N']} node slots; OpenBLAS kernels "
      f"{head['openblas_core']}; GF/s, one thread, best of {head['rounds']} rounds; load {load}")
print(f"| product | m×n×k | " + " | ".join(impls) + " |")
print("|---|---|" + "---:|" * len(impls))
for (op, m, n, k), v in rows.items():
    cells = [f"{v[i][0]:.0f}" + (f" ({v[i][1]})" if i == "auto" else "") for i in impls if i in v]
    print(f"| {op} | {m}×{n}×{k} | " + " | ".join(cells) + " |")
print("| **step-weighted** | | " + " | ".join(f"**{tot[i]:.0f}**" for i in impls) + " |")
print(json.dumps({"bench": "kernels", "data": sys.argv[2], "openblas_core": head["openblas_core"],
                  "U": head["U"], "N": head["N"], "weighted_gflops": tot, "load_average": float(load)}))
PY
  done
  # the convolution's implementations, ns per edge against the bound
  # (engine/model/cfconv_kernels.h), on the same batch shapes
  echo "cfconv ($ds, load $(cut -d' ' -f1 /proc/loadavg)):"
  "$bdir/cfconv_rate" "$tmp/$ds.ptd" 5
done
