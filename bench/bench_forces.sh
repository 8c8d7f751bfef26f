#!/usr/bin/env bash
# bench_forces.sh [BENCH_DIR] [ROUNDS] — training on energies and forces:
# what it costs against training on energies, and packtrain against PyTorch
# doing the same, measured in one run (the machine is shared: only ratios
# measured side by side mean something).
#
# The step: seed 000's SchNet (H=F=100, T=4, G=25, 6 Å cutoff, sum readout,
# fp32) on one fixed batch, the first GRAPHS structures of the data file:
#   energy         forward, MSE of the energy, backward
#   energy+forces  forward, forces F = -dE/dr, w_E MSE(E) + w_F MSE(F) (both
#                  weights 1), backward to the parameters (second derivatives)
# packtrain: bench/bench_forces.c (the engine's step without loader and
# optimizer, which cost < 1% here), the batch in packs of PER_PACK
# consecutive structures computed MICRO packs at a time with the gradients
# added up, as the trainer's replicas run their micro-batches (a force
# step's arena is ~2x an energy step's; micro-batches keep it in cache), in
# three layouts — one process with one OpenBLAS thread, one process with
# `cores` threads, and `cores` processes of one thread at once, each with its
# share of the packs (data parallel, as the backend's replicas; the step time
# is the slowest rank's).
# PyTorch: bench/torch_forces_bench.py (forces by autograd.grad with
# create_graph=True, then backward and Adam, as SchNetPack trains), in
# torch_peer.py's layouts — 1 thread, `cores` threads, DDP over `cores`
# single-threaded processes (gloo), the batch split the same way.
# Rounds interleave every layout of both, so load on the machine hits both
# alike; the best graphs/s of each layout over the rounds is kept, and the
# ratio is packtrain's best layout over PyTorch's best layout.
#
# Cases (CASES=name,name to choose; default all):
#   water  water_20k.extxyz.gz, 16 clusters (TIP4P forces), 32 neighbours;
#          packs of 2, micro-batches of 1 pack
#   emt    emt_20k.extxyz.gz, 16 periodic structures (EMT forces), every
#          neighbour within the cutoff (dense metals; max_neighbors 0);
#          packs of 2, micro-batches of 1 pack
#   qm9    qm9_13k.extxyz.gz, 32 molecules, packs of 4, micro-batches of 2
#          packs: packtrain's cost ratio only (QM9 has no force labels; the
#          force step does the same work on zero residuals), no PyTorch peer
# Output: one JSON object per measurement, then a table.
# Needs the bench programs (make bench, or make build/bench/bench_forces).
set -euo pipefail
cd "$(dirname "$0")/.."
bdir=${1:-build/bench}
rounds=${2:-3}
bin=${PACKTRAIN:-bin/packtrain}
cases=${CASES:-water,emt,qm9}
data=${DATA_DIR:-../shared/data}
cores=$(nproc)
py=/usr/bin/python3
[ -x "$bdir/bench_forces" ] || { echo "bench_forces.sh: $bdir/bench_forces missing (make bench)" >&2; exit 2; }
[ -x "$bin" ] || { echo "bench_forces.sh: no packtrain binary at $bin" >&2; exit 2; }
"$py" -c 'import torch, ase' || { echo "bench_forces.sh: needs python3-torch and python3-ase" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out="$tmp/results.jsonl"
: >"$out"

# packtrain NAME PTD TARGET GRAPHS NEIGHBOURS ROUND PER_PACK MICRO: the three layouts
packtrain() {
  local name=$1 ptd=$2 target=$3 graphs=$4 nb=$5 round=$6 per=$7 micro=$8 common
  common=(--per-pack "$per" --packs $((graphs / per)) --micro "$micro" --target "$target"
          --max-neighbors "$nb" --steps 8)
  "$bdir/bench_forces" "$ptd" "${common[@]}" --threads 1 |
    sed "s/^{/{\"case\":\"$name\",\"side\":\"packtrain\",\"layout\":\"1 thread\",\"round\":$round,/" >>"$out"
  "$bdir/bench_forces" "$ptd" "${common[@]}" --threads "$cores" |
    sed "s/^{/{\"case\":\"$name\",\"side\":\"packtrain\",\"layout\":\"$cores threads\",\"round\":$round,/" >>"$out"
  local r pids=()
  for r in $(seq 0 $((cores - 1))); do
    "$bdir/bench_forces" "$ptd" "${common[@]}" --threads 1 --ranks "$cores" --rank "$r" \
      >"$tmp/rank.$r" & pids+=($!)
  done
  wait "${pids[@]}"
  # the data-parallel step: every rank's graphs, at the slowest rank's pace
  cat "$tmp"/rank.* | "$py" -c '
import json, sys
rs = [json.loads(l) for l in sys.stdin]
g = sum(r["graphs"] for r in rs)
e = max(r["energy_ms"] for r in rs); f = max(r["forces_ms"] for r in rs)
print(json.dumps({"case": sys.argv[1], "side": "packtrain", "layout": sys.argv[2] + " processes",
                  "round": int(sys.argv[3]), "graphs": g, "energy_ms": e, "forces_ms": f,
                  "energy_graphs_per_s": round(1e3 * g / e, 1),
                  "forces_graphs_per_s": round(1e3 * g / f, 1)}))' "$name" "$cores" "$round" >>"$out"
  rm -f "$tmp"/rank.*
}

# pytorch NAME FILE TARGET GRAPHS NEIGHBOURS ROUND: forces and energy steps, three layouts
pytorch() {
  local name=$1 file=$2 target=$3 graphs=$4 nb=$5 round=$6 w lay
  for w in 1 0; do
    for lay in "threads 1" "threads $cores" "ddp $cores"; do
      set -- $lay
      local opt=(--threads "$2")
      [ "$1" = ddp ] && opt=(--ranks "$2")
      "$py" bench/torch_forces_bench.py "$file" --graphs-per-step "$graphs" --target "$target" \
        --max-neighbors "$nb" --forces-weight "$w" --layout "$1" "${opt[@]}" --steps 4 \
        --warmup 1 2>/dev/null | tail -1 |
        sed "s/^{/{\"case\":\"$name\",\"side\":\"pytorch\",\"round\":$round,/" >>"$out"
    done
  done
}

run_case() {
  local name=$1 file=$2 target=$3 graphs=$4 nb=$5 peer=$6 per=$7 micro=$8
  local ptd="$tmp/$name.ptd"
  "$bin" ingest "$file" --out "$ptd" >/dev/null
  local round
  for round in $(seq 1 "$rounds"); do
    packtrain "$name" "$ptd" "$target" "$graphs" "$nb" "$round" "$per" "$micro"
    if [ "$peer" = 1 ]; then pytorch "$name" "$file" "$target" "$graphs" "$nb" "$round"; fi
  done
}

IFS=, read -ra want <<<"$cases"
for c in "${want[@]}"; do
  case $c in
    water) run_case water "$data/water_20k.extxyz.gz" energy 16 32 1 2 1 ;;
    emt) run_case emt "$data/emt_20k.extxyz.gz" energy 16 0 1 2 1 ;;
    qm9) run_case qm9 "$data/qm9_13k.extxyz.gz" energy_U0 32 32 0 4 2 ;;
    *) echo "bench_forces.sh: unknown case '$c' (water, emt, qm9)" >&2; exit 2 ;;
  esac
done

cat "$out"
echo "# load average at the end: $(cut -d' ' -f1-3 /proc/loadavg); $cores cores; OpenBLAS $("$bdir/schnet_profile" --corename 2>/dev/null || echo '?')"
"$py" - "$out" "$cores" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(f"{'case':6} {'step':14} {'packtrain best graphs/s (layout)':36} "
      f"{'PyTorch best graphs/s (layout)':34} {'ratio':>6}")
for case in dict.fromkeys(r["case"] for r in rows):
    pt = [r for r in rows if r["case"] == case and r["side"] == "packtrain"]
    th = [r for r in rows if r["case"] == case and r["side"] == "pytorch"]
    one = [r for r in pt if r["layout"] == "1 thread"]
    cost = min(r["forces_ms"] / r["energy_ms"] for r in one)
    line = f"{case}: packtrain forces/energy step cost (1 thread, best round) {cost:.2f}"
    if th:
        t1f = max(r["graphs_per_s"] for r in th if r["mode"] != "energy" and r["layout"] == "threads"
                  and r["threads"] == 1)
        t1e = max(r["graphs_per_s"] for r in th if r["mode"] == "energy" and r["layout"] == "threads"
                  and r["threads"] == 1)
        line += f"; PyTorch's {t1e / t1f:.2f}"
    print(line)
    for step, key, mode in (("energy+forces", "forces_graphs_per_s", "energy+forces"),
                            ("energy", "energy_graphs_per_s", "energy")):
        best = {}
        for r in pt:
            best[r["layout"]] = max(best.get(r["layout"], 0.0), r[key])
        lay, g = max(best.items(), key=lambda kv: kv[1])
        if not th:
            print(f"{case:6} {step:14} {g:10.1f} ({lay}){'':18} {'-':34} {'-':>6}")
            continue
        tb = {}
        for r in th:
            if r["mode"] != mode:
                continue
            name = "DDP %d" % r["ranks"] if r["layout"] == "ddp" else "%d thread%s" % (
                r["threads"], "s" if r["threads"] > 1 else "")
            tb[name] = max(tb.get(name, 0.0), r["best_graphs_per_s"])
        tlay, tg = max(tb.items(), key=lambda kv: kv[1])
        print(f"{case:6} {step:14} {g:10.1f} ({lay}){'':{max(0, 24 - len(lay))}} "
              f"{tg:10.1f} ({tlay}){'':{max(0, 22 - len(tlay))}} {g / tg:6.2f}")
PY
