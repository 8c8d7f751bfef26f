#!/usr/bin/env bash
# bench_tta.sh [PACKTRAIN] [BENCH_DIR] — time to accuracy (issue 18): how long
# packtrain and its PyTorch peer each need, wall clock, same machine, same run
# window, to reach the validation MAE the peer reaches in EPOCHS epochs.
#
#   EPOCHS=25      the peer's epochs (its best validation MAE is the target)
#   PT_EPOCHS=30   packtrain's epochs at most (per variant)
#   LR=5e-4        Adam's learning rate, constant, both sides
#   BATCH=32       the peer's global batch in molecules; packtrain takes 16
#                  LPFHP packs per step (≈32 QM9 molecules: packs hold ~2)
#   VARIANTS="fp32:fp32:16:5e-4 bf16:bf16:16:5e-4 fp32_b32:fp32:32:1e-3 bf16_b32:bf16:32:1e-3"
#                  packtrain runs, each NAME:PRECISION:PACKS_PER_STEP:LR (the
#                  levers: bf16 products where the CPU has AVX512-BF16 —
#                  skipped with a message otherwise —, bigger packed batches
#                  with a higher rate, ...)
#   PLOT=docs/tta_qm9.png  the curves (validation MAE against wall time, both
#                  sides, log scale), drawn by bench/tta_plot.py from this
#                  script's output (save the output to draw a run again)
#
# Both sides: seed 000's SchNet (H=F=100, T=4, G=25, cutoff 6 Å, 32
# neighbours, sum readout), the QM9 subset ../shared/data/qm9_13k.extxyz.gz,
# target energy_U0, packtrain's split 0.8/0.1/0.1 with seed 0 (the peer reads
# the very index lists: bench/split_ids.c), atomref normalisation (per-element
# least squares + standardised per-atom residual; the peer fits the same on
# the same training part: bench/torch_peer.py), MSE in eV, Adam, constant
# rate, validation MAE over the whole validation part after every epoch.
# packtrain: `packtrain train` with one replica per core and one OpenBLAS
# thread each, its defaults otherwise (checkpoints at every epoch end).  The
# peer: bench/torch_tta.py, DistributedDataParallel over one single-threaded
# process per core (gloo, loopback) — its fastest layout on this machine
# (bench_speed.sh).
#
# Clocks: packtrain's epoch lines count from pt_train_run's start (neighbour
# lists, split, normalisation fit and packing included); the peer's from its
# first step (file parsing, radius graphs and the fit excluded, as a PyG
# user's processed dataset would be).  That is conservative for packtrain.
# Each side's whole-process wall time is printed too.
#
# Needs: bin/packtrain and build/bench/split_ids (`make bench`, or
# make BUILD=DIR DIR/bench/split_ids), python3-torch, python3-matplotlib.
# Output: the conditions (stderr), one JSON line per run, a summary JSON
# line, a table, and the picture.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-bin/packtrain}
bdir=${2:-build/bench}
epochs=${EPOCHS:-25}
pt_epochs=${PT_EPOCHS:-30}
lr=${LR:-5e-4}
batch=${BATCH:-32}
variants=${VARIANTS:-fp32:fp32:16:5e-4 bf16:bf16:16:5e-4 fp32_b32:fp32:32:1e-3 bf16_b32:bf16:32:1e-3}
plot=${PLOT:-docs/tta_qm9.png}
src=../shared/data/qm9_13k.extxyz.gz
key=energy_U0
cores=$(nproc)
py=/usr/bin/python3
[ -x "$bin" ] || { echo "bench_tta: no packtrain binary at $bin" >&2; exit 2; }
[ -x "$bdir/split_ids" ] || { echo "bench_tta: $bdir/split_ids missing: run 'make bench' (or make BUILD=... <dir>/bench/split_ids)" >&2; exit 2; }
"$py" -c 'import torch' 2>/dev/null || { echo "bench_tta: needs python3-torch (apt-get install -y python3-torch)" >&2; exit 2; }
"$py" -c 'import matplotlib' 2>/dev/null || { echo "bench_tta: needs python3-matplotlib (apt-get install -y python3-matplotlib)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rc=$?; if [ $rc = 0 ]; then rm -rf "$tmp"; else echo "bench_tta: failed ($rc); its raw files are kept in $tmp" >&2; fi' EXIT
flags=$(grep -m1 '^flags' /proc/cpuinfo)
has_bf16=0
case " $flags " in *" avx512_bf16 "*) has_bf16=1 ;; esac

cond=$(printf '{"date":"%s","cpu":"%s","cores":%d,"avx512_bf16":%d,"OPENBLAS_CORETYPE":"%s","commit":"%s","load_average_start":%s,"epochs_peer":%d,"epochs_packtrain_max":%d,"lr":%s,"batch":%d}' \
  "$(date -Iseconds)" "$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')" "$cores" \
  "$has_bf16" "${OPENBLAS_CORETYPE:-(unset)}" "$(git rev-parse --short HEAD)" \
  "$(cut -d' ' -f1 /proc/loadavg)" "$epochs" "$pt_epochs" "$lr" "$batch")
echo "bench_tta: $cond" >&2
echo "$cond" >"$tmp/conditions.json"

"$bin" ingest "$src" --out "$tmp/qm9.ptd" >/dev/null

# job NAME PRECISION PACKS LR
job() {
  local b=$(( ($3 + cores - 1) / cores ))
  cat >"$tmp/$1.json" <<EOF
{"target":"$key",
 "model":{"hidden":100,"filters":100,"interactions":4,"gaussians":25,"cutoff":6.0,"max_neighbors":32,"readout":"sum"},
 "batching":{"method":"lpfhp","model_batch_size":$b},
 "training":{"epochs":$pt_epochs,"optimizer":"adam","lr":$4,"schedule":{"kind":"constant"},
             "split":[0.8,0.1,0.1],"seed":0,"normalize":"atomref","log_every":1000,"precision":"$2"},
 "backend":{"replication_factor":$cores,"threads":$cores}}
EOF
}

job split fp32 16 "$lr"
"$bdir/split_ids" "$tmp/qm9.ptd" "$tmp/split.json" "$key" >"$tmp/split_ids.json"

# now_s: wall clock in seconds
now_s() { date +%s.%N; }

names=()
for v in $variants; do
  IFS=: read -r name prec packs vlr <<<"$v"
  if [ "$prec" = bf16 ] && [ "$has_bf16" = 0 ]; then
    echo "bench_tta: variant $name skipped: this CPU has no AVX512-BF16" >&2
    continue
  fi
  job "$name" "$prec" "$packs" "$vlr"
  t0=$(now_s)
  "$bin" train "$tmp/qm9.ptd" --config "$tmp/$name.json" --out "$tmp/$name.out" \
    >"$tmp/$name.metrics" 2>"$tmp/$name.err" || { cat "$tmp/$name.err" >&2; exit 1; }
  t1=$(now_s)
  printf '{"variant":"%s","precision":"%s","packs_per_step":%s,"lr":%s,"wall_s":%s,"load_average":%s}\n' \
    "$name" "$prec" "$packs" "$vlr" "$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.3f", b-a}')" "$(cut -d' ' -f1 /proc/loadavg)" \
    >"$tmp/$name.run"
  names+=("$name")
done

t0=$(now_s)
"$py" bench/torch_tta.py "$src" --target "$key" --split "$tmp/split_ids.json" --epochs "$epochs" \
  --graphs-per-step "$batch" --lr "$lr" --layout ddp --ranks "$cores" \
  >"$tmp/peer.metrics" 2>"$tmp/peer.err" || { cat "$tmp/peer.err" >&2; exit 1; }
t1=$(now_s)
printf '{"wall_s":%s,"load_average":%s}\n' "$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.3f", b-a}')" "$(cut -d' ' -f1 /proc/loadavg)" >"$tmp/peer.run"

"$py" - "$tmp" "$plot" "${names[@]}" <<'PY' | tee "$tmp/result"
import json, sys
tmp, plot, names = sys.argv[1], sys.argv[2], sys.argv[3:]
cond = json.load(open(f"{tmp}/conditions.json"))
lines = [json.loads(l) for l in open(f"{tmp}/peer.metrics")]
peer = [l for l in lines if "epoch" in l]
peer_sum = next(l for l in lines if l.get("summary"))
peer_run = json.load(open(f"{tmp}/peer.run"))
target = min(l["val_mae"] for l in peer)

def reach(curve):
    """wall seconds and epoch of the first validation at or below target"""
    for l in curve:
        if l["val_mae"] <= target:
            return l["seconds"], l["epoch"]
    return None, None

peer_t, peer_e = reach(peer)
print(json.dumps({"side": "pytorch_ddp", "ranks": peer_sum["ranks"], "epochs": len(peer),
                  "best_val_mae": target, "best_epoch": peer_sum["best_epoch"],
                  "seconds_to_target": peer_t, "epoch_to_target": peer_e,
                  "train_seconds": peer_sum["seconds"], "prep_seconds": peer_sum["prep_seconds"],
                  "val_seconds_per_epoch": sorted(l["val_seconds"] for l in peer)[len(peer) // 2],
                  "wall_s": peer_run["wall_s"], "load_average_after": peer_run["load_average"],
                  "curve": [[l["seconds"], l["val_mae"]] for l in peer]}))
rows, curves = [], {"PyTorch DDP %dx1 (peer)" % peer_sum["ranks"]: peer}
for n in names:
    run = json.load(open(f"{tmp}/{n}.run"))
    ep = [json.loads(l) for l in open(f"{tmp}/{n}.metrics") if '"kind":"epoch"' in l]
    res = json.load(open(f"{tmp}/{n}.out/result.json"))
    t, e = reach(ep)
    # what is not training in an epoch (validation, the end-of-epoch
    # checkpoint, the next epoch's packing): the epoch's wall time less its
    # training steps' (the epoch line's graphs/s is over its steps alone)
    off = [(b["seconds"] - a["seconds"]) - res["n_train"] / b["graphs_per_s"]
           for a, b in zip(ep, ep[1:]) if b["graphs_per_s"]]
    r = {"side": "packtrain", "variant": n, "precision": run["precision"],
         "packs_per_step": run["packs_per_step"], "lr": run["lr"], "epochs": len(ep),
         "best_val_mae": min(l["val_mae"] for l in ep), "seconds_to_target": t,
         "epoch_to_target": e, "speedup_to_target": round(peer_t / t, 2) if t else None,
         "train_seconds": ep[-1]["seconds"], "wall_s": run["wall_s"],
         "graphs_per_s_epoch_median": sorted(l["graphs_per_s"] for l in ep)[len(ep) // 2],
         "n_train": res["n_train"], "n_val": res["n_val"], "load_average_after": run["load_average"],
         "setup_seconds": round(ep[0]["seconds"] - res["n_train"] / ep[0]["graphs_per_s"]
                                - (sorted(off)[len(off) // 2] if off else 0.0), 2),
         "off_training_seconds_per_epoch": round(sorted(off)[len(off) // 2], 3) if off else None,
         "curve": [[l["seconds"], l["val_mae"]] for l in ep]}
    print(json.dumps(r))
    rows.append(r)
    curves[f"packtrain {n}"] = ep
summary = {"bench": "tta", "target_val_mae": target, "peer_seconds_to_target": peer_t,
           "speedup_to_target": {r["variant"]: r["speedup_to_target"] for r in rows},
           "conditions": cond, "plot": plot}
print(json.dumps(summary))
print()
print(f"conditions: {cond['date']}, {cond['cpu']}, {cond['cores']} cores, OPENBLAS_CORETYPE="
      f"{cond['OPENBLAS_CORETYPE']}, commit {cond['commit']}, load {cond['load_average_start']} at "
      f"start; peer {len(peer)} epochs, target = its best validation MAE {target:.4f} eV "
      f"(epoch {peer_sum['best_epoch']})")
print(f"{'run':<22} {'best MAE eV':>11} {'s to target':>11} {'epoch':>5} {'speedup':>7} {'wall s':>7}")
print(f"{'pytorch ddp':<22} {target:>11.4f} {peer_t:>11.1f} {peer_e:>5} {'1.0x':>7} {peer_run['wall_s']:>7.1f}")
for r in rows:
    t = f"{r['seconds_to_target']:.1f}" if r["seconds_to_target"] else "not reached"
    s = f"{r['speedup_to_target']:.1f}x" if r["speedup_to_target"] else "-"
    print(f"{'packtrain ' + r['variant']:<22} {r['best_val_mae']:>11.4f} {t:>11} "
          f"{r['epoch_to_target'] or '-':>5} {s:>7} {r['wall_s']:>7.1f}")

print(f"per epoch off the training steps: peer validation {sorted(l['val_seconds'] for l in peer)[len(peer) // 2]:.2f} s; "
      + "; ".join(f"packtrain {r['variant']} {r['off_training_seconds_per_epoch']} s (setup {r['setup_seconds']} s)"
                  for r in rows))

PY
"$py" bench/tta_plot.py "$tmp/result" "$plot"
