#!/usr/bin/env bash
# test_api_hardening.sh — issue 17's findings against a running server, one
# section per finding (F1 ... F11 of the attack on an earlier build), each a
# regression test that failed on that build: upload limits and owner
# quotas (F1), the server's memory ceiling
# (F3), the startup sweep of a killed server's leftovers (F4), checkpoints
# kept and a damaged one passed over, no server paths in messages (F5), the
# operator's cap on MPI ranks (F8), a split that leaves an element out of
# training (F10).
cd "$(dirname "$0")/../.." || exit 1
source tests/integration/api_lib.sh

J=(-H 'Content-Type: application/json')

# --- F1: limits on what one upload may hold, and per-owner quotas --------------------------------
# The attack: a 47.6 MB gzip of 5.8 GB of text (60M structures) was accepted
# after 78 s as a 3.6 GB .ptd; only the compressed bytes were limited, and
# no owner had a quota.
D=$WORK/f1
for _ in $(seq 1 20); do cat "$DEMO"; done | gzip -9 >"$WORK/bomb.extxyz.gz"   # 1,280 structures
start_server "$D" --workers 0 --upload-max-decompressed 200000 --upload-max-structures 1000 \
  --upload-max-atoms 20000 || { finish; exit 1; }
req POST "/v1/datasets?name=bomb.extxyz.gz" --data-binary @"$WORK/bomb.extxyz.gz"
expect "F1: a gzip whose text passes the decompressed limit: 413" "$STATUS:$(header Content-Type)" \
  "413:application/problem+json"
expect_match "... saying which limit, and where" "$(jget "$BODY" 'j["errors"][0]["file"] + ": " + j["errors"][0]["message"]')" \
  "^bomb.extxyz.gz: the input passes 200000 bytes once decompressed"
for _ in $(seq 1 20); do cat "$DEMO"; done >"$WORK/many.extxyz"
stop_server "$SERVER_PID" TERM
start_server "$D" --workers 0 --upload-max-structures 1000 || { finish; exit 1; }
req POST "/v1/datasets?name=many" --data-binary @"$WORK/many.extxyz"
expect "F1: 1,280 structures over a limit of 1,000: 413" "$STATUS" 413
expect "... at the structure past the limit" "$(jget "$BODY" '"%s:%d: %s" % (j["errors"][0]["file"], j["errors"][0]["line"], j["errors"][0]["message"])')" \
  "many:$(grep -n '^[0-9][0-9]*$' "$WORK/many.extxyz" | sed -n 1001p | cut -d: -f1): more than 1000 structures, the most accepted here"
stop_server "$SERVER_PID" TERM
start_server "$D" --workers 0 --upload-max-atoms 5000 || { finish; exit 1; }
req POST "/v1/datasets?name=many" --data-binary @"$WORK/many.extxyz"
expect_match "F1: more atoms than the limit: 413" "$STATUS: $(jget "$BODY" 'j["errors"][0]["message"]')" \
  "^413: more than 5000 atoms in all"
req GET /v1/datasets
expect "... none of the refused uploads is listed" "$(jget "$BODY" 'len(j["datasets"])')" 0
expect "... or left on disk" "$(ls "$D/datasets" | wc -l):$(ls "$D/tmp" | wc -l)" "0:0"
stop_server "$SERVER_PID" TERM
# the storage quota: room for one demo dataset, not two
start_server "$D" --workers 0 || { finish; exit 1; }
req POST "/v1/datasets?name=one" --data-binary @"$DEMO"
ONE=$(jget "$BODY" 'j["id"]')
STORED=$(jget "$BODY" 'j["report"]["stored_bytes"]')
stop_server "$SERVER_PID" TERM
start_server "$D" --workers 0 --quota-storage $((STORED * 3 / 2)) --quota-jobs 2 || { finish; exit 1; }
# the same file read with other options (the same upload again would be the
# dataset stored before, which costs nothing)
req POST "/v1/datasets?name=two&skip_invalid=true" --data-binary @"$DEMO"
expect "F1: an upload past the owner's storage quota: 429" "$STATUS" 429
expect_match "... with Retry-After, saying what to free" "$(header Retry-After): $(jget "$BODY" 'j["detail"]')" \
  "^[0-9]+: the dataset takes .* MiB, and with the .* MiB already stored it would pass this owner's storage quota .*; delete datasets"
expect "... nothing of it is left" "$(ls "$D/datasets" | wc -l):$(ls "$D/tmp" | wc -l)" "1:0"
# the concurrent-job quota: 2
for k in 1 2; do
  req POST /v1/jobs "${J[@]}" -H "Idempotency-Key: job-$k" --data '{"dataset":"'"$ONE"'","training":{"epochs":1}}'
  expect "F1: job $k of a quota of 2: 201" "$STATUS" 201
done
FIRST=$(jget "$BODY" 'j["id"]')
req POST /v1/jobs "${J[@]}" --data '{"dataset":"'"$ONE"'","training":{"epochs":1}}'
expect "F1: a third unfinished job: 429" "$STATUS" 429
expect_match "... with Retry-After" "$(header Retry-After): $(jget "$BODY" 'j["detail"]')" \
  "^[0-9]+: this owner has 2 jobs queued or running, the most it may have at once is 2"
req POST /v1/jobs "${J[@]}" -H "Idempotency-Key: job-2" --data '{"dataset":"'"$ONE"'","training":{"epochs":1}}'
expect "... a retry of a job already made (same Idempotency-Key) is answered, not counted" "$STATUS" 200
req POST "/v1/jobs/$FIRST/cancel"
req POST /v1/jobs "${J[@]}" --data '{"dataset":"'"$ONE"'","training":{"epochs":1}}'
expect "... once one is cancelled, there is room again: 201" "$STATUS" 201
stop_server "$SERVER_PID" TERM

# --- F4: what a killed server leaves behind is swept at the next start ---------------------------
# The attack: kill -9 during an upload left tmp/upload-* and
# datasets/<id>/data.ptd.tmp* (1.5 GB) on disk for good.
D=$WORK/f4
start_server "$D" --workers 0 || { finish; exit 1; }
for _ in $(seq 1 40); do cat "$DEMO"; done >"$WORK/big.extxyz"
curl -s -o /dev/null --limit-rate 100k -X POST --data-binary @"$WORK/big.extxyz" "$BASE/v1/datasets?name=big" &
UPLOAD=$!
for _ in $(seq 1 100); do
  [ -n "$(find "$D/tmp" -name 'upload-*' -size +10k 2>/dev/null)" ] && break
  sleep 0.1
done
check "F4: an upload is being received into tmp/" test -n "$(find "$D/tmp" -name 'upload-*' -size +10k)"
stop_server "$SERVER_PID" KILL
wait "$UPLOAD" 2>/dev/null
check "... the server killed with SIGKILL leaves it there" test -n "$(ls "$D/tmp")"
# a kill during the .ptd's assembly leaves a directory without a row and
# the writer's temp file (made by hand: the window is too short to hit)
mkdir -p "$D/datasets/ds_00000000deadbeef"
head -c 100000 /dev/zero >"$D/datasets/ds_00000000deadbeef/data.ptd.tmpAbC123"
start_server "$D" --workers 0 || { finish; exit 1; }
expect "... the next start empties tmp/" "$(ls "$D/tmp" | wc -l)" 0
check "... and removes the unrecorded dataset" test ! -e "$D/datasets/ds_00000000deadbeef"
expect_match "... saying what it removed" "$(cat "$D.log")" "swept [0-9]+ leftovers of an earlier run"
timeout 10 "$PT" serve --data-dir "$D" --port 0 --workers 0 2>"$WORK/err"; rc=$?
expect "a second server on the same data directory refuses to start" "$rc" 1
expect_match "... saying why" "$(cat "$WORK/err")" "is in use by another packtrain server"
stop_server "$SERVER_PID" TERM

# --- F5: a damaged latest checkpoint falls back to the one before; no server paths ----------------
# The attack: a truncated latest checkpoint failed the job for good (only one
# was kept), and failure_reason and predict's problems showed absolute paths.
D=$WORK/f5
start_server "$D" --workers 1 || { finish; exit 1; }
req POST "/v1/datasets?name=demo" --data-binary @"$DEMO"
DS=$(jget "$BODY" 'j["id"]')
small_config 150 | "$PY" -c 'import json,sys; c=json.load(sys.stdin); c["dataset"]=sys.argv[1]; print(json.dumps(c))' "$DS" >"$WORK/job.json"
req POST /v1/jobs "${J[@]}" --data @"$WORK/job.json"
JOB=$(jget "$BODY" 'j["id"]')
CK=$D/jobs/$JOB/checkpoints
# two checkpoints: the server keeps two (--keep-checkpoints), so waiting for
# three waited out the loop while a quick job finished before the kill
for _ in $(seq 1 300); do
  [ "$(ls "$CK" 2>/dev/null | grep -c '^ckpt-.*safetensors$')" -ge 2 ] && break
  sleep 0.1
done
stop_server "$SERVER_PID" KILL
# The worker outlives a SIGKILLed server until its next write to it; left
# running, it could finish the job on its own before the restart, which then
# resumes nothing.  Kill it too, as a crash of the host would.
pkill -KILL -f -- "--job $JOB" 2>/dev/null
for _ in $(seq 1 100); do pgrep -f -- "--job $JOB" >/dev/null || break; sleep 0.05; done
check "F5: the server is killed with checkpoints on disk" test "$(ls "$CK" | grep -c '^ckpt-.*safetensors$')" -ge 2
# damage the newest checkpoint the server recorded (read from its database:
# the API does not name checkpoints)
LATEST=$("$PY" -c 'import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
print(db.execute("SELECT path FROM checkpoints WHERE job_id = ? ORDER BY step DESC LIMIT 1", (sys.argv[2],)).fetchone()[0])' \
  "$D/packtrain.db" "$JOB")
check "F5: the latest recorded checkpoint is on disk" test -f "$LATEST"
truncate -s 1000 "$LATEST"
start_server "$D" --workers 1 || { finish; exit 1; }
check "... the job resumes from the undamaged one and succeeds" wait_state "$JOB" succeeded 120
check "... its worker.log says which checkpoint was passed over" grep -q "cannot be resumed from" "$D/jobs/$JOB/worker.log"
STEPS=$(jget "$BODY" 'j["step"]')
req GET "/v1/jobs/$JOB/metrics?max_points=10000"
expect "... no metric step is duplicated or missing" \
  "$(jget "$BODY" '[s["step"] for s in j["steps"]] == list(range(1, '"$STEPS"' + 1))')" True
# --- F7: a predict request is limited by its atoms and edges, not only its structures -------------
# The attack: a 10 KB gzip of 100 structures of 1,000 atoms at one point cost
# 27 s of CPU on an HTTP thread (the caps allowed ~45 CPU-minutes per 100 KB).
"$PY" - "$WORK/atoms.xyz.gz" 150 <<'PYEOF2'
import gzip, sys
with gzip.open(sys.argv[1], "wt") as f:
    for i in range(int(sys.argv[2])):
        f.write('1000\nProperties=species:S:1:pos:R:3 pbc="F F F"\n')
        f.write("".join("C %.2f 0 0\n" % ((k % 10) * 0.01) for k in range(1000)))
PYEOF2
req POST "/v1/jobs/$JOB/predict?name=atoms.xyz.gz" --data-binary @"$WORK/atoms.xyz.gz"
expect "F7: predict on $(stat -c %s "$WORK/atoms.xyz.gz") bytes of gzip holding 150,000 atoms: 413" "$STATUS" 413
expect_match "... stopped at the atom past the limit, saying the limit" \
  "$(jget "$BODY" 'j["errors"][0]["file"] + ": " + j["errors"][0]["message"]')" \
  "^atoms.xyz.gz: more than 100000 atoms in all, the most accepted here"
# paths: a job whose dataset file is gone fails naming no server directory
req POST /v1/jobs "${J[@]}" --data @"$WORK/job.json"
JOB2=$(jget "$BODY" 'j["id"]')
stop_server "$SERVER_PID" TERM
mv "$D/datasets/$DS/data.ptd" "$WORK/data.ptd.away"
start_server "$D" --workers 1 --predict-max-edges 1000 || { finish; exit 1; }
req POST "/v1/jobs/$JOB/predict?name=demo" --data-binary @"$DEMO"
expect "F7: predict past the operator's edge limit (1,000 at the model's cutoff): 413" "$STATUS" 413
expect_match "... saying how many edges" "$(jget "$BODY" 'j["errors"][0]["message"]')" \
  "^the structures have [0-9]+ neighbour edges at the model's cutoff of .*, more than the 1000 accepted"
check "F5: a job whose dataset file vanished fails" wait_state "$JOB2" failed 60
REASON=$(jget "$BODY" 'j["failure_reason"]')
expect_match "... with a reason naming the file" "$REASON" "data.ptd"
check "... but no server directory ($REASON)" test "${REASON/$D/}" == "$REASON"
mv "$WORK/data.ptd.away" "$D/datasets/$DS/data.ptd"
truncate -s 500 "$D/jobs/$JOB/model.safetensors"
req POST "/v1/jobs/$JOB/predict" --data-binary @"$DEMO"
expect "... predict with a damaged model file: 500" "$STATUS" 500
DETAIL=$(jget "$BODY" 'j["detail"]')
expect_match "... naming the model file" "$DETAIL" "model.safetensors"
check "... but no server directory ($DETAIL)" test "${DETAIL/$D/}" == "$DETAIL"
stop_server "$SERVER_PID" TERM

# --- F3: the memory ceiling is the operator's, never the client's ---------------------------
# The attack: H=F=4096, T=16, cutoff 100, max_neighbors 1024 and a
# device_memory_mb of 1 TB was accepted; its worker reached 17.7 GB on a
# 23.5 GB host, and the kill was taken for a crash and retried twice.
D=$WORK/f3
start_server "$D" --workers 1 --worker-memory 2048 --max-attempts 3 \
  --worker-cmd "$PWD/tests/data/sched_hog.sh" || { finish; exit 1; }
req POST "/v1/datasets?name=demo" --data-binary @"$DEMO"
DS=$(jget "$BODY" 'j["id"]')
req POST /v1/jobs "${J[@]}" --data '{"dataset":"'"$DS"'","model":{"hidden":4096,"filters":4096,
  "interactions":16,"cutoff":100,"max_neighbors":1024},"backend":{"device_memory_mb":1000000}}'
expect "F3: a job planned over the operator's budget is refused: 422" "$STATUS" 422
expect_match "... at backend, with the budget and what to lower" \
  "$(jget "$BODY" '[e["field"] + ": " + e["message"] for e in j["errors"] if e["field"] == "backend"][0]')" \
  "^backend: the job needs about [0-9]+ MiB in 1 process on this server, more than the 2048 MiB it gives a job"
req GET /v1/jobs
expect "... and nothing is queued" "$(jget "$BODY" 'len(j["jobs"])')" 0
# A job that passes the check but whose worker's memory runs away (the
# test double grows by 32 MiB per 0.1 s): killed at the budget, failed,
# not retried.
req POST /v1/jobs "${J[@]}" --data '{"dataset":"'"$DS"'","model":{"hidden":16,"filters":16,"interactions":1}}'
expect "F3: a small job is accepted" "$STATUS" 201
JOB=$(jget "$BODY" 'j["id"]')
check "... its worker, over the budget, is killed and the job fails" wait_state "$JOB" failed 60
req GET "/v1/jobs/$JOB"
expect_match "... saying it ran out of memory, with the budget" "$(jget "$BODY" 'j["failure_reason"]')" \
  "^out of memory: its processes hold [0-9]+ MiB, over the memory budget of 2048 MiB .*; not retried"
expect "... on its first attempt (a memory kill is not a crash to retry)" "$(jget "$BODY" 'j["attempts"]')" 1
stop_server "$SERVER_PID" TERM

# --- F8: MPI ranks are capped by the operator -------------------------------------------------
D=$WORK/f8
start_server "$D" --workers 0 || { finish; exit 1; }
CORES=$(nproc)
req POST "/v1/datasets?name=demo" --data-binary @"$DEMO"
DS=$(jget "$BODY" 'j["id"]')
req POST /v1/jobs "${J[@]}" --data '{"dataset":"'"$DS"'","backend":{"kind":"mpi","ranks":64,"threads":1}}'
expect "F8: 64 ranks with no hosts configured on a $CORES-core host: 422" "$STATUS" 422
expect_match "... at backend.ranks, saying the cap and where it comes from" \
  "$(jget "$BODY" '[e["field"] + ": " + e["message"] for e in j["errors"]][0]')" \
  "^backend.ranks: 64 ranks asked, but this server runs at most $CORES \(this machine's cores\)"
req POST /v1/jobs "${J[@]}" --data '{"dataset":"'"$DS"'","backend":{"kind":"mpi","ranks":'"$CORES"',"threads":1}}'
expect "... $CORES ranks (the cores) are accepted" "$STATUS" 201
stop_server "$SERVER_PID" TERM

# --- F10: a split that leaves an element out of training is a 422 at training.split ------------
# 20 structures, one of them the only one with fluorine; a 10% training
# part of 2 structures that each hold an element found nowhere else.
"$PY" - "$WORK/f10.extxyz" <<'PYEOF'
import sys
lines = []
for i in range(20):
    els = ["C", "F", "H", "H", "H"] if i == 13 else ["C", "H", "H", "H", "H"]
    lines += [str(len(els)), 'Properties=species:S:1:pos:R:3 energy=%.3f pbc="F F F"' % (-10 - i / 10)]
    lines += ["%s %.3f %.3f %.3f" % (e, 1.1 * k, 0.1 * i, 0.0) for k, e in enumerate(els)]
open(sys.argv[1], "w").write("\n".join(lines) + "\n")
PYEOF
D=$WORK/f10
start_server "$D" --workers 0 || { finish; exit 1; }
req POST "/v1/datasets?name=f10" --data-binary @"$WORK/f10.extxyz"
F10=$(jget "$BODY" 'j["id"]')
req POST /v1/jobs "${J[@]}" --data '{"dataset":"'"$F10"'","target":"energy","training":{"split":[0.05,0.5,0.45]}}'
expect "F10: a split that cannot give training every element: 422" "$STATUS" 422
expect_match "... at training.split, naming the element" \
  "$(jget "$BODY" 'j["errors"][0]["field"] + ": " + j["errors"][0]["message"]')" \
  "^training.split: structure [0-9]+ has element Z=9, which no training structure has"
req POST /v1/jobs "${J[@]}" --data '{"dataset":"'"$F10"'","target":"energy","training":{"split":[0.8,0.1,0.1]}}'
expect "... a split whose training part can take the fluorine is accepted" "$STATUS" 201
stop_server "$SERVER_PID" TERM

# --- F2: heavy work runs off the HTTP threads; 503 + Retry-After when saturated --------------------
# The attack: eight concurrent packing calls held the 4 HTTP threads and
# /healthz gave no answer for > 10 s; two calls on one connection thread
# serialised; no 429/503 anywhere.  Here: 2 HTTP threads, one heavy-work
# thread and a queue of 4, five packing calls of a few seconds each at once
# (each with its own max_neighbors: a report once computed is kept, item 2).
"$PY" - "$WORK/dense.xyz.gz" 6000 <<'PYEOF2'
import gzip, sys
with gzip.open(sys.argv[1], "wt") as f:
    for i in range(int(sys.argv[2])):
        f.write('1000\nenergy=%.3f pbc="F F F"\n' % (-1.0 * i))
        f.write("".join("H %.2f 0 0\n" % ((k % 10) * 0.01) for k in range(1000)))
PYEOF2
D=$WORK/f2
heavy() { curl -s "$BASE/metrics" | sed -n 's/^packtrain_http_heavy_requests \([0-9]*\).*/\1/p'; }
wait_heavy() { # N SECONDS: until N heavy requests are running or queued
  for _ in $(seq 1 $(($2 * 20))); do [ "$(heavy)" == "$1" ] && return 0; sleep 0.05; done; return 1
}
start_server "$D" --workers 0 --threads 2 --heavy-threads 1 --heavy-queue 4 --access-log "$D.access" || { finish; exit 1; }
req POST "/v1/datasets?name=dense" --data-binary @"$WORK/dense.xyz.gz"
expect "F2: a dataset of 6,000 structures of 1,000 close atoms ($(stat -c %s "$WORK/dense.xyz.gz") bytes of gzip)" "$STATUS" 201
DENSE=$(jget "$BODY" 'j["id"]')
pids=()
for k in 1 2 3 4 5; do
  curl -s -o "$WORK/pack$k" -w '%{http_code}\n' "$BASE/v1/datasets/$DENSE/packing?max_neighbors=$((40 + k))" \
    >"$WORK/pack$k.status" &
  pids+=($!)
done
check "... five packing calls at once: one runs, four wait" wait_heavy 5 10
req GET "/v1/datasets/$DENSE/packing"
expect "... a sixth, past the pool and its queue: 503" "$STATUS" 503
expect_match "... at once, with Retry-After, saying why" "$(header Retry-After): $(jget "$BODY" 'j["detail"]')" \
  "^[0-9]+: the server is busy with as many uploads, packing reports and predictions as it runs at once"
probes=0
for k in 1 2 3 4 5; do
  [ "$(curl -s -o /dev/null -m 2 -w '%{http_code}' "$BASE/healthz")" == 200 ] && probes=$((probes + 1))
  [ "$(curl -s -o /dev/null -m 2 -w '%{http_code}' "$BASE/v1/datasets/$DENSE")" == 200 ] && probes=$((probes + 1))
  sleep 0.2
done
expect "... meanwhile /healthz and GET /v1/datasets/{id} answer within 2 s, 5 probes each" "$probes" 10
check "... (the packing calls were still running then)" test "$(heavy)" -ge 1
wait "${pids[@]}"
expect "... and the five are all answered 200" "$(cat "$WORK"/pack?.status | sort | uniq -c | tr -s ' ')" " 5 200"
REPORT=$(jget "$WORK/pack1" 'j["graphs"]')
expect "... with the report of every structure" "$REPORT" 6000

# --- item 2: a packing report is computed once and kept with its dataset ----------------------------
req GET "/v1/datasets/$DENSE/packing?max_neighbors=41"
expect "item 2: the first packing call said it computed its report" "$(jget "$WORK/pack1" 'j["cached"]')" False
expect "... the same call again: 200 from the store" "$STATUS:$(jget "$BODY" 'j["cached"]')" "200:True"
expect "... the very report computed first (its seconds too: nothing was counted again)" \
  "$(jget "$BODY" '{k: v for k, v in j.items() if k != "cached"}')" \
  "$(jget "$WORK/pack1" '{k: v for k, v in j.items() if k != "cached"}')"
req GET "/v1/datasets/$DENSE/packing?max_neighbors=41&cutoff=6.0&method=lpfhp"
expect "... the same parameters spelt out (defaults, 6.0 for 6): the same stored report" "$(jget "$BODY" 'j["cached"]')" True

# --- F7: heavy work whose client left is given up -----------------------------------------------------
# The attack: predict's work went on after the client disconnected.
curl -s -o /dev/null -m 1 "$BASE/v1/datasets/$DENSE/packing?max_neighbors=31"
check "F7: a packing call whose client gave up after 1 s ends" wait_heavy 0 10
expect "... its work given up, not finished (packtrain_http_heavy_cancelled_total)" \
  "$(curl -s "$BASE/metrics" | sed -n 's/^packtrain_http_heavy_cancelled_total{reason="client_gone"} //p')" 1
stop_server "$SERVER_PID" TERM

# --- a deadline on one request's work, and F11: shutdown with a deadline ------------------------------
# The attack (F11): SIGTERM waited 25.8 s for an in-flight predict, then
# dropped its response.
start_server "$D" --workers 0 --heavy-deadline 1 || { finish; exit 1; }
req GET "/v1/datasets/$DENSE/packing?max_neighbors=30"
expect "a packing call past the operator's deadline of 1 s: 503" "$STATUS" 503
expect_match "... saying so, with Retry-After" "$(header Retry-After): $(jget "$BODY" 'j["detail"]')" \
  "^[0-9]+: the request was given up after 1 s, this server's limit on the work of one request"
stop_server "$SERVER_PID" TERM
start_server "$D" --workers 0 --stop-grace 1 || { finish; exit 1; }
curl -s -o "$WORK/stopped" -D "$WORK/stopped.h" -w '%{http_code}' "$BASE/v1/datasets/$DENSE/packing?max_neighbors=29" \
  >"$WORK/stopped.status" &
CURL=$!
check "F11: a packing call is running" wait_heavy 1 10
T0=$SECONDS
kill -TERM "$SERVER_PID"
wait "$CURL"
expect "... SIGTERM: the call is answered 503, not dropped" "$(cat "$WORK/stopped.status")" 503
expect_match "... saying the server is stopping" "$(jget "$WORK/stopped" 'j["detail"]')" "^the server is stopping"
stop_server "$SERVER_PID" TERM
check "... and the server has stopped within its grace of 1 s (and a few s of slack): $((SECONDS - T0)) s" \
  test $((SECONDS - T0)) -le 6
# item 2: the stored reports go with their dataset
reports() { "$PY" -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute("SELECT count(*) FROM packing_reports WHERE dataset_id = ?", (sys.argv[2],)).fetchone()[0])' "$D/packtrain.db" "$DENSE"; }
expect "item 2: the dataset has the five reports computed (cancelled calls keep none)" "$(reports)" 5
start_server "$D" --workers 0 || { finish; exit 1; }
req DELETE "/v1/datasets/$DENSE"
expect "... deleting the dataset: 204" "$STATUS" 204
expect "... deletes its reports" "$(reports)" 0
stop_server "$SERVER_PID" TERM

# --- F6: a full disk -------------------------------------------------------------------------------
# The attack: ENOSPC during ingest answered 422 "not a valid dataset" (the
# file was fine), elsewhere 500; uploads and jobs were accepted while
# /readyz already said the disk was too full.  Here the data directory is a
# small tmpfs of the server's own: a private mount namespace (unshare -r -m,
# which needs no root) where user namespaces are allowed; where they are not
# (a chroot, as in make fresh-check, or a container's seccomp profile) and we
# are root, a plain tmpfs mount on DIR, unmounted by the next call and by
# api_lib.sh's cleanup.  Neither possible is a failure, not a skip.
SMALL_MOUNTS=()
small_disk_server() { # DIR SIZE [serve args...]: start_server with DIR on a tmpfs of SIZE
  local dir=$1 size=$2; shift 2
  mkdir -p "$dir"
  rm -f "$dir.port"
  if unshare -r -m true 2>/dev/null; then
    unshare -r -m sh -c 'mount -t tmpfs -o size="$1" tmpfs "$2" && shift 2 && exec "$@"' sh "$size" "$dir" \
      "$PT" serve --data-dir "$dir" --port 0 --port-file "$dir.port" "$@" 2>>"$dir.log" &
  elif [ "$(id -u)" = 0 ]; then
    while mountpoint -q "$dir"; do umount "$dir" || return 1; done
    mount -t tmpfs -o size="$size" tmpfs "$dir" || { echo "cannot mount a tmpfs on $dir"; return 1; }
    SMALL_MOUNTS+=("$dir")
    "$PT" serve --data-dir "$dir" --port 0 --port-file "$dir.port" "$@" 2>>"$dir.log" &
  else
    echo "a small disk needs user namespaces (unshare -r -m) or root; this machine gives neither"
    return 1
  fi
  SERVER_PID=$!
  SERVER_PIDS+=("$SERVER_PID")
  for _ in $(seq 1 200); do [ -s "$dir.port" ] && break; sleep 0.05; done
  [ -s "$dir.port" ] || { echo "server did not start; its log:"; cat "$dir.log"; return 1; }
  PORT=$(cat "$dir.port")
  BASE=http://127.0.0.1:$PORT
}
"$PY" - "$WORK/big.xyz.gz" 500 <<'PYEOF2'
import gzip, sys
with gzip.open(sys.argv[1], "wt") as f:
    for i in range(int(sys.argv[2])):
        f.write('1000\nenergy=%.3f pbc="F F F"\n' % (-1.0 * i))
        f.write("".join("H %.2f %.2f 0\n" % (k * 0.01, i * 0.01) for k in range(1000)))
PYEOF2
D=$WORK/f6
small_disk_server "$D" 4m --workers 0 --min-free 0 || { finish; exit 1; }
req POST "/v1/datasets?name=big" --data-binary @"$WORK/big.xyz.gz"
expect "F6: an upload whose dataset (500,000 atoms) does not fit on a 4 MB disk: 507, not 422" "$STATUS" 507
expect_match "... saying the disk is full" "$(jget "$BODY" 'j["detail"]')" "^cannot store the dataset: the server's disk is full"
req GET /v1/datasets
expect "... nothing of it is listed" "$(jget "$BODY" 'len(j["datasets"])')" 0
req POST "/v1/datasets?name=demo" --data-binary @"$DEMO"
expect "... and the server goes on: a small upload is stored (201)" "$STATUS" 201
stop_server "$SERVER_PID" TERM
small_disk_server "$D" 4m --workers 0 --min-free 100000000 || { finish; exit 1; }
req GET /readyz
expect "F6: below the operator's minimum of free space, /readyz: 503" "$STATUS:$(jget "$BODY" 'j["checks"]["disk"]["ok"]')" "503:False"
req POST "/v1/datasets?name=demo" --data-binary @"$DEMO"
expect "... and an upload is refused up front: 507" "$STATUS" 507
expect_match "... saying why" "$(jget "$BODY" 'j["detail"]')" "^the server's data directory has [0-9.]+ MiB free, below its minimum of 95.4 MiB"
req POST /v1/jobs "${J[@]}" --data '{"dataset":"ds_0000000000000000"}'
expect "... and so is a new job: 507" "$STATUS" 507
stop_server "$SERVER_PID" TERM

# --- item 8: the disk fills up while a job writes its checkpoints --------------------------------------
# A 16 MB disk of the server's own; once the job has a checkpoint, a filler
# file takes every free byte (written through /proc/PID/root, which reaches
# the server's private mount, or the plain mount where that is the fallback)
# and keeps taking whatever is freed (keep_full): the server goes on writing
# and freeing its own files (the store's write-ahead log, the worker's
# partial checkpoint), and on a loaded machine those frees came after a
# one-off fill, so the disk had room again and a worker was started on it.
# The worker's next checkpoint finds no space, and so do the store's commits:
# the job goes back to the queue (recorded once the store takes writes
# again), is not started while the disk is below --min-free, and resumes from
# its last checkpoint once the filler is gone.  Every wait here is for the
# condition it names, with deadlines far above a quiet run's (about 5 s in all).
until_true() { # SECONDS COMMAND...: runs COMMAND every 0.05 s until it succeeds; 1 after SECONDS
  local deadline=$((SECONDS + $1)); shift
  until "$@"; do [ $SECONDS -lt $deadline ] || return 1; sleep 0.05; done
}
keep_full() { # FILE STOP: appends to FILE whenever its disk has a free byte, until STOP exists
  # (or the server's mount or this suite's work directory is gone: a suite
  # that stops early leaves no loop behind)
  while [ ! -e "$2" ] && [ -d "${1%/*}" ] && [ -d "${2%/*}" ]; do cat /dev/zero >>"$1" 2>/dev/null; sleep 0.05; done
}
disk_full() { "$PY" -c 'import os, sys; sys.exit(os.statvfs(sys.argv[1]).f_bavail != 0)' "$1"; }
worker_of() { pgrep -f -- "--job [j]${1#j}"; }
has_worker() { worker_of "$1" >/dev/null; }
no_worker_of() { ! has_worker "$1"; }
checkpoints() { ls "$1" 2>/dev/null | grep -c '^ckpt-.*safetensors$'; }
D=$WORK/f8
small_disk_server "$D" 16m --workers 1 --min-free 1000000 || { finish; exit 1; }
req POST "/v1/datasets?name=demo" --data-binary @"$DEMO"
DS8=$(jget "$BODY" 'j["id"]')
small_config 600 | "$PY" -c 'import json,sys; c=json.load(sys.stdin); c["dataset"]=sys.argv[1]; print(json.dumps(c))' "$DS8" >"$WORK/job8.json"
req POST /v1/jobs "${J[@]}" --data @"$WORK/job8.json"
JOB8=$(jget "$BODY" 'j["id"]')
R=/proc/$SERVER_PID/root$D
# The job takes well under a second: the worker runs in slices of 10 ms
# (SIGSTOP/SIGCONT) until its first checkpoint is on disk, and stays stopped
# while the disk is filled.
check "item 8: the job's worker starts" until_true 120 has_worker "$JOB8"
W=$(worker_of "$JOB8")
kill -STOP $W
PAUSED=$W   # api_lib's cleanup ends it if the suite stops before it runs on
deadline=$((SECONDS + 300))
while [ "$(checkpoints "$R/jobs/$JOB8/checkpoints")" -lt 1 ] && [ $SECONDS -lt $deadline ]; do
  kill -CONT $W; sleep 0.01; kill -STOP $W
done
check "... and writes a checkpoint" test "$(checkpoints "$R/jobs/$JOB8/checkpoints")" -ge 1
dd if=/dev/zero of="$R/filler" bs=64k 2>/dev/null
keep_full "$R/filler" "$WORK/filler.stop" & FILLER_PID=$!
check "... then the disk is full" until_true 60 disk_full "$R"
kill -CONT $W
PAUSED=
check "... and the worker has ended on it" until_true 300 no_worker_of "$JOB8"
req GET /healthz
expect "... the server keeps serving: /healthz 200" "$STATUS" 200
req GET "/v1/jobs/$JOB8"
expect "... the job can be read: 200" "$STATUS" 200
req GET /readyz
expect "... /readyz says the disk is too full: 503" "$STATUS:$(jget "$BODY" 'j["checks"]["disk"]["ok"]')" "503:False"
check "... no partial checkpoint is left, every one kept is whole" \
  "$PY" -c 'import os, sys
d = sys.argv[1]
names = os.listdir(d)
assert names and all(n.startswith("ckpt-") and n.endswith(".safetensors") for n in names), names
for n in names:
    with open(os.path.join(d, n), "rb") as f:
        b = f.read()
    h = int.from_bytes(b[:8], "little")
    assert len(b) > 8 + h, n' "$R/jobs/$JOB8/checkpoints"
# The scheduler says so when a free slot finds no room; only then does "no
# worker" mean it declined to start one.
check "... while the disk stays full the scheduler holds the queued job back (server log)" \
  until_true 300 grep -q "queued jobs wait until there is room: the data directory has" "$D.log"
expect "... and no worker is started for it" "$(worker_of "$JOB8" | wc -l)" 0
touch "$WORK/filler.stop"; wait $FILLER_PID
rm -f "$R/filler"
check "... room again: the job resumes and succeeds" wait_state "$JOB8" succeeded 300
expect_match "... having gone back to the queue, saying why and what it resumes from (no server path)" \
  "$(jget "$BODY" '[t["reason"] for t in j["transitions"] if t["to"] == "queued" and "disk" in t["reason"]][0]')" \
  "^the server's disk is full \((training failed: )?[^/ ]+: cannot write: No space left on device\); queued again: retry 1 of 2 resumes from checkpoint step [0-9]+ once the data directory has room$"
check "... from the checkpoint written before the disk filled (worker.log)" grep -q "starting attempt 2, resuming from" "$R/jobs/$JOB8/worker.log"
STEPS=$(jget "$BODY" 'j["step"]')
req GET "/v1/jobs/$JOB8/metrics?max_points=10000"
expect "... no metric step is duplicated or missing" \
  "$(jget "$BODY" '[s["step"] for s in j["steps"]] == list(range(1, '"$STEPS"' + 1))')" True
stop_server "$SERVER_PID" TERM

# --- F9: browser-facing safety of a server without tokens (the documented default) ----------------
# The attack: with auth off on loopback, another site's page posted
# "simple" cross-origin requests (text/plain, forms) that uploaded datasets
# and submitted jobs; any Host was answered, so a DNS-rebinding page could
# read and cancel; no X-Frame-Options/CSP; an over-long request line got an
# HTML 414 page.  The 403s are held to the document like every answer (its
# Forbidden response, listed on every operation); 414/431 are HTTP-level
# answers outside the document's operations, so they are read with plain curl.
D=$WORK/f9
start_server "$D" --workers 0 || { finish; exit 1; }
req POST "/v1/datasets?name=demo" --data-binary @"$DEMO"
DS9=$(jget "$BODY" 'j["id"]')
req POST /v1/jobs -H 'Content-Type: text/plain' --data '{"dataset":"'"$DS9"'"}'
expect "F9: a job sent as text/plain (what another site's page may post without asking): 415" "$STATUS" 415
req POST /v1/jobs --data '{"dataset":"'"$DS9"'"}'
expect "... or as a form (curl's default): 415" "$STATUS" 415
req POST /v1/jobs "${J[@]}" --data '{"dataset":"'"$DS9"'"}'
expect "... as application/json: 201" "$STATUS" 201
req POST "/v1/datasets?name=x" -H 'Origin: http://evil.example' -H 'Content-Type: text/plain' --data-binary @"$DEMO"
expect "F9: an upload from another site's page (Origin http://evil.example): 403" "$STATUS" 403
expect_match "... saying why" "$(jget "$BODY" 'j["detail"]')" "^requests from another site's page \(Origin 'http://evil.example'\) are refused"
st=$(curl -s -o /dev/null -w '%{http_code}' -H "Origin: http://127.0.0.1:$PORT" --data-binary @"$DEMO" \
  "$BASE/v1/datasets?name=same")
# (201, or 200 when this server has the same file already: uploads are de-duplicated)
expect_match "... from the server's own page (its own Origin): accepted" "$st" '^20[01]$'
req GET /v1/datasets -H "Host: rebound.example:$PORT"
expect "F9: a request whose Host is another name (DNS rebinding): 403" "$STATUS" 403
expect_match "... saying why" "$(jget "$BODY" 'j["detail"]')" "^Host 'rebound.example:[0-9]+' is not this server's name"
req GET /healthz -H "Host: rebound.example:$PORT"
expect "... on every path, /healthz too (documented there: openapi_check holds it)" "$STATUS" 403
req GET /v1/datasets -H "Host: localhost:$PORT"
expect "... Host localhost: 200" "$STATUS" 200
req GET /
expect "F9: the dashboard cannot be framed: X-Frame-Options" "$(header X-Frame-Options)" DENY
expect_match "... and has a Content-Security-Policy with frame-ancestors 'none'" "$(header Content-Security-Policy)" \
  "default-src 'self'.*frame-ancestors 'none'"
LONG=$(head -c 9000 /dev/zero | tr '\0' a)
st=$(curl -s -o "$WORK/l.json" -D "$WORK/l.h" -w '%{http_code}' "$BASE/v1/datasets?x=$LONG")
expect "F9: an over-long request line: 414 as problem+json, not an HTML page" \
  "$st:$(grep -i '^content-type:' "$WORK/l.h" | tr -d '\r' | cut -d' ' -f2)" "414:application/problem+json"
st=$(curl -s -o "$WORK/l.json" -D "$WORK/l.h" -w '%{http_code}' -H "X-Big: $(head -c 20000 /dev/zero | tr '\0' a)" \
  "$BASE/healthz")
expect "... headers past 16 KB: 431 as problem+json" \
  "$st:$(grep -i '^content-type:' "$WORK/l.h" | tr -d '\r' | cut -d' ' -f2)" "431:application/problem+json"
stop_server "$SERVER_PID" TERM

# --- one client cannot take every connection ------------------------------------------------------
# The attack: ~512 slow connections from one client could starve the others
# (no per-client limit).  Here --max-per-client 3: a client holding three
# idle connections gets no fourth until it lets one go.
D=$WORK/perclient
start_server "$D" --workers 0 --max-per-client 3 || { finish; exit 1; }
"$PY" - "$PORT" "$WORK/held" <<'PYEOF2' &
import socket, sys, time, os
held = [socket.create_connection(("127.0.0.1", int(sys.argv[1]))) for _ in range(3)]
open(sys.argv[2], "w").write("3")
while os.path.exists(sys.argv[2]):
    time.sleep(0.05)
PYEOF2
HOLDER=$!
for _ in $(seq 1 100); do [ -s "$WORK/held" ] && break; sleep 0.05; done
st=$(curl -s -o /dev/null -m 5 -w '%{http_code}' "$BASE/healthz")
expect "a client holding 3 connections, the most one may (--max-per-client 3), gets no fourth" "$st" 000
rm -f "$WORK/held"
wait "$HOLDER"
st=$(curl -s -o /dev/null -m 5 -w '%{http_code}' "$BASE/healthz")
expect "... and is answered once it lets them go" "$st" 200
stop_server "$SERVER_PID" TERM

# --- a client trickling its request is cut off at a deadline --------------------------------------
# The attack: libmicrohttpd's idle timeout restarts at every byte, so a
# connection sending one header byte a second was held for good (slow
# loris).  Here --header-timeout 3: headers trickled a byte a second are cut
# at about 3 s (not at the 60 s idle timeout), a body declared as 2,000 bytes
# at --body-min-rate 1000 is owed within 3 + 2 s, and /healthz answers
# others all along.
D=$WORK/slowloris
start_server "$D" --workers 0 --header-timeout 3 --body-min-rate 1000 --access-log "$D.access" || { finish; exit 1; }
trickle() {   # trickle PORT OUT REQUEST-START: then one byte a second until closed (30 s at most)
  "$PY" - "$@" <<'PYEOF3'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(sys.argv[3].encode().replace(b"|", b"\r\n"))
t0, why = time.monotonic(), "still-open-after-30s"
s.settimeout(1.0)
while time.monotonic() - t0 < 30:
    try:
        s.sendall(b"a")
        why = "answered" if s.recv(1) else "closed"
        break
    except socket.timeout:
        continue
    except OSError:
        why = "closed"
        break
open(sys.argv[2], "w").write("%s %.1f" % (why, time.monotonic() - t0))
PYEOF3
}
trickle "$PORT" "$WORK/loris.h" "GET /healthz HTTP/1.1|Host: 127.0.0.1|X-Slow: " &
LORIS=$!
trickle "$PORT" "$WORK/loris.b" "POST /v1/jobs HTTP/1.1|Host: 127.0.0.1|Content-Type: application/json|Content-Length: 2000||" &
LORIS_B=$!
ok_probes=0
for _ in 1 2 3 4 5 6; do
  sleep 0.5
  [ "$(curl -s -o /dev/null -m 5 -w '%{http_code}' "$BASE/healthz")" = 200 ] && ok_probes=$((ok_probes + 1))
done
wait "$LORIS" "$LORIS_B"
read -r why secs <"$WORK/loris.h"
expect "item 6: a client trickling its headers a byte a second is cut off" "$why" closed
expect "... at the 3 s header deadline, not later (the idle timeout, 60 s, never runs out)" \
  "$("$PY" -c "print(2.5 <= $secs < 15)")" True
read -r why secs <"$WORK/loris.b"
expect "item 6: a body of 2,000 bytes trickled a byte a second is cut off" "$why" closed
expect "... at its deadline, 3 s + 2,000 B at 1,000 B/s after the headers" "$("$PY" -c "print(4.5 <= $secs < 17)")" True
expect "... while /healthz answered others all along" "$ok_probes" 6
expect_match "... and the log says which connection and why" "$(grep -c 'closed: its request headers were not complete within 3.0 s' "$D.access"):$(grep -c 'closed: its request body was not complete' "$D.access")" "^1:1$"
req GET /healthz
expect "... and the server answers after" "$STATUS" 200
stop_server "$SERVER_PID" TERM
finish
