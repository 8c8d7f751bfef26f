#!/usr/bin/env bash
# bench_scaling.sh [PACKTRAIN] [STEPS] — how the training step scales from
# one core to all of them (issue 18: water's step on 2 cores was ~1.80x one
# thread's, QM9's ~1.99x), and which memory levers change that, in one run,
# interleaved (the machine is shared: only ratios from the same run mean
# something).
#
#   DATA=water,qm9   datasets (water clusters and the QM9 subset, LPFHP)
#   PRECISION=fp32   comma list of training.precision values (fp32,bf16)
#   ROUNDS=3         rounds; each runs every case once, in the same order
#
# Cases, all on bench_speed's model and 8 packs per replica per step:
#   one          1 replica, 1 thread: one core's share of the step, the
#                denominator (the step schnet_profile times)
#   all          `cores` replicas, one thread each (bench_speed's layout)
#   all.a2b4     the same global batch in micro-batches of 4 packs,
#   all.a4b2     of 2 packs (gradient_accumulation 2 and 4): a block's
#                filter rows (water, 8 packs: ~24 MB per replica) then fit
#                the shared L3 with the other replica's
#   auto         what a user's job gets: replication_factor and
#                model_batch_size "auto", all cores (the plan's layout,
#                engine/train/plan.h: 16 packs a step, water's as 2 x 4
#                micro-batches of 2 packs, QM9's as 2 x 8)
#   *.nohuge     PACKTRAIN_HUGEPAGES=0: the activation arena on 4 KB pages
#                (schnet_acts.c asks for transparent huge pages)
#   par          `cores` separate processes of `one`, run at the same time:
#                data parallelism with nothing shared but the hardware (no
#                all-reduce, no waits, no loader hand-offs); its graphs/s is
#                the processes' sum, its CPU per graph their mean.  `par`
#                against `one` is what the cores' sharing of caches and
#                memory costs the compute; `all` against `par` is the
#                backend's own loss (session 9: on the Xeon the compute of
#                two at once costs 4-6% more CPU, in one process or in two)
# Per run the replicas' compute and their wait for the slowest at the
# all-reduce (packtrain bench's backend.replicas_ms, thread CPU time), the
# time to wake replicas 1..R-1, the host thread's serial work around them
# (backend.host_ms: prep, join, post, gap, update; ms per step) and who
# filled the batches (backend.fills: the loader's background thread, their
# consumer, a waiting replica).
# Per run `packtrain bench` over STEPS steps after 3 warm-up steps: graphs/s
# (wall clock) and CPU ms per step (the process's CPU time: under load the
# wall clock measures the other users too).  Printed per case, best and
# median over the rounds:
#   scaling      graphs/s of the case over graphs/s of `one` (ideal: cores)
#   cpu_scaling  cores x (one's CPU per graph) / (the case's CPU per graph):
#                the scaling without idle time, i.e. what sharing caches and
#                memory alone leaves (ideal: cores)
#   outside compute  the step's wall time less the replicas' mean compute
#                (packtrain bench's step_ms - replicas_ms.busy): waiting for
#                the slowest replica, the all-reduce, waking the replicas,
#                the host's serial work (the rest of the two-core loss)
# with the load average of every round.  Smaller micro-batches change which
# packs are summed together (the bits, not the step's mean gradient).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-bin/packtrain}
steps=${2:-30}
rounds=${ROUNDS:-3}
datasets=${DATA:-water,qm9}
precisions=${PRECISION:-fp32}
cores=$(nproc)
py=/usr/bin/python3
[ -x "$bin" ] || { echo "bench_scaling: no packtrain binary at $bin" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# job NAME TARGET REPLICAS ACCUMULATION PACKS THREADS PRECISION
# (REPLICAS and PACKS may be "auto")
job() {
  cat >"$tmp/$1.json" <<EOF
{"target":"$2",
 "model":{"hidden":100,"filters":100,"interactions":4,"gaussians":25,"cutoff":6.0,"max_neighbors":32,"readout":"sum"},
 "batching":{"method":"lpfhp","model_batch_size":$5},
 "training":{"epochs":1000,"lr":0.0005,"normalize":"atomref","log_every":1,"precision":"$7",
             "loss":{"forces_weight":0}},
 "backend":{"replication_factor":$3,"gradient_accumulation":$4,"threads":$6}}
EOF
}

cases=()
IFS=, read -r -a dlist <<<"$datasets"
IFS=, read -r -a plist <<<"$precisions"
for ds in "${dlist[@]}"; do
  case $ds in
    water) src=../shared/data/water_20k.extxyz.gz target=energy ;;
    qm9) src=../shared/data/qm9_13k.extxyz.gz target=energy_U0 ;;
    *) echo "bench_scaling: DATA: '$ds' is not water or qm9" >&2; exit 2 ;;
  esac
  "$bin" ingest "$src" --out "$tmp/$ds.ptd" >/dev/null
  for p in "${plist[@]}"; do
    job "$ds.$p.one" "$target" 1 1 8 1 "$p"
    job "$ds.$p.all" "$target" "$cores" 1 8 "$cores" "$p"
    job "$ds.$p.all.a2b4" "$target" "$cores" 2 4 "$cores" "$p"
    job "$ds.$p.all.a4b2" "$target" "$cores" 4 2 "$cores" "$p"
    job "$ds.$p.auto" "$target" '"auto"' 1 '"auto"' "$cores" "$p"
    for c in one one.nohuge par all all.nohuge all.a2b4 all.a4b2 auto auto.nohuge; do
      cases+=("$ds.$p.$c")
    done
  done
done

for round in $(seq "$rounds"); do
  for c in "${cases[@]}"; do
    ds=${c%%.*} jobname=${c%.nohuge} huge=1
    [ "$jobname" = "$c" ] || huge=0
    if [ $huge = 0 ]; then export PACKTRAIN_HUGEPAGES=0; else unset PACKTRAIN_HUGEPAGES; fi
    if [ "${c##*.}" = par ]; then   # `cores` copies of `one` at once
      pids=()
      for k in $(seq "$cores"); do
        "$bin" bench "$tmp/$ds.ptd" --config "$tmp/${c%.par}.one.json" --steps "$steps" \
          --warmup 3 >"$tmp/$c.$round.p$k" 2>"$tmp/err.$k" &
        pids+=($!)
      done
      for k in $(seq "$cores"); do
        wait "${pids[$((k - 1))]}" || { cat "$tmp/err.$k" >&2; exit 1; }
      done
    else
      "$bin" bench "$tmp/$ds.ptd" --config "$tmp/$jobname.json" --steps "$steps" --warmup 3 \
        >"$tmp/$c.$round" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
    fi
    unset PACKTRAIN_HUGEPAGES
    cut -d' ' -f1 /proc/loadavg >"$tmp/$c.$round.load"
  done
done

"$py" - "$tmp" "$cores" "$rounds" "${cases[@]}" <<'PY'
import json, statistics, sys
tmp, cores, rounds, cases = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
runs = {}
for c in cases:
    for k in range(1, rounds + 1):
        load = float(open(f"{tmp}/{c}.{k}.load").read())
        if c.endswith(".par"):   # the processes' sum of graphs/s, mean CPU per graph
            ps = [json.load(open(f"{tmp}/{c}.{k}.p{q}")) for q in range(1, cores + 1)]
            r = dict(ps[0])
            gps = sum(x["graphs_per_s"] for x in ps)
            cpu_graph = statistics.mean(x["cpu_ms_per_step"] * x["steps"] / x["graphs"] for x in ps)
        else:
            r = json.load(open(f"{tmp}/{c}.{k}"))
            gps, cpu_graph = r["graphs_per_s"], r["cpu_ms_per_step"] * r["steps"] / r["graphs"]
        rep = r["backend"].get("replicas_ms", {})
        # the step outside the replicas' compute: the wait for the slowest,
        # the all-reduce, waking, the host's serial work (the two-core loss
        # beyond what sharing caches costs the compute itself)
        outside = r["step_ms"] - rep.get("busy", r["step_ms"])
        runs.setdefault(c, []).append((gps, cpu_graph, load, outside))
        b = r["backend"]
        print(json.dumps({"case": c, "round": k, "graphs_per_s": round(gps, 1),
                          "cpu_ms_per_graph": round(cpu_graph, 4), "step_ms": round(r["step_ms"], 2),
                          "cpu_ms_per_step": round(r["cpu_ms_per_step"], 2),
                          "layout": f"{b['replication_factor']}x{b['gradient_accumulation']}"
                                    f"x{b['micro_packs']}",
                          "busy_cpu_ms": round(rep.get("busy_cpu", 0.0), 2),
                          "outside_compute_ms": round(outside, 3),
                          "wait_cpu_ms": round(rep.get("wait_cpu", 0.0), 2),
                          "allreduce_ms": round(r["phases_ms"]["allreduce"], 2),
                          "start_lag_ms": round(rep.get("start_lag", 0.0), 3),
                          "host_ms": {k: round(v, 3) for k, v in b.get("host_ms", {}).items()},
                          "fills": b.get("fills", {}), "load": load}))
print(f"\n| case | graphs/s best (median) | CPU ms/graph best (median) | scaling best (median) "
      f"| cpu_scaling best (median) | outside compute ms/step best (median) | load |")
print("|---|---:|---:|---:|---:|---:|---:|")
for c in cases:
    v = runs[c]
    ds, prec, layout = c.split(".", 2)
    if layout.startswith("one"):   # the denominators
        g, cg = [x[0] for x in v], [x[1] for x in v]
        loads = [x[2] for x in v]
        o = [x[3] for x in v]
        print(f"| {c} | {max(g):.1f} ({statistics.median(g):.1f}) | {min(cg):.3f} "
              f"({statistics.median(cg):.3f}) | 1 core | 1 core | {min(o):.3f} "
              f"({statistics.median(o):.3f}) | {min(loads):.2f}-{max(loads):.2f} |")
        continue
    one = runs[f"{ds}.{prec}.one" + (".nohuge" if c.endswith(".nohuge") else "")]
    g, cg = [x[0] for x in v], [x[1] for x in v]
    og, ocg = [x[0] for x in one], [x[1] for x in one]
    sc = (max(g) / max(og), statistics.median(g) / statistics.median(og))
    cs = (cores * min(ocg) / min(cg), cores * statistics.median(ocg) / statistics.median(cg))
    loads = [x[2] for x in v]
    o = [x[3] for x in v]
    print(f"| {c} | {max(g):.1f} ({statistics.median(g):.1f}) | {min(cg):.3f} "
          f"({statistics.median(cg):.3f}) | {sc[0]:.3f} ({sc[1]:.3f}) | {cs[0]:.3f} ({cs[1]:.3f}) "
          f"| {min(o):.3f} ({statistics.median(o):.3f}) | {min(loads):.2f}-{max(loads):.2f} |")
PY
