#!/usr/bin/env bash
# lint.sh BIN — checks docker/Dockerfile and docker/compose.yaml against the
# tree and against the built binary, because no Docker engine runs on the
# build machines (make docker-lint).  It checks that:
#   - the build stage is Debian 12, the runtime stage debian:12-slim;
#   - every COPY source exists in the repository and is not filtered out by
#     docker/Dockerfile.dockerignore; every COPY --from names a stage;
#   - the runtime stage's RUNTIME_LIBS packages (plus what apt pulls in with
#     them) provide every library `ldd BIN` loads (missing), and each of them
#     provides at least one (extra) — sonames are mapped with `dpkg -S`;
#   - the HEALTHCHECK path is a route the server registers, its tool is
#     installed, its port is the EXPOSEd one;
#   - the runtime user is not root, the data dir is the VOLUME, CMD's flags
#     and the PACKTRAIN_* variables are ones `BIN serve --help` documents;
#   - compose.yaml builds this Dockerfile and keeps the data dir in a named
#     volume.
# Prints one line per check, then "N passed, N failed"; exits 1 on any failure.
# DOCKERFILE and COMPOSE_FILE override the files checked (for testing lint.sh).
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-}
if [ -z "$bin" ] || [ ! -x "$bin" ]; then
  echo "usage: docker/lint.sh BIN   (BIN: the built packtrain binary, e.g. bin/packtrain)" >&2
  exit 2
fi
dockerfile=${DOCKERFILE:-$root/docker/Dockerfile}
compose=${COMPOSE_FILE:-$root/docker/compose.yaml}
ignore_file="$dockerfile.dockerignore"
py=/usr/bin/python3
[ -x "$py" ] || py=python3

passed=0 failed=0
ok() { echo "ok    $*"; passed=$((passed + 1)); }
bad() { echo "FAIL  $*"; failed=$((failed + 1)); }
note() { echo "      $*"; }

if [ ! -f "$dockerfile" ]; then
  bad "no Dockerfile at $dockerfile"
  echo "$passed passed, $failed failed"
  exit 1
fi

# --- the Dockerfile as instructions: "STAGE<TAB>KEYWORD<TAB>ARGUMENTS" -------
# (continuation lines joined, comment lines dropped, stages numbered from 1)
instructions=$(awk '
  /^[[:space:]]*#/ { next }
  { line = cont ? line " " $0 : $0 }
  /\\[[:space:]]*$/ { sub(/\\[[:space:]]*$/, "", line); cont = 1; next }
  { cont = 0
    if (line ~ /[^[:space:]]/) {
      sub(/^[[:space:]]+/, "", line)
      kw = toupper(line); sub(/[[:space:]].*/, "", kw)
      args = line; sub(/^[^[:space:]]+[[:space:]]*/, "", args)
      if (kw == "FROM") stage++
      printf "%d\t%s\t%s\n", stage, kw, args
    }
    line = "" }' "$dockerfile")
stages=$(printf '%s\n' "$instructions" | awk -F'\t' '$2 == "FROM"' | wc -l)
final=$stages
# instr STAGE KEYWORD: the arguments of every KEYWORD of STAGE, one per line
instr() { printf '%s\n' "$instructions" | awk -F'\t' -v s="$1" -v k="$2" '$1 == s && $2 == k { print $3 }'; }
# the value of ARG or ENV NAME in the runtime stage (quotes removed)
setting() {
  instr "$final" "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | tail -1 | tr -d '"'
}
arg_list() { instr "$final" ARG | sed -n "s/^$1=//p" | tail -1 | tr -d '"'; }

# --- stages --------------------------------------------------------------------
first_from=$(instr 1 FROM)
final_from=$(instr "$final" FROM)
if [ "$stages" -ge 2 ] && [[ "$first_from" =~ ^debian:12([[:space:]]|$) ]] &&
   [[ "$final_from" =~ ^debian:12-slim([[:space:]]|$) ]]; then
  ok "multi-stage: build on '$first_from', runtime on '$final_from'"
else
  bad "stages: want a debian:12 build stage and a debian:12-slim runtime stage, got $stages stage(s): ${first_from:-none} ... ${final_from:-none}"
fi

# --- COPY sources ---------------------------------------------------------------
stage_names=$(printf '%s\n' "$instructions" | awk -F'\t' '$2 == "FROM" { print $3 }' |
              sed -n 's/.*[[:space:]][Aa][Ss][[:space:]]\+\([^[:space:]]\+\)$/\1/p')
ignore_patterns=()
if [ -f "$ignore_file" ]; then
  while read -r p; do
    case "$p" in ''|'#'*|'!'*) continue ;; esac
    ignore_patterns+=("${p%/}")
  done < "$ignore_file"
fi
ignored_by() {
  local src=${1%/} p
  for p in "${ignore_patterns[@]+"${ignore_patterns[@]}"}"; do
    # shellcheck disable=SC2053  # the pattern is a glob on purpose
    if [[ "$src" == $p || "$src" == $p/* ]]; then echo "$p"; return 0; fi
  done
  return 1
}
copy_ok=0 copy_bad=0
while IFS=$'\t' read -r stage kw args; do
  [ "$kw" = COPY ] || continue
  from=""
  words=()
  if [[ "$args" =~ \[ ]]; then
    mapfile -t words < <("$py" -c 'import json,sys; a=sys.argv[1]; i=a.index("[")
print("\n".join([w for w in a[:i].split()] + json.loads(a[i:])))' "$args")
  else
    read -ra words <<< "$args"
  fi
  srcs=()
  for w in "${words[@]}"; do
    case "$w" in
      --from=*) from=${w#--from=} ;;
      --*) ;;
      *) srcs+=("$w") ;;
    esac
  done
  unset 'srcs[${#srcs[@]}-1]' # the destination
  if [ -n "$from" ]; then
    if printf '%s\n' "$stage_names" | grep -qx "$from"; then
      copy_ok=$((copy_ok + 1))
    else
      bad "COPY --from=$from (stage $stage): no stage is named '$from'"
      copy_bad=$((copy_bad + 1))
    fi
    continue
  fi
  for s in "${srcs[@]}"; do
    if ! compgen -G "$root/$s" > /dev/null; then
      bad "COPY source '$s' (stage $stage) does not exist in $root"
      copy_bad=$((copy_bad + 1))
    elif pat=$(ignored_by "$s"); then
      bad "COPY source '$s' (stage $stage) is excluded by '$pat' in $(basename "$ignore_file")"
      copy_bad=$((copy_bad + 1))
    else
      copy_ok=$((copy_ok + 1))
    fi
  done
done <<< "$instructions"
[ "$copy_bad" -eq 0 ] && ok "all $copy_ok COPY sources exist in the tree and the build context"

# --- runtime libraries against ldd ------------------------------------------------
runtime_libs=$(arg_list RUNTIME_LIBS)
runtime_tools=$(arg_list RUNTIME_TOOLS)
install_run=$(instr "$final" RUN | grep 'apt-get install' || true)
if [ -z "$runtime_libs" ]; then
  bad "runtime stage: no ARG RUNTIME_LIBS=\"...\" listing the library packages"
elif ! grep -q '\$RUNTIME_LIBS\|\${RUNTIME_LIBS}' <<< "$install_run"; then
  bad "runtime stage: no RUN apt-get install of \$RUNTIME_LIBS"
else
  ok "runtime stage installs RUNTIME_LIBS ($runtime_libs) and RUNTIME_TOOLS (${runtime_tools:-none})"
fi

ldd_out=$(ldd "$bin" 2>&1) || { bad "ldd $bin failed: $ldd_out"; ldd_out=""; }
declare -A lib_pkg=()   # library path -> package
declare -A pkg_libs=()  # package -> its sonames
declare -A owner=()     # any spelling of a path -> package (from one dpkg -S call)
unresolved=0
paths=()
while read -r line; do
  case "$line" in *'not found'*)
    bad "ldd: ${line%% *} not found on this machine"; unresolved=1; continue ;;
  esac
  path=$(sed -n 's/.*=> \(\/[^ ]*\).*/\1/p; t; s/^\(\/[^ ]*\) (.*/\1/p' <<< "$line")
  [ -n "$path" ] && paths+=("$path") # linux-vdso has none
done <<< "$ldd_out"
# the spellings dpkg may have registered a library under (symlinks, merged /usr)
spellings() {
  local real
  real=$(readlink -f "$1" 2>/dev/null || echo "$1")
  printf '%s\n' "$1" "$real" "${1#/usr}" "/usr$1" "${real#/usr}" "/usr$real"
}
if [ ${#paths[@]} -gt 0 ]; then
  while IFS= read -r l; do
    owner[${l#*: }]=${l%%:*}
  done < <(for p in "${paths[@]}"; do spellings "$p"; done | sort -u | xargs dpkg -S 2>/dev/null |
           grep -v '^diversion')
fi
for path in "${paths[@]+"${paths[@]}"}"; do
  pkg=""
  while read -r cand; do
    [ -n "${owner[$cand]:-}" ] && { pkg=${owner[$cand]}; break; }
  done < <(spellings "$path")
  if [ -n "$pkg" ]; then
    lib_pkg[$path]=$pkg
    pkg_libs[$pkg]="${pkg_libs[$pkg]:-}${pkg_libs[$pkg]:+ }$(basename "$path")"
  else
    bad "dpkg -S: no Debian package owns $path (a library not installed from Debian?)"
    unresolved=1
  fi
done

# what apt installs with the runtime packages: their Depends/Pre-Depends, recursively
closure=$(apt-cache depends --recurse --important --no-recommends --no-suggests --no-conflicts \
            --no-breaks --no-replaces --no-enhances $runtime_libs $runtime_tools 2>/dev/null |
          grep -v '^[[:space:]]' | grep -v '^<' | sed 's/:.*//' | sort -u)
missing=0
for pkg in $(printf '%s\n' "${lib_pkg[@]}" | sort -u); do
  if ! grep -qx "$pkg" <<< "$closure"; then
    bad "missing: $pkg (provides ${pkg_libs[$pkg]}) is neither in RUNTIME_LIBS nor pulled in by it"
    missing=1
  fi
done
extra=0
for pkg in $runtime_libs; do
  if [ -z "${pkg_libs[$pkg]:-}" ]; then
    bad "extra: RUNTIME_LIBS has $pkg, which provides no library that ldd $(basename "$bin") loads"
    extra=1
  fi
done
if [ -n "$ldd_out" ] && [ "$missing$extra$unresolved" = 000 ]; then
  ok "runtime packages match ldd $(basename "$bin"): ${#lib_pkg[@]} libraries from $(printf '%s\n' "${lib_pkg[@]}" | sort -u | wc -l) packages"
fi

# --- health check ------------------------------------------------------------------
health=$(instr "$final" HEALTHCHECK)
port=$(setting ENV PACKTRAIN_PORT)
expose=$(instr "$final" EXPOSE | awk '{ print $1 }' | sed 's,/.*,,')
if [ -z "$health" ]; then
  bad "runtime stage has no HEALTHCHECK"
else
  hpath=$(grep -o 'https\?://[^/"'"'"' ]*/[^"'"'"' ]*' <<< "$health" | head -1 | sed 's,^https\?://[^/]*,,')
  routes="$root/server/api/routes_system.c"
  if [ -z "$hpath" ]; then
    bad "HEALTHCHECK has no http://host:port/path URL: $health"
  elif [ ! -f "$routes" ]; then
    note "skip: $routes does not exist yet, cannot check that $hpath is served"
  elif grep -q "\"GET\", \"$hpath\"" "$root"/server/api/routes*.c; then
    ok "HEALTHCHECK path $hpath is a GET route of the server"
  else
    bad "HEALTHCHECK path $hpath is not a GET route in server/api/routes*.c"
  fi
  tool=$(sed -n 's/.*CMD[[:space:]]\+\([^[:space:]]\+\).*/\1/p' <<< "$health")
  if [ "$tool" = packtrain ] || grep -qw -- "$tool" <<< "$runtime_tools"; then
    ok "HEALTHCHECK tool '$tool' is installed in the runtime stage"
  else
    bad "HEALTHCHECK runs '$tool', which is not in RUNTIME_TOOLS ($runtime_tools)"
  fi
  if [ -n "$port" ] && [ "$port" = "$expose" ] && grep -q 'PACKTRAIN_PORT\|:'"$expose"'/' <<< "$health"; then
    ok "HEALTHCHECK, ENV PACKTRAIN_PORT and EXPOSE agree on port $expose"
  else
    bad "ports disagree: EXPOSE '${expose:-none}', ENV PACKTRAIN_PORT '${port:-none}', HEALTHCHECK '$health'"
  fi
fi

# --- user, volume, command ---------------------------------------------------------
user=$(instr "$final" USER | tail -1 | cut -d: -f1)
if [ -z "$user" ] || [ "$user" = root ] || [ "$user" = 0 ]; then
  bad "the runtime stage runs as root (add USER with a non-root user)"
elif instr "$final" RUN | grep -q "useradd.* $user\( \|$\)"; then
  ok "runs as non-root user '$user', created with useradd"
else
  bad "USER $user is never created (no useradd ... $user in a RUN)"
fi

volume=$(instr "$final" VOLUME | tr -d '[]",' | awk '{ print $1 }')
cmd_json=$(instr "$final" CMD | tail -1)
cmd_words=$("$py" -c 'import json,sys; print("\n".join(json.loads(sys.argv[1])))' "$cmd_json" 2>/dev/null)
if [ -z "$cmd_words" ]; then
  bad "CMD is not an exec-form JSON array: '$cmd_json'"
else
  data_dir=$(awk 'prev == "--data-dir" { print } { prev = $0 }' <<< "$cmd_words")
  env_dir=$(setting ENV PACKTRAIN_DATA_DIR)
  if [ -n "$volume" ] && [ "$data_dir" = "$volume" ] && [ "${env_dir:-$volume}" = "$volume" ]; then
    ok "CMD --data-dir, ENV PACKTRAIN_DATA_DIR and VOLUME are all $volume"
  else
    bad "data dir: VOLUME '${volume:-none}', CMD --data-dir '${data_dir:-none}', ENV PACKTRAIN_DATA_DIR '${env_dir:-unset}'"
  fi
  sub=$(sed -n 2p <<< "$cmd_words")
  if ! help=$("$bin" "$sub" --help 2>&1); then
    bad "CMD runs '$sub', but '$(basename "$bin") $sub --help' fails"
  else
    unknown=$(grep '^--' <<< "$cmd_words" | while read -r f; do grep -q -- "$f " <<< "$help" || echo "$f"; done)
    if [ -z "$unknown" ]; then ok "CMD flags are options of '$sub'"; else bad "CMD flags unknown to '$sub': $(echo $unknown)"; fi
    vars=$(instr "$final" ENV | grep -o 'PACKTRAIN_[A-Z_]*' | sort -u)
    undocumented=$(for v in $vars; do grep -q "\$$v" <<< "$help" || echo "$v"; done)
    if [ -z "$undocumented" ]; then
      ok "ENV variables ($(echo $vars)) are documented by '$sub --help'"
    else
      bad "ENV variables not read by '$sub' (not in its --help): $(echo $undocumented)"
    fi
  fi
fi

# --- compose ---------------------------------------------------------------------
if [ ! -f "$compose" ]; then
  bad "no compose file at $compose"
elif ! "$py" -c 'import yaml' 2>/dev/null; then
  bad "cannot check $compose: python3-yaml is not installed (make deps)"
else
  compose_check=$("$py" - "$compose" "$dockerfile" "$volume" "$expose" <<'EOF'
import os, sys, yaml
path, dockerfile, volume, expose = sys.argv[1:5]
doc = yaml.safe_load(open(path))
here = os.path.dirname(os.path.abspath(path))
problems, notes = [], []
services = doc.get("services") or {}
declared = doc.get("volumes") or {}
built = False
for name, svc in services.items():
    b = svc.get("build")
    if not isinstance(b, dict):
        continue
    ctx = os.path.normpath(os.path.join(here, b.get("context", ".")))
    df = os.path.join(ctx, b.get("dockerfile", "Dockerfile"))
    if os.path.realpath(df) != os.path.realpath(dockerfile):
        problems.append(f"service {name} builds {df}, not {dockerfile}")
        continue
    built = True
    mounts = []
    for v in svc.get("volumes") or []:
        src, _, rest = (v if isinstance(v, str) else f"{v.get('source')}:{v.get('target')}").partition(":")
        mounts.append((src, rest.split(":")[0]))
    named = [s for s, t in mounts if t == volume and s in declared]
    if not named:
        problems.append(f"service {name}: no named volume (declared under volumes:) mounted at {volume}")
    else:
        notes.append(f"service {name}: volume {named[0]} at {volume}")
    targets = [str(p).rsplit(":", 1)[-1].split("/")[0] for p in svc.get("ports") or []]
    if expose not in targets:
        problems.append(f"service {name}: no port published to container port {expose}")
if not built:
    problems.append(f"no service builds {dockerfile}")
for p in problems:
    print("FAIL " + p)
for n in notes:
    print("OK " + n)
EOF
)
  if grep -q '^FAIL' <<< "$compose_check"; then
    while read -r l; do bad "compose: ${l#FAIL }"; done < <(grep '^FAIL' <<< "$compose_check")
  else
    ok "compose: $(sed -n 's/^OK //p' <<< "$compose_check" | paste -sd';')"
  fi
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
