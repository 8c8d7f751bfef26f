#!/usr/bin/env bash
# test_api_errors.sh — every error class of the REST API against the real
# binary (`packtrain serve` with auth on, a real SQLite file), plus the token
# and serve command lines.  Each error must be problem+json with the detail a
# user needs.  No training happens here (--workers 0), so it runs in seconds.
cd "$(dirname "$0")/../.." || exit 1
source tests/integration/api_lib.sh

D=$WORK/data
# --- command lines -------------------------------------------------------------
"$PT" token create --data-dir "$D" >/dev/null 2>"$WORK/err"; rc=$?
expect "token create without --owner is a usage error" "$rc" 2
expect "... and says what is missing" "$(head -1 "$WORK/err")" "packtrain token create: --owner NAME is required"
"$PT" token create --owner=x --bogus --data-dir "$D" >/dev/null 2>"$WORK/err"
expect "token: an unknown option is a usage error, said so" "$?:$(head -1 "$WORK/err")" "2:packtrain token: unknown option '--bogus'"
"$PT" serve --port=99999 >/dev/null 2>"$WORK/err"
expect "serve --port=V is read (getopt_long) and checked" "$?:$(head -1 "$WORK/err")" \
  "2:packtrain serve: --port must be a number in [0, 65535], got '99999'"
ALICE=$("$PT" token create --owner alice --name ci --data-dir "$D" 2>"$WORK/err")
expect_match "token create prints the secret once" "$ALICE" '^pt_[0-9a-f]{64}$'
expect_match "... and its id on stderr" "$(cat "$WORK/err")" "^packtrain token: created tok_[0-9a-f]{16} for owner 'alice'"
BOB=$("$PT" token create --owner bob --data-dir "$D" 2>/dev/null)
"$PT" token list --owner alice --data-dir "$D" >"$WORK/list"
expect_match "token list shows the token, active" "$(cat "$WORK/list")" '^tok_[0-9a-f]{16}  [0-9T:-]+Z  active   ci$'
"$PT" token revoke tok_0000000000000000 --owner alice --data-dir "$D" 2>"$WORK/err"; rc=$?
expect "revoking an unknown token fails" "$rc" 1
"$PT" serve --auth maybe --data-dir "$D" 2>"$WORK/err"; rc=$?
expect "serve --auth maybe is a usage error" "$rc" 2
expect "... with the reason" "$(head -1 "$WORK/err")" "packtrain serve: --auth must be on or off, got 'maybe'"
"$PT" serve --port 70000 --data-dir "$D" 2>"$WORK/err"; rc=$?
expect "serve --port 70000 is a usage error" "$rc" 2

start_server "$D" --auth on --workers 0 --upload-max 100000 || { finish; exit 1; }
A=(-H "Authorization: Bearer $ALICE")
B=(-H "Authorization: Bearer $BOB")

# a port already in use
"$PT" serve --port "$PORT" --data-dir "$WORK/other" --workers 0 2>"$WORK/err"; rc=$?
expect "a second server on the same port fails" "$rc" 1
expect_match "... saying why" "$(cat "$WORK/err")" "port $PORT on 127.0.0.1 is already in use"
expect_match "... and how to choose another" "$(cat "$WORK/err")" "choose another port with --port N or PACKTRAIN_PORT=N"

# --- 401 ---------------------------------------------------------------------------
req GET /v1/jobs
expect "no token: 401" "$STATUS" 401
expect "... problem+json" "$(header Content-Type)" "application/problem+json"
expect "... WWW-Authenticate" "$(header WWW-Authenticate)" 'Bearer realm="packtrain"'
req GET /v1/jobs -H "Authorization: Bearer pt_nope"
expect "unknown token: 401" "$STATUS" 401
expect "... detail" "$(jget "$BODY" 'j["detail"]')" "the token is unknown or revoked"
req GET /healthz
expect "probes need no token" "$STATUS" 200

# --- 400 ---------------------------------------------------------------------------
req GET "/v1/jobs?limit=abc" "${A[@]}"
expect "bad limit: 400" "$STATUS" 400
expect "... names the parameter" "$(jget "$BODY" 'j["errors"][0]["field"] + ": " + j["errors"][0]["message"]')" \
  "query.limit: 'abc' is not an integer"
req POST /v1/jobs "${A[@]}" -H 'Content-Type: application/json' --data '{"dataset": '
expect "malformed JSON: 400" "$STATUS" 400
expect_match "... with line and column" "$(jget "$BODY" 'j["errors"][0]["message"]')" "column"

# --- 404 / 405 ------------------------------------------------------------------------
req GET /v1/nothing "${A[@]}"
expect "unknown path: 404" "$STATUS" 404
req GET /v1/jobs/job_0000000000000000 "${A[@]}"
expect "unknown job: 404" "$STATUS" 404
expect "... detail" "$(jget "$BODY" 'j["detail"]')" "there is no job 'job_0000000000000000'"
req DELETE /v1/jobs "${A[@]}"
expect "wrong method: 405" "$STATUS" 405
expect "... Allow" "$(header Allow)" "POST, GET, HEAD"

# --- uploads: 201, 413, 415, 422 ------------------------------------------------------------
req POST "/v1/datasets?name=demo.extxyz" "${A[@]}" --data-binary @"$DEMO"
expect "upload: 201" "$STATUS" 201
DS=$(jget "$BODY" 'j["id"]')
expect "... Location" "$(header Location)" "/v1/datasets/$DS"
expect "... counts" "$(jget "$BODY" 'j["n_structures"]')" 64
head -c 150000 /dev/zero | tr '\0' 'x' >"$WORK/big"
req POST /v1/datasets "${A[@]}" --data-binary @"$WORK/big"
expect "over --upload-max: 413" "$STATUS" 413
expect "... detail" "$(jget "$BODY" 'j["detail"]')" "the request body is larger than the limit of 100000 bytes"
req POST /v1/datasets "${A[@]}" -F "file=@$DEMO"
expect "multipart: 415" "$STATUS" 415
printf '2\nProperties=species:S:1:pos:R:3 energy=1\nH 0 0 0\nH 0 0 zero\n' >"$WORK/bad.xyz"
req POST "/v1/datasets?name=bad.xyz" "${A[@]}" --data-binary @"$WORK/bad.xyz"
expect "invalid file: 422" "$STATUS" 422
expect "... error on line 4 of bad.xyz" "$(jget "$BODY" 'j["errors"][0]["file"] + ":" + str(j["errors"][0]["line"])')" "bad.xyz:4"

# --- data work in flight: the uploads' progress on the dataset events stream -----------------
stream "/v1/datasets/events?heartbeat_ms=200" 1 "$WORK/ds_events" "${A[@]}"
expect "dataset events: a stream that stays open" "$?" 28
expect "... the good upload ended done, with its id" \
  "$(grep -A1 '^event: done$' "$WORK/ds_events" | grep -c "\"dataset\":\"$DS\"")" 1
expect "... every byte of it read" "$(grep "\"dataset\":\"$DS\"" "$WORK/ds_events" | sed 's/^data: //' | \
  "$PY" -c 'import json,sys; p=json.load(sys.stdin)["progress"]; print(p["phase"], p["done"] == p["total"], p["structures"])')" \
  "ingest True 64"
expect "... the bad one failed, with the reason" \
  "$(grep -A1 '^event: failed$' "$WORK/ds_events" | grep -c 'bad.xyz:4: ')" 1

# --- jobs: 422 with field paths, idempotency, 409 -------------------------------------------------
req POST /v1/jobs -H "Content-Type: application/json" "${A[@]}" --data "{\"dataset\":\"$DS\",\"training\":{\"epochs\":0,\"optimizer\":\"sgd\"}}"
expect "invalid config: 422" "$STATUS" 422
expect "... every problem with its path" "$(jget "$BODY" '",".join(e["field"] for e in j["errors"])')" \
  "training.epochs,training.optimizer"
req POST /v1/jobs -H "Content-Type: application/json" "${A[@]}" --data '{"dataset":"ds_0000000000000000"}'
expect "unknown dataset: 422" "$STATUS" 422
# training on labels the dataset does not have (the QM9 demo: energies, no forces, no stress)
req POST /v1/jobs -H "Content-Type: application/json" "${A[@]}" --data "{\"dataset\":\"$DS\",\"training\":{\"loss\":{\"forces_weight\":1}}}"
expect "a forces weight on a dataset without forces: 422" "$STATUS" 422
expect "... at training.loss.forces_weight, saying why" \
  "$(jget "$BODY" 'j["errors"][0]["field"] + ": " + j["errors"][0]["message"]')" \
  "training.loss.forces_weight: forces weight 1, but none of the dataset's 64 structures has force labels (a per-atom 'forces' column); set it to 0 or \"auto\", or upload structures with forces"
req POST /v1/jobs -H "Content-Type: application/json" "${A[@]}" --data "{\"dataset\":\"$DS\",\"training\":{\"loss\":{\"stress_weight\":0.5}}}"
expect "a stress weight without stress labels: 422" "$STATUS" 422
expect_match "... at training.loss.stress_weight" \
  "$(jget "$BODY" 'j["errors"][0]["field"] + ": " + j["errors"][0]["message"]')" \
  "^training.loss.stress_weight: stress weight 0.5, but none of the dataset's 64 structures has a stress label"
req POST /v1/jobs -H "Content-Type: application/json" "${A[@]}" --data "{\"dataset\":\"$DS\",\"forces_key\":\"atomic_forces\"}"
expect "a forces_key naming nothing: 422" "$STATUS" 422
expect "... listing the dataset's force labels" \
  "$(jget "$BODY" 'j["errors"][0]["field"] + ": " + j["errors"][0]["message"]')" \
  "forces_key: 'atomic_forces' names no force labels of this dataset; its per-atom labels: none (no structure has force labels)"
req POST /v1/jobs -H "Content-Type: application/json" "${A[@]}" --data "{\"dataset\":\"$DS\",\"training\":{\"loss\":{\"forces_weight\":-1,\"energy\":\"per-atom\"}}}"
expect "bad loss values: 422 with both paths" "$(jget "$BODY" '",".join(e["field"] for e in j["errors"])')" \
  "training.loss.forces_weight,training.loss.energy"
KEY=(-H "Idempotency-Key: it-$$")
req POST /v1/jobs -H "Content-Type: application/json" "${A[@]}" "${KEY[@]}" --data "{\"dataset\":\"$DS\"}"
expect "submit with a key: 201" "$STATUS" 201
JOB=$(jget "$BODY" 'j["id"]')
req POST /v1/jobs -H "Content-Type: application/json" "${A[@]}" "${KEY[@]}" --data "{\"dataset\":\"$DS\"}"
expect "same key, same body: 200" "$STATUS" 200
expect "... the same job" "$(jget "$BODY" 'j["id"]')" "$JOB"
req POST /v1/jobs -H "Content-Type: application/json" "${A[@]}" "${KEY[@]}" --data "{\"dataset\":\"$DS\",\"training\":{\"epochs\":2}}"
expect "same key, other body: 422" "$STATUS" 422
req DELETE "/v1/datasets/$DS" "${A[@]}"
expect "delete a dataset in use: 409" "$STATUS" 409
req GET "/v1/jobs/$JOB/model" "${A[@]}"
expect "model of a queued job: 409" "$STATUS" 409
req POST "/v1/jobs/$JOB/cancel" "${A[@]}"
expect "cancel a queued job: 200" "$STATUS" 200
req POST "/v1/jobs/$JOB/cancel" "${A[@]}"
expect "cancel it again: 409" "$STATUS" 409

# --- ZeRO: a model whose replicas do not fit at stage 0 is refused naming the stage that fits ---
req POST /v1/jobs -H "Content-Type: application/json" "${A[@]}" --data "{\"dataset\":\"$DS\",\"model\":{\"hidden\":2048,\"filters\":2048,\"interactions\":6},\"backend\":{\"replication_factor\":4}}"
expect "H=F=2048 T=6 at R=4 over 900 MB per replica: 422" "$STATUS" 422
expect_match "... at backend.zero_stage, naming a stage that would fit" \
  "$(jget "$BODY" '[e["field"] + ": " + e["message"] for e in j["errors"]][0]')" \
  "^backend.zero_stage: a replica needs [0-9.]+ MB, [0-9.]+ MB more than the 900 MB of device memory at ZeRO stage 0; backend.zero_stage [123]( with backend.offload_optimizer true)? would fit"
ZS=$(jget "$BODY" 'j["errors"][0]["message"].split("backend.zero_stage ")[1].split(" ")[0]')
req POST /v1/jobs -H "Content-Type: application/json" "${A[@]}" --data "{\"dataset\":\"$DS\",\"model\":{\"hidden\":2048,\"filters\":2048,\"interactions\":6},\"backend\":{\"replication_factor\":4,\"zero_stage\":$ZS,\"offload_optimizer\":true},\"training\":{\"epochs\":1}}"
expect "... with zero_stage $ZS (and offload) it is accepted: 201" "$STATUS" 201
expect "... stored with its stage" "$(jget "$BODY" 'j["config"]["backend"]["zero_stage"]')" "$ZS"
ZJOB=$(jget "$BODY" 'j["id"]')
req POST "/v1/jobs/$ZJOB/cancel" "${A[@]}"
expect "... and cancelled (not trained here)" "$STATUS" 200

# --- the form's checks and the OpenAPI schema are the server's ------------------------------------------
node tests/integration/validate_agree.mjs --base "$BASE" --token "$ALICE" --dataset "$DS" >"$WORK/agree" 2>&1
rc=$?
check "web/js/validate.js says what the server's validator says: $(tail -1 "$WORK/agree")" test "$rc" -eq 0
[ "$rc" -eq 0 ] || head -40 "$WORK/agree"
"$PY" tests/integration/config_agree.py --base "$BASE" --token "$ALICE" --dataset "$DS" >"$WORK/config_agree" 2>&1
rc=$?
check "api/openapi.yaml's job configuration is the server's validator: $(tail -1 "$WORK/config_agree")" test "$rc" -eq 0
[ "$rc" -eq 0 ] || head -40 "$WORK/config_agree"

# --- 304 ----------------------------------------------------------------------------------------
req GET "/v1/jobs/$JOB" "${A[@]}"
ETAG=$(header ETag)
req GET "/v1/jobs/$JOB" "${A[@]}" -H "If-None-Match: $ETAG"
expect "If-None-Match: 304" "$STATUS" 304

# --- another owner ---------------------------------------------------------------------------------
for p in "/v1/jobs/$JOB" "/v1/jobs/$JOB/metrics" "/v1/jobs/$JOB/logs" "/v1/datasets/$DS" "/v1/datasets/$DS/packing"; do
  req GET "$p" "${B[@]}"
  expect "bob gets 404 for alice's $p" "$STATUS" 404
done
req GET /v1/datasets "${B[@]}"
expect "bob's dataset list is empty" "$(jget "$BODY" 'len(j["datasets"])')" 0
TOK=$("$PT" token list --owner bob --data-dir "$D" | cut -d' ' -f1)
"$PT" token revoke "$TOK" --owner bob --data-dir "$D" 2>/dev/null
req GET /v1/jobs "${B[@]}"
expect "a revoked token is refused at once: 401" "$STATUS" 401

stop_server "$SERVER_PID" TERM
expect "SIGTERM stops the server cleanly" "$?" 0
expect_match "... after draining" "$(tail -2 "$D.log" | tr '\n' ' ')" "SIGTERM received, draining packtrain: stopped"

# --- 503: not ready ---------------------------------------------------------------------------------
start_server "$WORK/d2" --workers 1 --worker-cmd /nonexistent/worker || { finish; exit 1; }
req GET /readyz
expect "readyz with a missing worker program: 503" "$STATUS" 503
expect "... names it" "$(jget "$BODY" 'j["checks"]["workers"]["detail"]')" \
  "the worker program is not executable: /nonexistent/worker"
stop_server "$SERVER_PID" INT
expect "SIGINT stops the server cleanly" "$?" 0

# --- configuration from the environment -------------------------------------------------------------
PACKTRAIN_AUTH=on PACKTRAIN_WORKERS=0 start_server "$WORK/d3" || { finish; exit 1; }
req GET /v1/jobs
expect "PACKTRAIN_AUTH=on requires tokens" "$STATUS" 401
req GET /readyz
expect "PACKTRAIN_WORKERS=0 runs no workers" "$(jget "$BODY" 'j["checks"]["workers"]["slots"]')" 0
expect_match "the server says how it runs" "$(head -1 "$WORK/d3.log")" \
  "^packtrain: listening on http://127.0.0.1:$PORT \(auth on, 0 worker slots, data in /tmp/pt-it-"
stop_server "$SERVER_PID" TERM

# --- bf16 on a CPU without AVX512-BF16 (PACKTRAIN_CPU_HIDE_BF16=1 hides it) --------------------------
PACKTRAIN_CPU_HIDE_BF16=1 "$PT" version >"$WORK/version"
expect_match "packtrain version says bf16 is unavailable, and why" "$(sed -n 2p "$WORK/version")" \
  '^bf16: no \(training.precision "bf16" needs a CPU with AVX512-BF16; this CPU lacks .*avx512_bf16.*\)$'
PACKTRAIN_CPU_HIDE_BF16=1 start_server "$WORK/d4" --workers 0 || { finish; exit 1; }
req GET /healthz
expect "/healthz says bf16 jobs are refused" "$(jget "$BODY" 'j["bf16"]')" False
req POST "/v1/datasets?name=demo.extxyz" --data-binary @"$DEMO"
DS4=$(jget "$BODY" 'j["id"]')
req POST /v1/jobs -H "Content-Type: application/json" --data "{\"dataset\":\"$DS4\",\"training\":{\"precision\":\"bf16\"}}"
expect "a bf16 job: 422" "$STATUS" 422
expect "... problem+json" "$(header Content-Type)" "application/problem+json"
expect "... at training.precision" "$(jget "$BODY" '",".join(e["field"] for e in j["errors"])')" "training.precision"
expect_match "... saying what the CPU lacks" "$(jget "$BODY" 'j["errors"][0]["message"]')" \
  '^training.precision "bf16" needs a CPU with AVX512-BF16; this CPU lacks .*avx512_bf16 \(hidden by PACKTRAIN_CPU_HIDE_BF16\) - use "fp32"$'
req POST /v1/jobs -H "Content-Type: application/json" --data "{\"dataset\":\"$DS4\",\"training\":{\"precision\":\"fp32\"}}"
expect "the same job in fp32: 201" "$STATUS" 201
expect "... stored with its precision" "$(jget "$BODY" 'j["config"]["training"]["precision"]')" fp32
stop_server "$SERVER_PID" TERM

finish
