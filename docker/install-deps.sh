#!/usr/bin/env bash
# install-deps.sh — make sure the Debian packages in docker/packages.txt are present.
#
# As root it installs what is missing with apt-get; otherwise it prints the exact
# apt-get line to run and fails.  --check-only never installs: it reports what
# is missing (and fails) so `make test` says why instead of a compiler error.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
list="${PACKAGES_FILE:-$here/packages.txt}"
mode=${1:-install}

missing=()
while read -r pkg; do
  case "$pkg" in ''|'#'*) continue ;; esac
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done < "$list"

[ ${#missing[@]} -eq 0 ] && exit 0

line="apt-get install -y ${missing[*]}"
if [ "$mode" = "--check-only" ]; then
  echo "packtrain: missing Debian packages: ${missing[*]}" >&2
  echo "packtrain: run 'make deps' as root, or: sudo $line" >&2
  exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "packtrain: missing Debian packages: ${missing[*]}" >&2
  echo "packtrain: run as root, or: sudo apt-get update && sudo $line" >&2
  exit 1
fi
echo "packtrain: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${missing[@]}"
