#!/usr/bin/env bash
# configure.sh OUT PKG... — writes the build's view of the installed libraries
# to OUT (the Makefile's $(BUILD)/config.mk): compile and link flags from
# pkg-config for PKG..., cmocka's for the tests, and Open MPI's from mpicc when
# it is installed.  Run by make after docker/install-deps.sh, never by hand.
# Fails, naming the package, when pkg-config cannot answer: a build without a
# library's flags would only fail later, at link time, with a worse message.
set -euo pipefail
out=$1; shift
command -v pkg-config >/dev/null ||
  { echo "packtrain: pkg-config is missing (make installs it as root: apt-get install pkg-config)" >&2; exit 1; }
for p in "$@" cmocka; do
  pkg-config --exists "$p" ||
    { echo "packtrain: pkg-config does not know '$p' (is its -dev package installed? see docker/packages.txt)" >&2; exit 1; }
done
mpi_cflags=; mpi_libs=
if mpicc=$(command -v mpicc); then
  mpi_cflags="-DPT_HAVE_MPI $("$mpicc" --showme:compile)"
  mpi_libs=$("$mpicc" --showme:link)
fi
mkdir -p "$(dirname "$out")"
tmp=$(mktemp "$out.XXXXXX")
{
  echo "# written by docker/configure.sh; remade when the installed packages change"
  echo "PKG_CFLAGS := $(pkg-config --cflags "$@")"
  echo "PKG_LIBS := $(pkg-config --libs "$@")"
  echo "CMOCKA_LIBS := $(pkg-config --libs cmocka)"
  echo "MPI_CFLAGS := $mpi_cflags"
  echo "MPI_LIBS := $mpi_libs"
} >"$tmp"
mv -f "$tmp" "$out"
