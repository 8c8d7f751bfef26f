#!/usr/bin/env bash
# test_openapi.sh — the OpenAPI document: it is a valid OpenAPI 3.1 document
# by a real linter (redocly lint, tests/openapi, every warning an error:
# api/redocly.yaml), its generated twins (api/openapi.json,
# server/api/openapi_doc.c) are up to date, the running server serves exactly
# it at /openapi.json, and the checker that holds every response of the API
# suites to it (openapi_check.py) catches each kind of breach it claims to.
# Also /metrics by `promtool check metrics` (test_api_flow.sh checks it again
# while a job trains), and optional CORS (--cors-origins): off by default,
# and on, how it meets the browser checks of a server without tokens.
# Which routes it lists is checked against the router in
# tests/unit/test_routes_system.c.
cd "$(dirname "$0")/../.." || exit 1
source tests/integration/api_lib.sh

LINT=tests/openapi/node_modules/.bin/redocly
if [ -x "$LINT" ]; then
  REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true \
    "$LINT" lint api/openapi.yaml --config api/redocly.yaml --format=stylish >"$WORK/lint" 2>&1
  rc=$?
  expect "redocly lint: api/openapi.yaml is valid OpenAPI 3.1, no error or warning" "$rc" 0
  [ $rc -eq 0 ] || cat "$WORK/lint"
else
  not_ok "redocly is not installed in tests/openapi (docker/install-deps.sh --test installs it)"
fi

"$PY" api/gen_openapi.py --check 2>"$WORK/err"
expect "api/openapi.json and server/api/openapi_doc.c are generated from the YAML" "$?" 0
[ -s "$WORK/err" ] && cat "$WORK/err"

"$PY" tests/integration/openapi_check.py --self-test >"$WORK/self" 2>&1
expect "openapi_check catches an undocumented status, header, field, media type, event, Allow and path" "$?" 0
cat "$WORK/self"

printf '# TYPE requests counter\nrequests 1\n' | promtool check metrics >"$WORK/promtool" 2>&1
expect_match "promtool check metrics is there and lints (a counter without _total is named)" \
  "$(cat "$WORK/promtool")" "_total"

start_server "$WORK/data" --workers 0 || { finish; exit 1; }
req GET /metrics
promtool check metrics <"$BODY" >"$WORK/promtool" 2>&1
expect "/metrics of an idle server: promtool check metrics finds nothing" "$?:$(cat "$WORK/promtool")" "0:"
req GET /openapi.json
expect "GET /openapi.json: 200" "$STATUS" 200
"$PY" - "$BODY" <<'PYEOF'
import json, sys, yaml
served = json.load(open(sys.argv[1]))
source = yaml.safe_load(open("api/openapi.yaml"))
sys.exit(0 if served == source else 1)
PYEOF
expect "the served document equals api/openapi.yaml" "$?" 0
expect "it is OpenAPI 3.1" "$(jget "$BODY" 'j["openapi"]')" "3.1.0"
req GET /openapi.json -H "If-None-Match: $(header ETag)"
expect "... and answers 304 to its ETag" "$STATUS" 304
req DELETE /openapi.json
expect "a method the document does not list: 405" "$STATUS" 405
req OPTIONS /v1/jobs
expect "OPTIONS: 204 with Allow (openapi_check holds it to the document)" "$STATUS:$(header Allow | tr -d " " | tr "," "\n" | sort | paste -sd,)" "204:GET,HEAD,POST"
req POST /v1/nowhere
expect "a path the document does not list: 404" "$STATUS" 404
# The 403s of the browser checks below are recorded like every answer and
# held to the document (its Forbidden response, on every operation).
req GET /healthz -H "Origin: http://127.0.0.1:$PORT"
expect "CORS is off by default: no CORS header, no Vary" \
  "$STATUS|$(header Access-Control-Allow-Origin)|$(header Vary)" "200||"
req POST /v1/jobs -H "Origin: https://app.example" -H "Content-Type: application/json" --data '{}'
expect "... and, without tokens, another site's Origin is refused (issue 17's check)" \
  "$STATUS|$(header Access-Control-Allow-Origin)" "403|"
stop_server "$SERVER_PID" TERM

# --- CORS, on for the origins given ---------------------------------------------------------------
# A server without tokens (loopback), where the Origin check of issue 17
# applies: a listed origin passes it, the others are refused as before.
PACKTRAIN_CORS_ORIGINS="https://app.example, https://other.example:8443" start_server "$WORK/cors" --workers 0 \
  || { finish; exit 1; }
req GET /v1/jobs -H "Origin: https://app.example"
expect "CORS: a listed Origin is answered, with itself as Access-Control-Allow-Origin" \
  "$STATUS:$(header Access-Control-Allow-Origin)" "200:https://app.example"
expect_match "... with the headers a script may read" "$(header Access-Control-Expose-Headers)" "^ETag, Location"
expect "... and Vary: Origin" "$(header Vary)" "Origin"
req POST /v1/jobs -H "Origin: https://other.example:8443" -H "Content-Type: application/json" --data '{}'
expect "... a listed Origin passes the browser check of a server without tokens (the body is judged: 422)" \
  "$STATUS:$(header Access-Control-Allow-Origin)" "422:https://other.example:8443"
req POST /v1/jobs -H "Origin: https://app.example" -H "Content-Type: text/plain" --data '{}'
expect "... JSON routes still take only application/json (415)" "$STATUS" 415
req POST /v1/jobs -H "Origin: https://evil.example" -H "Content-Type: application/json" --data '{}'
expect "CORS: an Origin not listed is still refused (403), without Access-Control-Allow-Origin" \
  "$STATUS:$(header Access-Control-Allow-Origin):$(header Vary)" "403::Origin"
req GET /v1/jobs -H "Origin: https://other.example"
expect "... the port is part of the origin" "$STATUS" 403
req GET /v1/jobs -H "Host: evil.example" -H "Origin: https://app.example"
expect "... and a foreign Host is refused whatever the Origin (DNS rebinding)" "$STATUS" 403
req OPTIONS /v1/jobs -H "Origin: https://other.example:8443" -H "Access-Control-Request-Method: POST" \
  -H "Access-Control-Request-Headers: Idempotency-Key, Content-Type"
expect "CORS preflight: 204 with the path's methods" \
  "$STATUS:$(header Access-Control-Allow-Methods | tr -d ' ' | tr ',' '\n' | sort | paste -sd,)" "204:GET,HEAD,POST"
expect_match "... the headers a script may send" "$(header Access-Control-Allow-Headers)" "Content-Type, Idempotency-Key"
expect "... for ten minutes" "$(header Access-Control-Max-Age)" 600
req OPTIONS /v1/jobs -H "Origin: https://app.example"
expect "an OPTIONS that is no preflight: only Allow, no Access-Control-Allow-Methods" \
  "$STATUS:$(header Access-Control-Allow-Methods)" "204:"
stop_server "$SERVER_PID" TERM
start_server "$WORK/cors-any" --workers 0 --cors-origins '*' || { finish; exit 1; }
req GET /v1/jobs -H "Origin: https://anywhere.example"
expect "--cors-origins '*': any origin" "$STATUS:$(header Access-Control-Allow-Origin)" "200:https://anywhere.example"
req GET /v1/jobs -H "Origin: null"
expect "... but not \"null\" (sandboxed frames, local files) unless listed" "$STATUS" 403
stop_server "$SERVER_PID" TERM
"$PT" serve --cors-origins >/dev/null 2>"$WORK/err"
expect "serve --cors-origins without a value: usage error" "$?:$(head -1 "$WORK/err")" \
  "2:packtrain serve: --cors-origins needs a value"
finish
