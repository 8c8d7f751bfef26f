#!/usr/bin/env bash
# bench_packing_cache.sh [BINARY=bin/packtrain] [STRUCTURES=6000] [ROUNDS=5] —
# what keeping packing reports with their dataset saves (issue 17 item 2):
# GET /v1/datasets/{id}/packing on STRUCTURES structures of 1,000 close atoms
# (32 neighbours each), the first call computing the report (every
# structure's edges counted) against the same call again, answered from the
# store (ROUNDS times, the median), both in this run on one server.  Prints
# the two times, their ratio and the load average.  Starts `packtrain serve`
# on a free loopback port in a temporary data directory and stops it at the
# end.  About 15 s on a quiet machine with the defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(realpath "${1:-bin/packtrain}")
N=${2:-6000}
ROUNDS=${3:-5}
WORK=$(mktemp -d /tmp/pt-packcache-XXXXXX)
SERVER=
cleanup() {
  [ -n "$SERVER" ] && kill -TERM "$SERVER" 2>/dev/null && wait "$SERVER" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT

/usr/bin/python3 - "$WORK/dense.xyz.gz" "$N" <<'PYEOF'
import gzip, sys
with gzip.open(sys.argv[1], "wt") as f:
    for i in range(int(sys.argv[2])):
        f.write('1000\nenergy=%.3f pbc="F F F"\n' % (-1.0 * i))
        f.write("".join("H %.2f 0 0\n" % ((k % 10) * 0.01) for k in range(1000)))
PYEOF
"$BIN" serve --data-dir "$WORK/data" --port 0 --port-file "$WORK/port" --workers 0 2>"$WORK/server.log" &
SERVER=$!
for _ in $(seq 1 200); do [ -s "$WORK/port" ] && break; sleep 0.05; done
BASE=http://127.0.0.1:$(cat "$WORK/port")
ID=$(curl -sf --data-binary @"$WORK/dense.xyz.gz" "$BASE/v1/datasets?name=dense.xyz.gz" |
  /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])')
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
call() { # OUT: the call's total time in seconds; the body in OUT
  curl -sf -o "$1" -w '%{time_total}' "$BASE/v1/datasets/$ID/packing"
}
FIRST=$(call "$WORK/first.json")
AGAIN=()
for _ in $(seq 1 "$ROUNDS"); do AGAIN+=("$(call "$WORK/again.json")"); done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
/usr/bin/python3 - "$WORK/first.json" "$WORK/again.json" "$FIRST" "$LOAD_BEFORE" "$LOAD_AFTER" "${AGAIN[@]}" <<'PYEOF'
import json, statistics, sys
first, again = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
t_first, load_before, load_after = float(sys.argv[3]), sys.argv[4], sys.argv[5]
times = [float(x) for x in sys.argv[6:]]
assert first["cached"] is False and again["cached"] is True, "the first call must compute, the others read the store"
same = {k: v for k, v in first.items() if k != "cached"} == {k: v for k, v in again.items() if k != "cached"}
assert same, "the stored report differs from the computed one"
med = statistics.median(times)
print("packing report of %d structures (%d edges): computed %.3f s; from the store, median of %d: %.2f ms "
      "(min %.2f, max %.2f); ratio %.0fx; load average %s -> %s"
      % (first["graphs"], first["real_edges"], t_first, len(times), med * 1e3, min(times) * 1e3,
         max(times) * 1e3, t_first / med, load_before, load_after))
PYEOF
