#!/usr/bin/env bash
# run.sh — the dashboard's browser test: Playwright (npm playwright-core,
# pinned by tests/web/package-lock.json) drives Debian's Chromium, headless,
# against a real `packtrain serve` (auth on, real worker processes) on a free
# loopback port with a fresh data directory.  Screenshots and the server's
# log go to tests/web/out/.  The last line is "N passed, N failed".
#
# make test installs what it needs (docker/install-deps.sh --test: Debian's
# chromium, node/npm when absent, playwright-core with `npm ci`); anything
# missing here is a failure with the reason.
#
#   PACKTRAIN_BIN          the binary (tests/run_all.sh exports it; default bin/packtrain)
#   PACKTRAIN_WORKER_CMD   optional --worker-cmd for the server (default: its own worker)
set -uo pipefail
cd "$(dirname "$0")/../.."
here=tests/web
out=$here/out
bin=${PACKTRAIN_BIN:-bin/packtrain}
chromium=/usr/bin/chromium
mkdir -p "$out"
rm -f "$out"/*.png "$out/server.log"

give_up() {
  echo "web: cannot run the browser test: $1 (make test installs it; or SKIP=browser)" >&2
  echo "0 passed, 1 failed"
  exit 1
}

[ -x "$chromium" ] || give_up "$chromium is missing"
command -v node >/dev/null || give_up "node is missing"
node_major=$(node -p 'process.versions.node.split(".")[0]')
[ "$node_major" -ge 18 ] || give_up "node $(node --version) is too old; playwright-core needs node 18 or later"

want=$(node -p "require('./$here/package-lock.json').packages['node_modules/playwright-core'].version")
have=$(node -p "try { require('./$here/node_modules/playwright-core/package.json').version } catch { '' }")
[ "$have" = "$want" ] || give_up "playwright-core $want is not installed in $here (have '$have')"

[ -x "$bin" ] || { echo "web: $bin is not built (make)" >&2; echo "0 passed, 1 failed"; exit 1; }

tmp=$(mktemp -d)
pid=
stop_server() {
  if [ -n "$pid" ]; then
    kill -TERM "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    pid=
  fi
}
trap 'stop_server; cp -f "$tmp/server.log" "$out/server.log" 2>/dev/null; rm -rf "$tmp"' EXIT

token=$("$bin" token create --owner web-test --name browser --data-dir "$tmp/data" 2>"$tmp/token.err") ||
  { echo "web: cannot create an API token: $(cat "$tmp/token.err")" >&2; echo "0 passed, 1 failed"; exit 1; }
worker=()
[ -n "${PACKTRAIN_WORKER_CMD:-}" ] && worker=(--worker-cmd "$PACKTRAIN_WORKER_CMD")
"$bin" serve --host 127.0.0.1 --port 0 --port-file "$tmp/port" --data-dir "$tmp/data" --web-dir web \
  --auth on --workers 1 --cancel-grace 10 "${worker[@]}" >"$tmp/server.log" 2>&1 &
pid=$!
for _ in $(seq 100); do
  [ -s "$tmp/port" ] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
if [ ! -s "$tmp/port" ]; then
  echo "web: the server did not start:" >&2
  tail -20 "$tmp/server.log" >&2
  echo "0 passed, 1 failed"
  exit 1
fi
port=$(cat "$tmp/port")

node "$here/dashboard.test.mjs" --base "http://127.0.0.1:$port" --token "$token" --out "$out" \
  --chromium "$chromium" --profile "$tmp/profile" --dataset tests/data/api_demo_qm9_64.extxyz \
  --forces tests/data/emt_train_240.extxyz.gz \
  --records "$tmp/responses"
rc=$?
stop_server
exit $rc
