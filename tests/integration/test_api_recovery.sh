#!/usr/bin/env bash
# test_api_recovery.sh — crash recovery: the server is killed with SIGKILL
# while a job trains (after its first checkpoint), restarted on the same data
# directory, and the job must resume from that checkpoint (not from scratch)
# and succeed, with every metric step recorded exactly once.  A CI client
# following the job rides out the restart.  Then a graceful stop (SIGTERM)
# mid-training must resume the same way.
cd "$(dirname "$0")/../.." || exit 1
source tests/integration/api_lib.sh

D=$WORK/data
start_server "$D" --workers 1 || { finish; exit 1; }
PORT1=$PORT
small_config 300 >"$WORK/job.json"   # a checkpoint per epoch
JOB=$("$PT" submit --server "$BASE" --dataset "$DEMO" --config "$WORK/job.json" 2>/dev/null)
expect_match "a job is queued" "$JOB" '^job_'

# A CI client follows the job through the crash.
"$PT" status "$JOB" --wait --server "$BASE" --retry-for 60 >"$WORK/follow.out" 2>"$WORK/follow.err" &
FOLLOW=$!

# until the first checkpoint is recorded (epoch 1 done) while epochs remain:
# the worker is paused there (the job takes about a second on a quiet
# machine), and killed with the server, as a crash of the host would
check "the job reached epoch 2" pause_at_epoch "$JOB" 2
expect "... and is still training" "$(jget "$BODY" 'j["state"]')" running
BEFORE=$(jget "$BODY" 'j["step"]')
DS=$(jget "$BODY" 'j["dataset"]')

stop_server "$SERVER_PID" KILL
kill -KILL "$PAUSED" 2>/dev/null
ok "the server was killed with SIGKILL at step $BEFORE"

start_server "$D" --workers 1 --port "$PORT1" || { finish; exit 1; }
check "the restarted server answers on the same port" test "$PORT" == "$PORT1"
check "the job resumes and succeeds" wait_state "$JOB" succeeded 120
req GET "/v1/jobs/$JOB"
TRANS=$(jget "$BODY" '"|".join(t["to"] + ":" + t["reason"] for t in j["transitions"])')
expect_match "it was re-queued from its checkpoint, not from scratch" "$TRANS" \
  "queued:server restarted; resuming from checkpoint step [1-9][0-9]*"
expect "it ran twice" "$(jget "$BODY" 'j["attempts"]')" 2
STEPS=$(jget "$BODY" 'j["step"]')
req GET "/v1/jobs/$JOB/metrics?max_points=10000"
expect "no metric step is duplicated or missing" \
  "$(jget "$BODY" '[s["step"] for s in j["steps"]] == list(range(1, '"$STEPS"' + 1))')" True
expect "every epoch once" "$(jget "$BODY" '[e["epoch"] for e in j["epochs"]] == list(range(1, 301))')" True
check "the resumed worker was given the checkpoint" grep -q "resuming from .* (step [1-9]" "$D/jobs/$JOB/worker.log"
[ "${fail}" -gt 0 ] && grep -n "scheduler" "$D/jobs/$JOB/worker.log" "$D.log"

wait "$FOLLOW"
expect "the CI client following the job exits 0" "$?" 0
expect_match "... after riding out the restart" "$(cat "$WORK/follow.err")" "retrying for up to 60 s"

# --- graceful stop mid-training ---------------------------------------------------------------
JOB2=$("$PT" submit --server "$BASE" --dataset-id "$DS" --config "$WORK/job.json" 2>/dev/null)
pause_at_epoch "$JOB2" 2
expect "the second job is training when SIGTERM comes" "$(jget "$BODY" 'j["state"]')" running
kill -CONT "$PAUSED"
stop_server "$SERVER_PID" TERM
expect "SIGTERM drains the server while a job trains" "$?" 0
# ("[j]" keeps pgrep from matching its own command line)
check "its worker is gone" test -z "$(pgrep -f -- "--job [j]${JOB2#j}")"
start_server "$D" --workers 1 || { finish; exit 1; }
check "after the restart the job succeeds" wait_state "$JOB2" succeeded 120
STEPS=$(jget "$BODY" 'j["step"]')
req GET "/v1/jobs/$JOB2/metrics?max_points=10000"
expect "no metric step is duplicated or missing" \
  "$(jget "$BODY" '[s["step"] for s in j["steps"]] == list(range(1, '"$STEPS"' + 1))')" True
stop_server "$SERVER_PID" TERM
finish
