#!/usr/bin/env bash
# test_openapi.sh — the OpenAPI document: it is a valid OpenAPI 3.1 document
# by a real linter (redocly lint, tests/openapi, every warning an error:
# api/redocly.yaml), its generated twins (api/openapi.json,
# server/api/openapi_doc.c) are up to date, the running server serves exactly
# it at /openapi.json, and the checker that holds every response of the API
# suites to it (openapi_check.py) catches each kind of breach it claims to.
# Also /metrics by `promtool check metrics` (test_api_flow.sh checks it again
# while a job trains).
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
stop_server "$SERVER_PID" TERM
finish
