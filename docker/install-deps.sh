#!/usr/bin/env bash
# install-deps.sh [--test|--fuzz] — make sure what packtrain needs is installed.
#
#   (no flag)  the Debian packages of docker/packages.txt: build and run
#              (make, make run, make test, the Dockerfile);
#   --test     also docker/packages-test.txt (PyTorch, ASE, Chromium, ...),
#              npm and Node.js when the machine has none, and the npm
#              packages of the browser test (tests/web) and of the OpenAPI
#              lint (tests/openapi), each pinned by its package-lock.json
#              (make test, make bench);
#   --fuzz     also docker/packages-fuzz.txt: clang and its sanitizer and
#              libFuzzer runtimes (make fuzz).
#
# As root it installs what is missing with apt-get (and npm ci); otherwise it
# prints the exact command to run and fails.  It only reads when everything is
# present, so make can call it on every build.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
lists=("$here/packages.txt")
test_mode=0
case "${1:-}" in
  --test) test_mode=1; lists+=("$here/packages-test.txt") ;;
  --fuzz) lists+=("$here/packages-fuzz.txt") ;;
  "") ;;
  *) echo "usage: install-deps.sh [--test|--fuzz]" >&2; exit 2 ;;
esac

missing=()
for list in "${lists[@]}"; do
  while read -r pkg _; do
    case "$pkg" in ''|'#'*) continue ;; esac
    status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
    [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
  done <"$list"
done
# Node.js and npm may come from elsewhere than Debian (nodesource, nvm): only
# when a command is absent is Debian's package asked for.
if [ $test_mode -eq 1 ]; then
  command -v node >/dev/null || missing+=(nodejs)
  command -v npm >/dev/null || missing+=(npm)
fi

if [ ${#missing[@]} -gt 0 ]; then
  line="apt-get install -y --no-install-recommends ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then
    echo "packtrain: missing Debian packages: ${missing[*]}" >&2
    echo "packtrain: run make as root, or first: sudo apt-get update && sudo $line" >&2
    exit 1
  fi
  echo "packtrain: installing ${missing[*]} (apt-get)" >&2
  export DEBIAN_FRONTEND=noninteractive
  # A fresh machine may be running its first unattended upgrade: wait for
  # the dpkg lock instead of failing.  apt's output goes to a log shown only
  # when the install fails; in English (LC_ALL=C), as its lines are read below.
  apt=(env LC_ALL=C apt-get -o DPkg::Lock::Timeout=600)
  log=$(mktemp); trap 'rm -f "$log"' EXIT
  start=$SECONDS
  # An old or missing package index (a new machine has none) is the usual
  # reason for a failed install: retry once after an update instead of
  # always paying for one.
  if ! "${apt[@]}" install -y -q --no-install-recommends "${missing[@]}" >"$log" 2>&1; then
    { "${apt[@]}" update -q && "${apt[@]}" install -y -q --no-install-recommends "${missing[@]}"; } >"$log" 2>&1 ||
      { { grep -E '^W: Failed to fetch' "$log" | head -3; grep -E '^E:' "$log" | head -4; } >&2
        echo "packtrain: apt-get could not install: ${missing[*]}" >&2
        grep -q '^W: Failed to fetch' "$log" &&
          echo "packtrain: the package index could not be downloaded: is the network (or the mirror in /etc/apt) reachable? See README, Troubleshooting" >&2
        exit 1; }
  fi
  # what apt did, from its own summary lines (README's set-up table and
  # tests/fresh_check.sh quote them)
  n=$(grep -oE '[0-9]+ newly installed' "$log" | tail -1 | cut -d' ' -f1 || true)
  get=$(sed -nE 's/^Need to get ([0-9.,]+ [kMG]?B).*/\1/p' "$log" | tail -1)
  disk=$(sed -nE 's/^After this operation, ([0-9.,]+ [kMG]?B).*/\1/p' "$log" | tail -1)
  echo "packtrain: installed in $((SECONDS - start)) s: ${n:-?} packages, ${get:-?} downloaded, ${disk:-?} of disk" >&2
fi

# npm_tool DIR PACKAGE WHAT: `npm ci` in DIR unless PACKAGE is there at the
# version its package-lock.json pins.
npm_tool() {
  local dir="$root/$1" want have
  want=$(node -p "require('$dir/package-lock.json').packages['node_modules/$2'].version")
  have=$(node -p "try { require('$dir/node_modules/$2/package.json').version } catch { '' }")
  if [ "$want" != "$have" ]; then
    echo "packtrain: installing $2 $want for $3 (npm ci in $1)" >&2
    start=$SECONDS
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) >&2 ||
      { echo "packtrain: npm ci failed in $1 (the npm registry must be reachable; see README, Troubleshooting)" >&2; exit 1; }
    echo "packtrain: installed in $((SECONDS - start)) s" >&2
  fi
}

if [ $test_mode -eq 1 ]; then
  npm_tool tests/web playwright-core "the browser test"
  npm_tool tests/openapi @redocly/cli "the OpenAPI lint"
fi
exit 0
