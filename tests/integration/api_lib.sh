# api_lib.sh — helpers shared by the API integration suites (sourced, not run).
#
# Each suite starts real `packtrain serve` processes on loopback with an
# ephemeral port (--port 0 --port-file), in a fresh data directory, talks to
# them with curl, and counts checks; `finish` prints "N passed, N failed" and
# sets the exit status.  Every server a suite starts is stopped on exit.
#
#   req METHOD PATH [curl args...]   -> $STATUS, body in $BODY (a file), headers in $HEADERS
#   stream PATH SECONDS OUT [curl args...]  an event stream read for at most SECONDS into OUT
#   jget FILE 'python expression on j' -> prints the value (JSON data via /usr/bin/python3)
#
# Every response a suite receives is held to api/openapi.yaml: `req` and
# `stream` keep a copy in $RECORDS, the CLI client writes its own there
# (PACKTRAIN_HTTP_TRACE), and `finish` runs tests/integration/openapi_check.py
# on them as one more check.  A suite talks to the server only through
# these, the CLI and the browser.

set -uo pipefail
PT=${PACKTRAIN_BIN:-bin/packtrain}
PT=$(realpath "$PT")
PY=/usr/bin/python3
WORK=$(mktemp -d /tmp/pt-it-XXXXXX)
BODY=$WORK/body
HEADERS=$WORK/headers
STATUS=0
pass=0
fail=0
SERVER_PIDS=()
RECORDS=$WORK/responses
N_RECORD=0
mkdir -p "$RECORDS"
export PACKTRAIN_HTTP_TRACE=$RECORDS

cleanup() {
  for pid in "${SERVER_PIDS[@]}"; do
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  # a worker this suite stopped (SIGSTOP) and, having stopped early, did not
  # continue: it outlives its server; only if it still is one of this suite's
  # (its command line names $WORK), never a process that reused the pid
  if [ -n "${PAUSED:-}" ] && cat "/proc/$PAUSED/cmdline" 2>/dev/null | tr '\0' ' ' | grep -qF -- "$WORK/"; then
    kill -KILL "$PAUSED" 2>/dev/null
  fi
  # tmpfs mounts a test made as root where user namespaces are refused
  for m in "${SMALL_MOUNTS[@]}"; do umount "$m" 2>/dev/null; done
  rm -rf "$WORK"
}
trap cleanup EXIT

ok() { pass=$((pass + 1)); echo "ok - $1"; }
not_ok() { fail=$((fail + 1)); echo "not ok - $1"; }
# check DESCRIPTION COMMAND...: passes when the command succeeds.
check() { local d=$1; shift; if "$@"; then ok "$d"; else not_ok "$d"; fi; }
# expect DESCRIPTION GOT WANT
expect() { if [ "$2" == "$3" ]; then ok "$1"; else not_ok "$1: got '$2', want '$3'"; fi; }
# expect_match DESCRIPTION TEXT REGEX
expect_match() { if [[ "$2" =~ $3 ]]; then ok "$1"; else not_ok "$1: '$2' does not match /$3/"; fi; }

# record METHOD TARGET [cut]: keeps $HEADERS and $BODY as the next response.
record() {
  N_RECORD=$((N_RECORD + 1))
  local stem=$RECORDS/sh-$N_RECORD
  printf '%s %s\n' "$1" "$2" >"$stem.req"
  cp "$HEADERS" "$stem.headers"
  [ -f "$BODY" ] && cp "$BODY" "$stem.body"
  [ -n "${3:-}" ] && : >"$stem.cut"
  return 0
}

finish() {
  if [ -n "$(ls "$RECORDS")" ]; then
    "$PY" tests/integration/openapi_check.py "$RECORDS" >"$WORK/contract" 2>&1
    local rc=$? n
    n=$(tail -1 "$WORK/contract")
    if [ $rc -eq 0 ]; then ok "every response matches api/openapi.yaml (${n#openapi_check: })"
    else not_ok "responses that api/openapi.yaml does not describe:"; cat "$WORK/contract"; fi
  fi
  echo "$pass passed, $fail failed"
  [ "$fail" -eq 0 ]
}

# start_server DIR [serve args...]: sets SERVER_PID, PORT, BASE.  The server's
# stderr goes to DIR.log.
start_server() {
  local dir=$1; shift
  rm -f "$dir.port"
  "$PT" serve --data-dir "$dir" --port 0 --port-file "$dir.port" "$@" 2>>"$dir.log" &
  SERVER_PID=$!
  SERVER_PIDS+=("$SERVER_PID")
  for _ in $(seq 1 200); do
    [ -s "$dir.port" ] && break
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.05
  done
  if [ ! -s "$dir.port" ]; then
    echo "server did not start; its log:"; cat "$dir.log"
    return 1
  fi
  PORT=$(cat "$dir.port")
  BASE=http://127.0.0.1:$PORT
}

# stop_server PID SIGNAL: sends the signal and waits for the process.
stop_server() {
  kill "-$2" "$1" 2>/dev/null
  wait "$1" 2>/dev/null
  local rc=$?
  local kept=()
  for pid in "${SERVER_PIDS[@]}"; do [ "$pid" != "$1" ] && kept+=("$pid"); done
  SERVER_PIDS=("${kept[@]+"${kept[@]}"}")
  return $rc
}

req() {
  local method=$1 path=$2; shift 2
  rm -f "$BODY"
  STATUS=$(curl -s -o "$BODY" -D "$HEADERS" -w '%{http_code}' -X "$method" "$@" "$BASE$path")
  record "$method" "$path"
}

# stream PATH SECONDS OUT [curl args...]: GETs an event stream for at most
# SECONDS into OUT; returns curl's status (28 when the time ran out).
stream() {
  local path=$1 secs=$2 out=$3; shift 3
  curl -s -N --max-time "$secs" -D "$HEADERS" -o "$out" "$@" "$BASE$path"
  local rc=$?
  STATUS=$(sed -n '1s/^HTTP\/[0-9.]* \([0-9]*\).*/\1/p' "$HEADERS")
  cp "$out" "$BODY" 2>/dev/null || : >"$BODY"
  record GET "$path" "$([ $rc -eq 28 ] && echo cut)"
  return $rc
}

header() { grep -i "^$1:" "$HEADERS" | head -1 | sed 's/^[^:]*: *//' | tr -d '\r\n'; }

# jget FILE EXPR: evaluates EXPR with j = the parsed JSON of FILE; None prints "null".
jget() {
  "$PY" -c '
import json, sys
j = json.load(open(sys.argv[1]))
v = eval(sys.argv[2])
print("null" if v is None else (json.dumps(v) if isinstance(v, (dict, list)) else v))
' "$1" "$2"
}

# A small training job's config: fast enough for a test, long enough to watch.
small_config() { # EPOCHS
  cat <<EOF
{"model": {"hidden": 16, "filters": 16, "interactions": 1, "gaussians": 10},
 "batching": {"model_batch_size": 4},
 "training": {"epochs": $1, "log_every": 1, "seed": 1},
 "backend": {"threads": 1}}
EOF
}

# pause_at_epoch JOB EPOCH: once the job's worker has started it runs in
# slices of 10 ms (SIGSTOP/SIGCONT) until the store shows EPOCH, and is left
# stopped, its pid in PAUSED: a small job trains in about a second on a quiet
# machine, and would otherwise end before the test acts.  1 if it never gets
# there.
pause_at_epoch() {
  local job=$1 epoch=$2 w=""
  for _ in $(seq 1 1500); do w=$(pgrep -f -- "--job [j]${job#j}"); [ -n "$w" ] && break; sleep 0.02; done
  [ -n "$w" ] || return 1
  kill -STOP $w
  PAUSED=$w
  for _ in $(seq 1 3000); do
    req GET "/v1/jobs/$job"
    [ "$(jget "$BODY" 'j["epoch"]')" -ge "$epoch" ] 2>/dev/null && return 0
    kill -CONT $w; sleep 0.01; kill -STOP $w
  done
  return 1
}

# wait_state JOB STATE SECONDS: polls until the job is in STATE.
wait_state() {
  local deadline=$((SECONDS + $3)) st=""
  while [ $SECONDS -lt $deadline ]; do
    req GET "/v1/jobs/$1" "${AUTH[@]+"${AUTH[@]}"}"
    st=$(jget "$BODY" 'j["state"]' 2>/dev/null)
    [ "$st" == "$2" ] && return 0
    sleep 0.2
  done
  echo "job $1 is '$st', not '$2' after $3 s" >&2
  return 1
}

DEMO=tests/data/api_demo_qm9_64.extxyz
