#!/usr/bin/env bash
# fresh_check.sh — the README's two commands on a fresh Debian 12 machine
# (make fresh-check; .ci/run).
#
#   tests/fresh_check.sh [--order run-first|test-first] [--keep] [--selftest|--no-selftest]
#
# A minimal Debian 12 root is built with mmdebstrap, holding only what the
# machines packtrain is set up on come with: build-essential, git, curl,
# ca-certificates, Python 3 and Node.js (Debian's nodejs, without npm) — no
# pkg-config and no library packtrain uses.  It is cached as a tarball under
# $FRESH_CACHE, keyed by that package list and the host's package sources, and
# each run unpacks a new copy under $FRESH_WORK, so one run's installs never
# reach the next.  The root gets the host's /etc/apt (its sources and apt
# configuration) and /etc/resolv.conf, and a clean `git archive` of HEAD at
# /work/packtrain, next to /work/shared (the host's, read-only), so
# ../shared/data resolves as in a checkout.
#
# In a chroot with /proc, /sys, /dev, /dev/pts and /dev/shm mounted, as root
# with the environment of a fresh login (env -i; HOME, PATH, TERM only), it
# runs, in the order asked:
#   make run    in the background, until the server answers /healthz; then it
#               is stopped (SIGTERM, then SIGKILL, to processes whose root is
#               the chroot — never any other);
#   make test   whose closing line must read "all: N passed, 0 failed,
#               0 skipped", with the mpi and torch suites among those that
#               passed tests;
# and, after `make run`, a newcomer's first command after `make`:
#   make && bin/packtrain train ../shared/data/qm9_dft20.extxyz.gz
#               which must train (epoch lines) and write train-out/model.safetensors;
# after them, the build check: `make -q` finds nothing to do, and
# `make -n MPI=0` would recompile every object without -DPT_HAVE_MPI (the
# flags stamp).  No command may leave a process running in the root.
# Each command is timed.  Every exit path (failure, SIGINT, SIGTERM) stops the
# chroot's processes and unmounts what was mounted; a mount that cannot be
# removed is reported and its directory left alone (never deleted through).
#
#   --order      run-first (default: the README's order) or test-first
#   --keep       keep the unpacked root (for a look inside after a failure)
#   --selftest   only the self-test of the clean-up, which every run does
#                first (--no-selftest leaves it out): a failure after
#                mounting, SIGINT and SIGTERM while a command runs in the
#                chroot, a command that leaves a process running; each must
#                leave no mount, process or directory behind
#
# Environment: FRESH_CACHE (default /var/cache/packtrain-fresh), FRESH_WORK
# (default /var/tmp/packtrain-fresh), FRESH_LOGS (default build/fresh-check),
# FRESH_RUN_TIMEOUT / FRESH_TEST_TIMEOUT (seconds; 3600 / 5400).
# Logs of each step go to $FRESH_LOGS.  Needs root (chroot, mount).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(git -C "$here" rev-parse --show-toplevel)
cache=${FRESH_CACHE:-/var/cache/packtrain-fresh}
workbase=${FRESH_WORK:-/var/tmp/packtrain-fresh}
logs=${FRESH_LOGS:-$repo/build/fresh-check}
run_timeout=${FRESH_RUN_TIMEOUT:-3600}
test_timeout=${FRESH_TEST_TIMEOUT:-5400}
suite=bookworm
variant=minbase
# What the machines come with.  Changing this list rebuilds the cached root.
base_pkgs=(build-essential git curl ca-certificates python3 nodejs)
# Inside the root: the checkout and the shared data next to it.
in_repo=/work/packtrain
in_shared=/work/shared
host_shared=$(realpath "$repo/../shared" 2>/dev/null || echo /work/shared)

order="run-first"; keep=0; selftest=1; only_selftest=0; fault=${FRESH_FAULT:-}
while [ $# -gt 0 ]; do
  case "$1" in
    --order) order=${2:-}; shift 2 ;;
    --order=*) order=${1#*=}; shift ;;
    --keep) keep=1; shift ;;
    --selftest) only_selftest=1; shift ;;
    --no-selftest) selftest=0; shift ;;
    -h|--help) sed -n '2,48p' "$0"; exit 0 ;;
    *) echo "fresh-check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
case "$order" in run-first|test-first) ;; *) echo "fresh-check: --order must be run-first or test-first" >&2; exit 2 ;; esac

say() { echo "fresh-check: $*" >&2; }
die() { say "FAILED: $*"; exit 1; }
secs() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

[ "$(id -u)" -eq 0 ] || die "needs root (it builds a Debian root and mounts /proc, /sys, /dev in a chroot)"
[ -d "$host_shared/data" ] || die "no shared data at $host_shared/data (the tests read ../shared/data)"
mkdir -p "$cache" "$workbase" "$logs"

# --- the processes and mounts of a root --------------------------------------

# PIDs of the processes whose root directory is $1 (or below it).
root_pids() {
  local p r
  for p in /proc/[0-9]*; do
    r=$(readlink "$p/root" 2>/dev/null) || continue
    [[ "$r" == "$1" || "$r" == "$1/"* ]] && echo "${p#/proc/}"
  done
  return 0
}

# Stops every process whose root is $1: SIGTERM, 10 s, then SIGKILL.
stop_root_pids() {
  local dir=$1 pids
  pids=$(root_pids "$dir")
  [ -z "$pids" ] && return 0
  # shellcheck disable=SC2086
  kill -TERM $pids 2>/dev/null || true
  for _ in $(seq 100); do
    pids=$(root_pids "$dir"); [ -z "$pids" ] && return 0
    sleep 0.1
  done
  say "processes still running in the chroot after SIGTERM, killing: $(tr "\n" " " <<<"$pids")"
  # shellcheck disable=SC2086
  kill -KILL $pids 2>/dev/null || true
  for _ in $(seq 50); do
    pids=$(root_pids "$dir"); [ -z "$pids" ] && return 0
    sleep 0.1
  done
  say "processes survive SIGKILL in the chroot: $(tr "\n" " " <<<"$pids")"
  return 1
}

# Mount points at or below $1, deepest first.
mounts_under() {
  awk -v d="$1" '$5 == d || index($5, d "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r
}

# Unmounts everything at or below $1; fails if anything is left.
unmount_all() {
  local dir=$1 m
  for m in $(mounts_under "$dir"); do
    umount "$m" 2>/dev/null || umount -l "$m" || say "cannot unmount $m"
  done
  [ -z "$(mounts_under "$dir")" ]
}

# Removes a run directory, but only when nothing is mounted below it and no
# process lives in it (rm must never reach /dev or the shared data).
remove_run() {
  local dir=$1
  stop_root_pids "$dir/root" || return 1
  unmount_all "$dir" || { say "left $dir in place: still mounted: $(mounts_under "$dir" | tr '\n' ' ')"; return 1; }
  rm -rf --one-file-system "$dir"
}

# --- the self-test of the clean-up -------------------------------------------
# Runs this script four times with a fault: a failure right after mounting,
# SIGINT and SIGTERM while a command runs in the chroot, and a command that
# leaves a process running (which must be named as a failure).  Each must
# exit with its status and leave no mount, no process and no directory behind.
selftest() {
  local tmp name rc want dir child bad=0 start=$SECONDS
  tmp=$(mktemp -d)
  # The children get SIGINT and SIGTERM back at their defaults: an async
  # child of a script ignores SIGINT, and so does this script when its parent
  # ignored it (make in the background, some CI runners), and bash cannot
  # trap a signal ignored when it started.
  local child_env=(env "--default-signal=INT,TERM")
  for name in after-mount leftover SIGINT SIGTERM; do
    rm -f "$tmp/rundir"
    case $name in
      after-mount|leftover)
        want=1; rc=0
        FRESH_FAULT=$name FRESH_RUNDIR_FILE=$tmp/rundir FRESH_LOGS=$tmp/logs "${child_env[@]}" "$0" --no-selftest \
          >"$tmp/$name.log" 2>&1 || rc=$?
        if [ $name = leftover ] && ! grep -q "left processes running in the root:" "$tmp/$name.log"; then
          say "self-test leftover: the process left behind was not reported"; cat "$tmp/$name.log" >&2; bad=1
        fi ;;
      SIG*)
        [ $name = SIGINT ] && want=130 || want=143
        FRESH_FAULT=signal FRESH_RUNDIR_FILE=$tmp/rundir FRESH_LOGS=$tmp/logs "${child_env[@]}" "$0" --no-selftest \
          >"$tmp/$name.log" 2>&1 &
        child=$!
        for _ in $(seq 600); do
          dir=$(cat "$tmp/rundir" 2>/dev/null || true)
          [ -n "$dir" ] && [ -e "$dir/fault.ready" ] && break
          kill -0 "$child" 2>/dev/null || break
          sleep 0.2
        done
        if [ -z "$dir" ] || [ ! -e "$dir/fault.ready" ] || [ -z "$(root_pids "$dir/root")" ]; then
          say "self-test $name: the chroot command did not start"; cat "$tmp/$name.log" >&2; bad=1
        fi
        kill -"${name#SIG}" "$child" 2>/dev/null || true
        # the clean-up may take a while on a loaded machine, not forever
        for _ in $(seq 1800); do kill -0 "$child" 2>/dev/null || break; sleep 0.1; done
        if kill -0 "$child" 2>/dev/null; then
          say "self-test $name: still running 3 minutes after the signal; stopping it"; bad=1
          kill -TERM "$child" 2>/dev/null || true
        fi
        rc=0; wait "$child" || rc=$? ;;
    esac
    dir=$(cat "$tmp/rundir" 2>/dev/null || true)
    if [ "$rc" -ne "$want" ]; then
      say "self-test $name: exit status $rc, expected $want"; cat "$tmp/$name.log" >&2; bad=1
    elif [ -z "$dir" ]; then
      say "self-test $name: the run never started"; cat "$tmp/$name.log" >&2; bad=1
    elif [ -n "$(mounts_under "$dir")" ]; then
      say "self-test $name: still mounted: $(mounts_under "$dir" | tr '\n' ' ')"; bad=1
    elif [ -n "$(root_pids "$dir/root")" ]; then
      say "self-test $name: processes left in the chroot: $(root_pids "$dir/root" | tr '\n' ' ')"; bad=1
    elif [ -e "$dir" ]; then
      say "self-test $name: $dir was not removed"; bad=1
    else
      say "self-test $name: exit $rc, nothing mounted, no process, no directory left"
    fi
  done
  rm -rf "$tmp"
  [ "$bad" -eq 0 ] || die "the clean-up self-test failed"
  say "clean-up self-test passed in $(secs $((SECONDS - start)))"
}

# Runs left behind by a killed fresh-check (its pid is gone): clean them up.
for old in "$workbase"/run.*; do
  [ -d "$old" ] || continue
  owner=$(cat "$old/owner.pid" 2>/dev/null || echo 0)
  if [ "$owner" -gt 0 ] && kill -0 "$owner" 2>/dev/null; then continue; fi
  say "removing the stale run $old"
  remove_run "$old" || die "cannot clean up the stale run $old"
done

# --- the base root (cached) --------------------------------------------------

ensure_mmdebstrap() {
  command -v mmdebstrap >/dev/null && return 0
  say "installing mmdebstrap on this machine (apt-get; waits for the dpkg lock)"
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends mmdebstrap >/dev/null ||
    { apt-get -o DPkg::Lock::Timeout=600 update -qq &&
      DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends mmdebstrap; } ||
    die "cannot install mmdebstrap"
}

# The host's enabled package sources (apt reads *.list and *.sources only).
host_sources() {
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] && cat "$f"
  done
  return 0
}

key=$( { echo "$suite $variant ${base_pkgs[*]}"; host_sources; } | sha256sum | cut -c1-16)
base_tar=$cache/base-$key.tar
t_base=0
build_base() {
  ensure_mmdebstrap
  local srcs tmp start=$SECONDS
  srcs=$(mktemp "$cache/sources.XXXXXX")
  host_sources >"$srcs"
  tmp=$(mktemp "$cache/base-$key.XXXXXX.tar")
  say "building the base root (Debian $suite, $variant + ${base_pkgs[*]}) -> $base_tar"
  if ! mmdebstrap --mode=root --variant="$variant" --include="$(IFS=,; echo "${base_pkgs[*]}")" \
       "$suite" "$tmp" "$srcs" >"$logs/base.log" 2>&1; then
    rm -f "$tmp" "$srcs"
    tail -20 "$logs/base.log" >&2
    die "mmdebstrap could not build the base root (log: $logs/base.log)"
  fi
  rm -f "$srcs"
  mv -f "$tmp" "$base_tar"
  t_base=$((SECONDS - start))
  # older keys are of no further use
  find "$cache" -maxdepth 1 -name 'base-*.tar' ! -name "base-$key.tar" -delete
  say "base root built in $(secs $t_base)"
}
(
  flock 9
  [ -f "$base_tar" ] || build_base
  echo "$t_base" >"$logs/base.time"
) 9>"$cache/lock"
t_base=$(cat "$logs/base.time")

if [ "$only_selftest" -eq 1 ]; then selftest; exit 0; fi
[ "$selftest" -eq 1 ] && selftest

# --- a fresh copy of it ------------------------------------------------------

run=$(mktemp -d "$workbase/run.XXXXXX")
echo $$ >"$run/owner.pid"
root=$run/root
[ -n "${FRESH_RUNDIR_FILE:-}" ] && echo "$run" >"$FRESH_RUNDIR_FILE"

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  set +e
  stop_root_pids "$root" || rc=1
  if ! unmount_all "$run"; then
    say "FAILED: still mounted under $run: $(mounts_under "$run" | tr '\n' ' ')"
    exit 1
  fi
  if [ "$keep" -eq 1 ]; then
    say "the root is kept in $root (nothing mounted; rm -rf --one-file-system $run when done)"
  else
    rm -rf --one-file-system "$run"
  fi
  exit $rc
}
trap cleanup EXIT
trap 'say "interrupted (SIGINT)"; exit 130' INT
trap 'say "terminated (SIGTERM)"; exit 143' TERM

mkdir -p "$root"
tar -C "$root" -xf "$base_tar"

# What belongs to the machine rather than to its packages comes from the
# host: its package sources and apt configuration, name resolution and
# identity (a root from mmdebstrap has no /etc/hosts), the certificate
# authorities it trusts beyond Debian's (a TLS proxy in front of the npm
# registry needs one) and its machine-wide npm configuration.
rm -rf "$root/etc/apt"
cp -a /etc/apt "$root/etc/apt"
cp -L /etc/resolv.conf "$root/etc/resolv.conf"
cp -L /etc/hosts "$root/etc/hosts"
cp -L /etc/hostname "$root/etc/hostname"
[ -f /etc/npmrc ] && cp -L /etc/npmrc "$root/etc/npmrc"
if compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null; then
  cp -L /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
  chroot "$root" update-ca-certificates >/dev/null 2>&1 || die "update-ca-certificates failed in the root"
fi

# The root must be as fresh as claimed: none of packtrain's packages (but the
# base ones), no pkg-config, no npm.
# shellcheck disable=SC2016  # dpkg-query's own ${fields}
present=$(chroot "$root" dpkg-query -W -f='${Status} ${Package}\n' 2>/dev/null | awk '$3 == "installed" { print $4 }')
for f in "$repo/docker/packages.txt" "$repo/docker/packages-test.txt"; do
  while read -r pkg _; do
    case "$pkg" in ''|'#'*) continue ;; esac
    [[ " ${base_pkgs[*]} " == *" $pkg "* ]] && continue
    grep -qx "$pkg" <<<"$present" && die "the base root already has $pkg (from $f): not a fresh machine"
  done <"$f"
done
for cmd in pkg-config npm mpicc; do
  chroot "$root" sh -c "command -v $cmd" >/dev/null 2>&1 && die "the base root already has $cmd"
done

commit=$(git -C "$repo" rev-parse --short HEAD)
[ -z "$(git -C "$repo" status --porcelain --untracked-files=no)" ] ||
  say "note: $repo has uncommitted changes; the check tests HEAD ($commit) only"
mkdir -p "$root$in_repo" "$root$in_shared"
git -C "$repo" archive --format=tar HEAD | tar -C "$root$in_repo" -xf -

# --- mounts ------------------------------------------------------------------

bind() { # SRC DST [ro]
  mount --bind "$1" "$2"
  mount --make-private "$2"
  [ "${3:-}" = ro ] && mount -o remount,bind,ro "$2"
  return 0
}
mount -t proc proc "$root/proc"
mount -t sysfs -o ro sysfs "$root/sys"
bind /dev "$root/dev"
bind /dev/pts "$root/dev/pts"
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$root/dev/shm"
bind "$host_shared" "$root$in_shared" ro

[ "$fault" = after-mount ] && die "fault injected after mounting (FRESH_FAULT=after-mount)"

# Starts a command in its own session, in the background, with its output in
# LOG; sets $bg.  In the background because bash runs a trap only once a
# foreground command has ended: while it waits, a signal is handled at once.
bg=
root_cmd() { # LOG CMD...
  local log=$1; shift
  setsid "$@" </dev/null >"$log" 2>&1 &
  bg=$!
}
# Shell text in the chroot, as root with the environment of a fresh login
# (env -i: HOME, PATH, TERM; no locale, like a new Debian machine).
chroot_argv=(chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb
             PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin /bin/bash -c)

if [ "$fault" = signal ]; then
  # the self-test sends SIGINT or SIGTERM to this script while this runs
  root_cmd "$run/fault.log" "${chroot_argv[@]}" "cd $in_repo && exec sleep 600"
  echo ready >"$run/fault.ready"
  wait "$bg"
  die "the fault command ended by itself"
fi

# --- the README's two commands -----------------------------------------------

# After a command has ended, nothing it started may still run in the root (a
# server a test forgot, a daemon a package started): a newcomer's machine
# would keep it.  10 s of grace for processes that are exiting.
no_leftovers() { # WHAT
  local p left=""
  for _ in $(seq 100); do [ -z "$(root_pids "$root")" ] && return 0; sleep 0.1; done
  for p in $(root_pids "$root"); do
    left+=$'\n'"  $p: $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-120)"
  done
  stop_root_pids "$root" || true
  die "'$1' left processes running in the root:$left"
}

if [ "$fault" = leftover ]; then
  root_cmd "$run/fault.log" "${chroot_argv[@]}" "cd $in_repo && { sleep 600 & } && exit 0"
  wait "$bg"
  no_leftovers "the leftover fault"
  die "the leftover fault was not noticed"
fi

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

t_run=0; t_test=0; run_cmd=
do_run() {
  local start=$SECONDS log=$logs/make-run.log port=8080 answered=0 rc
  run_cmd="make run"
  if port_busy 8080; then
    # another server on this machine has the README's port: pick another
    # one the README's way
    for port in $(seq 18080 18180); do port_busy "$port" || break; done
    run_cmd="make run PORT=$port"
    say "port 8080 is in use on this machine; running '$run_cmd'"
  fi
  say "running '$run_cmd' (log: $log)"
  root_cmd "$log" "${chroot_argv[@]}" "cd $in_repo && exec $run_cmd"
  while [ $((SECONDS - start)) -lt "$run_timeout" ]; do
    kill -0 "$bg" 2>/dev/null || break
    if curl -fsS --max-time 5 "http://127.0.0.1:$port/healthz" >"$run/healthz" 2>/dev/null &&
       grep -q '"status": *"ok"' "$run/healthz"; then answered=1; break; fi
    sleep 2
  done
  t_run=$((SECONDS - start))
  if [ "$answered" -ne 1 ]; then
    tail -30 "$log" >&2
    kill -0 "$bg" 2>/dev/null && die "'$run_cmd' did not answer /healthz within $(secs "$run_timeout") (log: $log)"
    rc=0; wait "$bg" || rc=$?
    die "'$run_cmd' ended (exit $rc) before the server answered /healthz (log: $log)"
  fi
  # the answer came from the chroot's server: it is still running there
  [ -n "$(root_pids "$root")" ] || die "/healthz answered, but no process runs in the chroot"
  say "'$run_cmd': the server answered /healthz after $(secs $t_run): $(tr -d '\n' <"$run/healthz" | cut -c1-100)"
  # stopped as a user does, with Ctrl-C (SIGINT to the foreground group)
  local stop=$SECONDS
  kill -INT -- "-$bg" 2>/dev/null || true
  for _ in $(seq 300); do [ -z "$(root_pids "$root")" ] && break; sleep 0.1; done
  [ -z "$(root_pids "$root")" ] || { tail -5 "$log" >&2; die "the server did not stop within 30 s of SIGINT (log: $log)"; }
  wait "$bg" 2>/dev/null || true
  grep -q '^packtrain: stopped' "$log" || { tail -5 "$log" >&2; die "the server did not stop cleanly after SIGINT (log: $log)"; }
  say "'$run_cmd': stopped by SIGINT in $(secs $((SECONDS - stop)))"
}

do_test() {
  local start=$SECONDS log=$logs/make-test.log rc=0 line failed s p
  say "running 'make test' (log: $log)"
  root_cmd "$log" timeout -k 30 "$test_timeout" "${chroot_argv[@]}" "cd $in_repo && exec make test"
  wait "$bg" || rc=$?
  t_test=$((SECONDS - start))
  line=$(grep -E '^all: [0-9]+ passed, [0-9]+ failed' "$log" | tail -1 || true)
  if [ -z "$line" ]; then
    tail -40 "$log" >&2
    [ "$rc" -eq 124 ] && die "'make test' timed out after $(secs "$test_timeout") (log: $log)"
    die "'make test' ended (exit $rc) without a summary line (log: $log)"
  fi
  say "'make test' took $(secs $t_test): $line"
  failed=$(sed -E 's/^all: [0-9]+ passed, ([0-9]+) failed.*/\1/' <<<"$line")
  if [ "$failed" -ne 0 ] || [[ "$line" != *", 0 skipped" ]] || [ "$rc" -ne 0 ]; then
    grep -E '^(FAIL|not ok|!!)' "$log" | head -30 >&2 || true
    grep -E '^  [a-z_]+ [0-9]+/[0-9]+ ' "$log" >&2 || true
    die "'make test' must end with 0 failed and 0 skipped (exit $rc): $line (log: $log)"
  fi
  # the suites the issue names must have run tests, not merely not failed
  for s in mpi torch; do
    p=$(grep -E "^  $s [0-9]+/[0-9]+ " "$log" | tail -1 | awk '{ split($2, a, "/"); print a[1] }')
    [ "${p:-0}" -gt 0 ] || die "the $s suite ran no test (summary of $log)"
  done
  no_leftovers "make test"
}

# A newcomer's first command after building: training on a file as it comes
# (ingested on the fly into ~/.cache/packtrain), with the default layout.
t_train=0
train_cmd="make && bin/packtrain train ../shared/data/qm9_dft20.extxyz.gz"
do_train() {
  local start=$SECONDS log=$logs/train.log rc=0
  say "running '$train_cmd' (log: $log)"
  root_cmd "$log" timeout -k 10 600 "${chroot_argv[@]}" "cd $in_repo && $train_cmd"
  wait "$bg" || rc=$?
  t_train=$((SECONDS - start))
  [ "$rc" -eq 124 ] || no_leftovers "$train_cmd"
  stop_root_pids "$root" || die "processes of 'packtrain train' could not be stopped"
  if [ "$rc" -ne 0 ]; then
    tail -20 "$log" >&2
    die "'$train_cmd' failed (exit $rc; log: $log)"
  fi
  grep -q '^{"kind":"epoch"' "$log" || die "'$train_cmd' printed no epoch (log: $log)"
  [ -s "$root$in_repo/train-out/model.safetensors" ] || die "'$train_cmd' wrote no train-out/model.safetensors (log: $log)"
  say "'$train_cmd' took $(secs $t_train): $(grep '^packtrain train: .* epochs in' "$log" | tail -1 | cut -c1-110)"
}

# After the commands, the build is up to date (a second `make` has nothing
# to do), and a change of flags recompiles every object with the new ones
# (`make -n MPI=0`: no object keeps -DPT_HAVE_MPI) — the flags stamp.  Last,
# as it leaves the stamp at MPI=0.
t_rebuild=0
do_rebuild() {
  local start=$SECONDS log=$logs/rebuild.log rc=0 q n_cc n_mpi n_obj
  say "checking the build: 'make -q', then 'make -n MPI=0' (log: $log)"
  # shellcheck disable=SC2016  # expanded in the chroot
  root_cmd "$log" timeout -k 10 600 "${chroot_argv[@]}" 'cd '"$in_repo"' && { make -q; echo "make-q $?";
    make -n MPI=0 >/tmp/mpi0.n 2>&1; echo "make-n $?"
    echo "compiles $(grep -c -- " -c " /tmp/mpi0.n)"
    echo "with-mpi $(grep -- " -c " /tmp/mpi0.n | grep -c -- -DPT_HAVE_MPI)"
    echo "objects $(find build -name "*.o" -not -path "build/tests/*" | wc -l)"; }'
  wait "$bg" || rc=$?
  t_rebuild=$((SECONDS - start))
  [ "$rc" -eq 0 ] || { cat "$log" >&2; die "the build check failed (exit $rc; log: $log)"; }
  no_leftovers "the build check"
  q=$(awk '$1 == "make-q" { print $2 }' "$log"); n_cc=$(awk '$1 == "compiles" { print $2 }' "$log")
  n_mpi=$(awk '$1 == "with-mpi" { print $2 }' "$log"); n_obj=$(awk '$1 == "objects" { print $2 }' "$log")
  [ "$q" = 0 ] || { cat "$log" >&2; die "after the commands, 'make -q' says the build is not up to date (status $q; log: $log)"; }
  [ "$(awk '$1 == "make-n" { print $2 }' "$log")" = 0 ] || { cat "$log" >&2; die "'make -n MPI=0' failed (log: $log)"; }
  { [ "${n_obj:-0}" -gt 0 ] && [ "$n_cc" = "$n_obj" ] && [ "$n_mpi" = 0 ]; } ||
    { cat "$log" >&2; die "'make -n MPI=0' would recompile $n_cc of $n_obj objects, $n_mpi still with -DPT_HAVE_MPI (log: $log)"; }
  say "the build is up to date after the commands; MPI=0 would recompile all $n_obj objects without -DPT_HAVE_MPI"
}

start_all=$SECONDS
say "testing $commit in a fresh root ($run), order: $order"
if [ "$order" = run-first ]; then do_run; do_train; do_test; else do_test; do_run; do_train; fi
total=$((SECONDS - start_all))
do_rebuild

echo
echo "fresh-check passed ($commit, order $order)"
[ "$t_base" -gt 0 ] && echo "  base root build        $(secs "$t_base") (cached for the next runs)"
printf '  %-22s %s (until /healthz answered)\n' "$run_cmd" "$(secs $t_run)"
printf '  %-22s %s\n' "make test" "$(secs $t_test)"
printf '  %-22s %s\n' "packtrain train" "$(secs $t_train)"
printf '  %-22s %s\n' "all three" "$(secs $total)"
printf '  %-22s %s\n' "build check" "$(secs $t_rebuild)"
# What each command installed, as docker/install-deps.sh reported it (apt's
# package count, download and disk; npm's packages), for the README's table.
echo "what each command installed:"
for f in make-run make-test train; do
  grep -hE '^packtrain: (installing|installed in) ' "$logs/$f.log" 2>/dev/null | sed "s/^packtrain: /  $f: /" || true
done
