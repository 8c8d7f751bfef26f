#!/usr/bin/env bash
# test_openapi.sh — the OpenAPI document: api/openapi.yaml (the source) and
# its generated twins (api/openapi.json, server/api/openapi_doc.c) agree, and the
# running server serves exactly that document at /openapi.json.  Which routes
# it lists is checked against the router in tests/unit/test_routes_system.c.
cd "$(dirname "$0")/../.." || exit 1
source tests/integration/api_lib.sh

"$PY" api/gen_openapi.py --check 2>"$WORK/err"
expect "api/openapi.json and server/api/openapi_doc.c are generated from the YAML" "$?" 0
[ -s "$WORK/err" ] && cat "$WORK/err"

start_server "$WORK/data" --workers 0 || { finish; exit 1; }
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
stop_server "$SERVER_PID" TERM
finish
