#!/usr/bin/env bash
# bench_precision.sh [PACKTRAIN] [EPOCHS] — training.precision "bf16" against
# "fp32" on the QM9 subset (issue 7): the same job (seed 000's model, LPFHP,
# one replica per core, ≈32 molecules per step, seeded split 80/10/10) trained
# for the same number of epochs in each precision, one after the other in
# this run.  Prints per precision the best validation MAE, the test MAE of
# the best model, the training time and the training throughput (graphs per
# second of optimizer-step time), then the MAE difference and the speed-up.
# bf16 needs AVX512-BF16: without it the bf16 run is refused at start and the
# script says so and exits 0 after the fp32 run.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-bin/packtrain}
epochs=${2:-3}
cores=$(nproc)
py=/usr/bin/python3
[ -x "$bin" ] || { echo "bench_precision: no packtrain binary at $bin" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" ingest ../shared/data/qm9_13k.extxyz.gz --out "$tmp/qm9.ptd" >/dev/null
b=$(( (16 + cores - 1) / cores ))
for prec in fp32 bf16; do
  cat >"$tmp/$prec.json" <<JSON
{"target":"energy_U0",
 "model":{"hidden":100,"filters":100,"interactions":4,"gaussians":25,"cutoff":6.0,"max_neighbors":32,"readout":"sum"},
 "batching":{"method":"lpfhp","model_batch_size":$b},
 "training":{"epochs":$epochs,"lr":0.0005,"normalize":"atomref","log_every":50,"seed":7,
             "precision":"$prec"},
 "backend":{"replication_factor":$cores,"threads":$cores}}
JSON
  if ! "$bin" train "$tmp/qm9.ptd" --config "$tmp/$prec.json" --out "$tmp/$prec" \
      >"$tmp/$prec.log" 2>"$tmp/$prec.err"; then
    if [ "$prec" = bf16 ] && grep -q "AVX512-BF16" "$tmp/$prec.err"; then
      echo "bench_precision: SKIP bf16: $(head -1 "$tmp/$prec.err")" >&2
      exit 0
    fi
    cat "$tmp/$prec.err" >&2
    exit 1
  fi
done
"$py" - "$tmp" "$epochs" <<'PY'
import json, sys
tmp, epochs = sys.argv[1], int(sys.argv[2])
rows = {}
for prec in ("fp32", "bf16"):
    r = json.load(open(f"{tmp}/{prec}/result.json"))
    rows[prec] = {
        "precision": prec, "epochs": r["epochs"], "steps": r["steps"],
        "best_val_mae_eV": r["best_val_mae"], "test_mae_eV": r["test_mae"],
        "train_seconds": round(r["seconds"], 1),
        "graphs_per_s": round(r["graphs"] / r["step_seconds"], 1) if r["step_seconds"] else None,
    }
    print(json.dumps({"bench": "precision", **rows[prec]}))
f, b = rows["fp32"], rows["bf16"]
summary = {
    "bench": "precision_summary", "epochs": epochs,
    "test_mae_diff_eV": round(b["test_mae_eV"] - f["test_mae_eV"], 5),
    "test_mae_ratio": round(b["test_mae_eV"] / f["test_mae_eV"], 4),
    "val_mae_diff_eV": round(b["best_val_mae_eV"] - f["best_val_mae_eV"], 5),
    "speedup_graphs_per_s": round(b["graphs_per_s"] / f["graphs_per_s"], 3),
}
print(json.dumps(summary))
print()
print(f"{'precision':<9} {'val MAE':>9} {'test MAE':>9} {'graphs/s':>9} {'seconds':>8}   ({epochs} epochs, QM9 subset)")
for p in ("fp32", "bf16"):
    r = rows[p]
    print(f"{p:<9} {r['best_val_mae_eV']:>9.4f} {r['test_mae_eV']:>9.4f} {r['graphs_per_s']:>9.0f} {r['train_seconds']:>8.1f}")
print(f"bf16 - fp32 test MAE: {summary['test_mae_diff_eV']:+.4f} eV ({summary['test_mae_ratio']:.3f}x); "
      f"speed-up {summary['speedup_graphs_per_s']:.2f}x")
PY
