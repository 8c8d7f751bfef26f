#!/usr/bin/env bash
# ab_step.sh A B [PAIRS] — two builds' training step, run as interleaved A/B
# pairs on seed 000's SchNet, for a room's before/after evidence.  The host's
# speed moves 5-10% within a minute while a change moves a step by 0.5-2%,
# so only pairs run back to back say anything: each pair's B/A ratio, their
# median, and how many pairs went which way (bench/paired.py: ab_summary).
# The order alternates (A B, B A, ...) so neither build always runs first.
#
#   A, B     a build directory (DIR/bench/schnet_profile; packtrain at
#            DIR/bin/packtrain or DIR/../bin/packtrain) or a worktree root
#            (ROOT/build/bench/schnet_profile, ROOT/bin/packtrain)
#   PAIRS    default 5
#   MODE     profile (default): bench/schnet_profile, one replica, one
#            thread, 8 packs (bench_speed.sh's profile job); the metric is
#            the training thread's CPU ms per step (cpu_ms_per_compute),
#            with wall ms and every part of "ms" beside it.
#            bench: `packtrain bench`, bench_speed.sh's 2-replica job
#            (replicas = threads = cores, 16 packs a step); the metric is
#            step_ms (wall), with cpu_ms_per_step beside it.
#   CASE     water (default) or qm9;  PREC fp32 (default) or bf16
#   METHOD   lpfhp (default) or tuple (QM9 only): bench_speed.sh's qm9_tuple
#            jobs, 11 packs over the cores (6 a micro-batch on 2 cores: 12
#            packs, ~35 molecules a step), the profile job one such
#            micro-batch on one thread
#   STEPS    measured steps per run (profile 20, bench 40), after 3 / 5
#
# Output: one line per run, then one JSON summary per metric.  Use
# `nice -n 5` for nothing here: both sides must see the same priority.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: bench/ab_step.sh A B [PAIRS]  (MODE=profile|bench CASE=water|qm9 PREC=fp32|bf16 STEPS=N)" >&2; exit 2; }
pairs=${3:-5}
mode=${MODE:-profile} case=${CASE:-water} prec=${PREC:-fp32} method=${METHOD:-lpfhp}
[[ "$pairs" =~ ^[1-9][0-9]*$ ]] || { echo "ab_step: PAIRS must be a positive count, not '$pairs'" >&2; exit 2; }
case $mode in profile) steps=${STEPS:-20} warm=3 ;; bench) steps=${STEPS:-40} warm=5 ;;
  *) echo "ab_step: MODE must be profile or bench, not '$mode'" >&2; exit 2 ;; esac
case $case in water) src=../shared/data/water_20k.extxyz.gz tgt=energy ;;
  qm9) src=../shared/data/qm9_13k.extxyz.gz tgt=energy_U0 ;;
  *) echo "ab_step: CASE must be water or qm9, not '$case'" >&2; exit 2 ;; esac
case $prec in fp32|bf16) ;; *) echo "ab_step: PREC must be fp32 or bf16, not '$prec'" >&2; exit 2 ;; esac
case $method in lpfhp) ;; tuple) [ "$case" = qm9 ] || { echo "ab_step: METHOD=tuple is a QM9 case (CASE=qm9)" >&2; exit 2; } ;;
  *) echo "ab_step: METHOD must be lpfhp or tuple, not '$method'" >&2; exit 2 ;; esac

# build DIR -> "profile_program packtrain_binary"
locate() {
  local d=$1
  if [ -x "$d/bench/schnet_profile" ]; then
    if [ -x "$d/bin/packtrain" ]; then echo "$d/bench/schnet_profile $d/bin/packtrain"
    else echo "$d/bench/schnet_profile $d/../bin/packtrain"; fi
  elif [ -x "$d/build/bench/schnet_profile" ]; then echo "$d/build/bench/schnet_profile $d/bin/packtrain"
  else echo "ab_step: no bench/schnet_profile under '$d' (make -j2 DIR/bench/schnet_profile)" >&2; return 1; fi
}
read -r prof_a bin_a < <(locate "$1") && [ -n "${prof_a:-}" ] || exit 2
read -r prof_b bin_b < <(locate "$2") && [ -n "${prof_b:-}" ] || exit 2
for b in "$bin_a" "$bin_b"; do [ -x "$b" ] || { echo "ab_step: no packtrain binary at $b" >&2; exit 2; }; done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin_a" ingest "$src" --out "$tmp/data.ptd" >/dev/null
cores=$(nproc)
if [ "$mode" = profile ]; then reps=1 threads=1 packs=8; else reps=$cores threads=$cores packs=16; fi
mb=$(( (packs + reps - 1) / reps ))
# tuple packs hold ~3 QM9 molecules (LPFHP's ~2): bench_speed.sh's 11 packs
# over the cores, its profile job one replica's micro-batch of them
[ "$method" = tuple ] && mb=$(( (11 + cores - 1) / cores ))
[ "$mode" = bench ] && [ "$case" = water ] && mb='"auto"'   # as bench_speed.sh's job
cat >"$tmp/job.json" <<EOF
{"target":"$tgt",
 "model":{"hidden":100,"filters":100,"interactions":4,"gaussians":25,"cutoff":6.0,"max_neighbors":32,"readout":"sum"},
 "batching":{"method":"$method","model_batch_size":$mb},
 "training":{"epochs":1000,"lr":0.0005,"normalize":"atomref","log_every":1,"precision":"$prec",
             "loss":{"forces_weight":0}},
 "backend":{"replication_factor":$reps,"threads":$threads,"gradient_accumulation":1}}
EOF

# one SIDE (a|b) PAIR: a run, its JSON in $tmp/SIDE.PAIR
one() {
  local side=$1 k=$2 prof bin
  if [ "$side" = a ]; then prof=$prof_a bin=$bin_a; else prof=$prof_b bin=$bin_b; fi
  if [ "$mode" = profile ]; then
    "$prof" "$tmp/data.ptd" "$tmp/job.json" "$steps" "$warm" >"$tmp/$side.$k" 2>"$tmp/err"
  else
    "$bin" bench "$tmp/data.ptd" --config "$tmp/job.json" --steps "$steps" --warmup "$warm" \
      >"$tmp/$side.$k" 2>"$tmp/err"
  fi || { cat "$tmp/err" >&2; exit 1; }
  echo "pair $k $side: $(cut -c1-160 "$tmp/$side.$k")" >&2
}
echo "ab_step: A=$1 B=$2 mode=$mode case=$case method=$method prec=$prec pairs=$pairs steps=$steps" \
     "load $(cut -d' ' -f1-3 /proc/loadavg) at $(date -u +%H:%M:%S)" >&2
for k in $(seq "$pairs"); do
  if [ $((k % 2)) = 1 ]; then one a "$k"; one b "$k"; else one b "$k"; one a "$k"; fi
done

python3 - "$tmp" "$pairs" "$mode" <<'PY'
import json, sys
sys.path.insert(0, "bench")
import paired
tmp, n, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
runs = [(json.load(open(f"{tmp}/a.{k}")), json.load(open(f"{tmp}/b.{k}"))) for k in range(1, n + 1)]
if mode == "profile":
    metrics = [("cpu_ms_per_compute", lambda r: r["cpu_ms_per_compute"]),
               ("ms_per_step", lambda r: r["ms_per_step"])]
    metrics += [(f"ms.{p}", lambda r, p=p: r["ms"][p]) for p in runs[0][0]["ms"]]
else:
    metrics = [("step_ms", lambda r: r["step_ms"]), ("cpu_ms_per_step", lambda r: r["cpu_ms_per_step"])]
for name, get in metrics:
    s = paired.ab_summary([(get(a), get(b)) for a, b in runs])
    s = {k: round(v, 4) if isinstance(v, float) else v for k, v in s.items()}
    print(json.dumps({"metric": name, **s}))
print(f"load after: {open('/proc/loadavg').read().split()[0]}", file=sys.stderr)
PY
