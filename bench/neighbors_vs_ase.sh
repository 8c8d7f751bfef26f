#!/usr/bin/env bash
# neighbors_vs_ase.sh [PACKTRAIN] [BENCH_DIR] — packtrain's periodic neighbour
# graphs against ASE's on all 20,000 structures of
# ../shared/data/emt_20k.extxyz.gz (slabs "T T F", slabs with vacuum, bulk
# cells of 1, 4 and 32 atoms shorter than the cutoff), cutoff 6 Å, with
# max_neighbors unlimited and 32:
#   - correctness: how many structures have exactly ASE's
#     primitive_neighbor_list (same receiver, sender and shift triples; with
#     the cap, ASE's list cut to the nearest 32 by distance, sender, shift),
#     and the largest distance difference (tests/ase/graphs_vs_ase.py);
#   - speed, in the same run, one core each: packtrain's pt_graphs_build
#     (count pass + fill pass, best of 3, bench_neighbors) against the
#     seconds ASE spends inside primitive_neighbor_list (file reading and the
#     Python cap excluded), and their ratios in wall and in CPU time (the
#     latter less disturbed by a shared machine).
# Prints one JSON object per setting.  Takes ~10-20 minutes (ASE).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-bin/packtrain}
bdir=${2:-build/bench}
data=../shared/data/emt_20k.extxyz.gz
py=/usr/bin/python3
[ -x "$bin" ] || { echo "neighbors_vs_ase: no packtrain binary at $bin (run make first)" >&2; exit 2; }
[ -x "$bdir/bench_neighbors" ] || make -s "$bdir/bench_neighbors" >/dev/null
[ -r "$data" ] || { echo "neighbors_vs_ase: $data not found" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$bin" ingest "$data" --out "$tmp/emt.ptd" >/dev/null
status=0
for k in unlimited 32; do
  "$bin" pack "$tmp/emt.ptd" --cutoff 6 --max-neighbors "$k" --dump-graphs "$tmp/g" >/dev/null 2>&1
  timing=$("$bdir/bench_neighbors" "$tmp/emt.ptd" --cutoff 6 --max-neighbors "$k" --reps 3)
  "$py" tests/ase/graphs_vs_ase.py "$data" "$tmp/g" --time --show 5 >"$tmp/cmp" || status=1
  "$py" - "$k" "$timing" "$tmp/cmp" <<'PYEOF'
import json, re, sys
k, timing, cmp = sys.argv[1], json.loads(sys.argv[2]), open(sys.argv[3]).read()
m = re.search(r"structures: (\d+) match, (\d+) differ .*largest distance difference (\S+) Å", cmp)
ase = float(re.search(r"ase_seconds: (\S+)", cmp).group(1))
ase_cpu = float(re.search(r"ase_cpu_seconds: (\S+)", cmp).group(1))
for line in cmp.splitlines():
    if line.startswith("structure "):
        print("  mismatch:", line, file=sys.stderr)
print(json.dumps({
    "dataset": "emt_20k", "cutoff": 6.0, "max_neighbors": None if k == "unlimited" else int(k),
    "structures": timing["structures"], "edges": timing["edges"],
    "match_ase": int(m.group(1)), "differ": int(m.group(2)),
    "largest_distance_difference_A": float(m.group(3)),
    "packtrain_seconds": timing["best_seconds"], "ase_seconds": ase,
    "packtrain_cpu_seconds": timing["best_cpu_seconds"], "ase_cpu_seconds": ase_cpu,
    "packtrain_structures_per_s": round(timing["structures"] / timing["best_seconds"], 1),
    "ase_structures_per_s": round(timing["structures"] / ase, 1),
    "speedup_vs_ase": round(ase / timing["best_seconds"], 1),
    "cpu_speedup_vs_ase": round(ase_cpu / timing["best_cpu_seconds"], 1)}))
PYEOF
done
exit $status
