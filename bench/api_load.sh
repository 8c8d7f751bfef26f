#!/usr/bin/env bash
# api_load.sh BINARY [CONNECTIONS=128] [SECONDS=10] — loopback load test of
# the job status route while a job trains: starts `packtrain serve` (auth on,
# one worker) on a free port in a temporary data directory, uploads the demo
# dataset, submits a long job, waits until it runs, then polls
# GET /v1/jobs/{id} from CONNECTIONS keep-alive connections for SECONDS with
# bench/api_load.c, and prints its JSON line (req/s, p50/p90/p99 latency) plus
# the job's training speed under that load as a ratio to its speed over the
# same time just before, without load (the peer measured in the same run).  Everything it started is
# stopped at the end.  Loopback only; bounded in time.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(realpath "${1:-bin/packtrain}")
CONNS=${2:-128}
SECS=${3:-10}
WORK=$(mktemp -d /tmp/pt-load-XXXXXX)
SERVER=
cleanup() {
  [ -n "$SERVER" ] && kill -TERM "$SERVER" 2>/dev/null && wait "$SERVER" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT

cc -O2 -std=c11 -D_GNU_SOURCE -o "$WORK/api_load" bench/api_load.c $(pkg-config --cflags --libs libcurl)
TOKEN=$("$BIN" token create --owner bench --data-dir "$WORK/data" 2>/dev/null)
"$BIN" serve --data-dir "$WORK/data" --port 0 --port-file "$WORK/port" --auth on --workers 1 \
  --threads 4 2>"$WORK/server.log" &
SERVER=$!
for _ in $(seq 1 100); do [ -s "$WORK/port" ] && break; sleep 0.05; done
BASE=http://127.0.0.1:$(cat "$WORK/port")
cat >"$WORK/job.json" <<'EOF'
{"model": {"hidden": 64, "filters": 64, "interactions": 3},
 "training": {"epochs": 1000, "log_every": 1}, "backend": {"threads": 1}}
EOF
JOB=$("$BIN" submit --server "$BASE" --token "$TOKEN" --dataset tests/data/api_demo_qm9_64.extxyz \
  --config "$WORK/job.json" 2>/dev/null)
for _ in $(seq 1 100); do
  curl -s -H "Authorization: Bearer $TOKEN" "$BASE/v1/jobs/$JOB" | grep -q '"state":"running"' && break
  sleep 0.1
done
step_of() { curl -s -H "Authorization: Bearer $TOKEN" "$BASE/v1/jobs/$JOB" | sed 's/.*"step":\([0-9]*\).*/\1/'; }
# The peer: the same job's training speed with no API load, just before.
s0=$(step_of); t0=$(date +%s.%N); sleep "$SECS"; s1=$(step_of); t1=$(date +%s.%N)
"$WORK/api_load" "$BASE/v1/jobs/$JOB" "$CONNS" "$SECS" "Authorization: Bearer $TOKEN"
rc=$?
s2=$(step_of); t2=$(date +%s.%N)
awk -v j="$JOB" -v a="$s0" -v b="$s1" -v c="$s2" -v t0="$t0" -v t1="$t1" -v t2="$t2" 'BEGIN {
  idle = (b - a) / (t1 - t0); busy = (c - b) / (t2 - t1);
  printf "{\"job\":\"%s\",\"train_steps_per_s_idle\":%.1f,\"train_steps_per_s_under_load\":%.1f,\"ratio\":%.2f}\n",
         j, idle, busy, (idle > 0 ? busy / idle : 0) }'
"$BIN" cancel "$JOB" --server "$BASE" --token "$TOKEN" >/dev/null
exit $rc
