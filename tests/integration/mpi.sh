#!/usr/bin/env bash
# mpi.sh — backend.kind "mpi" under a real mpirun, on loopback only (issue 7):
#
#   - 2 ranks x 1 replica, and 2 ranks x 2 replicas x 2 accumulation, train
#     the same model, byte for byte, as one process with the same global
#     batch (2 and 4 replicas), over two epochs; rank 0 alone prints metrics
#     and writes the outputs;
#   - a job training on energies and forces (EMT slice, training.loss
#     "auto"), 2 ranks x 2 replicas x 2 accumulation, trains the model of one
#     process with 4 replicas, byte for byte, with the same force errors;
#   - `packtrain train` on a job of 2 ranks starts them itself (it runs again
#     under `packtrain mpirun`), with the same model;
#   - the worker under `packtrain mpirun --protocol` (the server's way): one
#     "done" line; SIGTERM to the launcher stops every rank after the same
#     step with a checkpoint, leaves no process behind, and resuming from that
#     checkpoint ends with the model of an uninterrupted run;
#   - ZeRO stages 1-3 (and offload) over 2 ranks x 2 replicas x A=2 train the
#     model of one stage-0 process with 4 replicas, byte for byte, energy
#     jobs and (stages 2-3) forces jobs alike; a stage-3 run resumed from a
#     sharded run's checkpoint ends with the same model;
#   - failures end the whole job, never hang it: ranks reading different
#     datasets, ranks whose parameters diverge (checked every step here),
#     a world of the wrong size;
#   - the server runs a submitted mpi job to success (its worker starts the
#     ranks), takes `ranks: N` alone as N replicas, and refuses a given
#     replication_factor that is not a multiple of ranks.
#
# Without Open MPI (no mpirun, or packtrain built without it) the suite fails
# with the reason (make installs Open MPI; SKIP=mpi leaves the suite out).
cd "$(dirname "$0")/../.." || exit 1
source tests/integration/api_lib.sh

why=""
command -v mpirun >/dev/null || why="mpirun not found (apt-get install openmpi-bin libopenmpi-dev, then make)"
if [ -z "$why" ] && ! "$PT" mpirun --ranks 1 --print -- version >"$WORK/probe" 2>&1; then
  why=$(tail -1 "$WORK/probe")
fi
if [ -n "$why" ]; then
  not_ok "Open MPI is required: $why"
  finish; exit 1
fi

export PACKTRAIN_MPI_ARGS="--mca btl self,vader,tcp --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo"
export PACKTRAIN_MPI_CHECK_EVERY=1
ROOT=(); [ "$(id -u)" -eq 0 ] && ROOT=(--allow-run-as-root)
# shellcheck disable=SC2206
MPIRUN=(mpirun --oversubscribe --bind-to none --stdin none "${ROOT[@]}" $PACKTRAIN_MPI_ARGS)
T=(timeout -k 5 60)

"$PT" ingest tests/data/backend_qm9_240.extxyz.gz --out "$WORK/d.ptd" >/dev/null 2>&1 &&
  "$PT" ingest tests/data/api_demo_qm9_64.extxyz --out "$WORK/other.ptd" >/dev/null 2>&1 &&
  "$PT" ingest tests/data/emt_train_240.extxyz.gz --out "$WORK/emt.ptd" >/dev/null 2>&1 ||
  { not_ok "ingest the test datasets"; finish; exit 1; }

config() { # FILE KIND RANKS R A EPOCHS [LR [EXTRA_BACKEND_KEYS]]
  cat >"$1" <<EOF
{"model": {"hidden": 32, "filters": 32, "interactions": 2, "gaussians": 16},
 "batching": {"model_batch_size": 2},
 "training": {"epochs": $6, "log_every": 1, "seed": 5, "checkpoint_every": 5, "lr": ${7:-0.001}},
 "backend": {"kind": "$2", "ranks": $3, "replication_factor": $4, "gradient_accumulation": $5,
             "threads": 1${8:+, $8}}}
EOF
}
losses() { "$PY" -c 'import json,sys; print(" ".join(repr(json.loads(l)["loss"]) for l in open(sys.argv[1]) if l.startswith("{\"kind\":\"step\"")))' "$1"; }
count() { grep -c "$1" "$2"; }
same_bytes() { cmp -s "$1" "$2"; }

# --- 2 ranks = one process with the same global batch ---------------------------------
for split in "1 1" "2 2"; do
  read -r per A <<<"$split"
  R=$((2 * per))
  config "$WORK/m$R.json" mpi 2 "$R" "$A" 2
  config "$WORK/o$R.json" ipu-emulated 1 "$R" "$A" 2
  "${T[@]}" "$PT" mpirun --config "$WORK/m$R.json" -- train "$WORK/d.ptd" --config "$WORK/m$R.json" \
    --out "$WORK/m$R" >"$WORK/m$R.out" 2>"$WORK/m$R.err"
  expect "2 ranks x $per replica(s) x A=$A: the run succeeds" "$?" 0
  "$PT" train "$WORK/d.ptd" --config "$WORK/o$R.json" --out "$WORK/o$R" >"$WORK/o$R.out" 2>"$WORK/o$R.err"
  expect "1 process x $R replicas x A=$A: the run succeeds" "$?" 0
  check "... the same model, byte for byte" same_bytes "$WORK/m$R/model.safetensors" "$WORK/o$R/model.safetensors"
  expect "... the same loss at every step" "$(losses "$WORK/m$R.out")" "$(losses "$WORK/o$R.out")"
  expect "... rank 0 alone prints (one line per step)" "$(count '"kind":"step"' "$WORK/m$R.out")" \
    "$(count '"kind":"step"' "$WORK/o$R.out")"
  expect "... two epochs" "$(jget "$WORK/m$R/result.json" 'j["epochs"]')" 2
  [ -s "$WORK/m$R/model.safetensors" ] || cat "$WORK/m$R.err"
done
check "the step losses are real numbers" test -n "$(losses "$WORK/m2.out")"

# --- ZeRO over ranks: the cross-rank reduce-scatter of 2 buffers is a + b, so every
# stage gives the bits of stage 0 (backend_zero.h, mpi_backend.h) --------------------------------
# zero_like_one NAME DATA REF WHAT: the job $WORK/NAME.json on 2 ranks trains the model and
# losses of the one stage-0 process whose run is $WORK/REF (.out, /model.safetensors)
zero_like_one() {
  "${T[@]}" "$PT" mpirun --config "$WORK/$1.json" -- train "$WORK/$2" --config "$WORK/$1.json" \
    --out "$WORK/$1" >"$WORK/$1.out" 2>"$WORK/$1.err"
  expect "$4: the run succeeds" "$?" 0
  check "... the model of one stage-0 process with 4 replicas, byte for byte" same_bytes \
    "$WORK/$1/model.safetensors" "$WORK/$3/model.safetensors"
  expect "... the same loss at every step" "$(losses "$WORK/$1.out")" "$(losses "$WORK/$3.out")"
  [ -s "$WORK/$1/model.safetensors" ] || cat "$WORK/$1.err"
}
for z in '"zero_stage": 1' '"zero_stage": 2' '"zero_stage": 3' '"zero_stage": 2, "offload_optimizer": true'; do
  tag=$(echo "$z" | tr -dc '0-9a-z')
  config "$WORK/z$tag.json" mpi 2 4 2 2 0.001 "$z"
  zero_like_one "z$tag" d.ptd o4 "2 ranks x 2 replicas x A=2, $z"
done
# resume a stage-3 run from its first checkpoint (every rank's Adam blocks gathered into it)
Z3CK=$(ls "$WORK"/zzerostage3/checkpoints/ckpt-*.safetensors 2>/dev/null | sort -t- -k2 -n | head -1)
check "stage 3 over ranks wrote checkpoints" test -s "$Z3CK"
"${T[@]}" "$PT" mpirun --config "$WORK/zzerostage3.json" -- train "$WORK/d.ptd" --config "$WORK/zzerostage3.json" \
  --out "$WORK/z3r" --resume "$Z3CK" >"$WORK/z3r.out" 2>"$WORK/z3r.err"
expect "... resumed from $(basename "$Z3CK"): the run succeeds" "$?" 0
check "... with the model of the uninterrupted run, byte for byte" same_bytes \
  "$WORK/z3r/model.safetensors" "$WORK/zzerostage3/model.safetensors"

# --- energies and forces: 2 ranks = one process ----------------------------------------------
fconfig() { # FILE KIND RANKS R A [EXTRA_BACKEND_KEYS]
  cat >"$1" <<EOF
{"target": "energy", "model": {"hidden": 16, "filters": 16, "interactions": 2, "gaussians": 12,
 "cutoff": 4.0, "max_neighbors": null}, "batching": {"model_batch_size": 2},
 "training": {"epochs": 2, "log_every": 1, "seed": 5, "lr": 0.002},
 "backend": {"kind": "$2", "ranks": $3, "replication_factor": $4, "gradient_accumulation": $5,
             "threads": 1${6:+, $6}}}
EOF
}
fconfig "$WORK/fm.json" mpi 2 4 2
fconfig "$WORK/fo.json" ipu-emulated 1 4 2
"${T[@]}" "$PT" mpirun --config "$WORK/fm.json" -- train "$WORK/emt.ptd" --config "$WORK/fm.json" \
  --out "$WORK/fm" >"$WORK/fm.out" 2>"$WORK/fm.err"
expect "forces job, 2 ranks x 2 replicas x A=2: the run succeeds" "$?" 0
"$PT" train "$WORK/emt.ptd" --config "$WORK/fo.json" --out "$WORK/fo" >"$WORK/fo.out" 2>"$WORK/fo.err"
expect "forces job, 1 process x 4 replicas x A=2: the run succeeds" "$?" 0
check "... the same model, byte for byte" same_bytes "$WORK/fm/model.safetensors" "$WORK/fo/model.safetensors"
expect "... the same loss at every step" "$(losses "$WORK/fm.out")" "$(losses "$WORK/fo.out")"
fparts() { "$PY" -c 'import json,sys; print(" ".join(repr((j["loss_energy"], j["loss_forces"])) for j in map(json.loads, (l for l in open(sys.argv[1]) if l.startswith("{\"kind\":\"step\"")))))' "$1"; }
expect "... the same energy and force parts at every step" "$(fparts "$WORK/fm.out")" "$(fparts "$WORK/fo.out")"
check "... which are numbers" test -n "$(fparts "$WORK/fm.out")"
expect "... the same test force MAE" "$(jget "$WORK/fm/result.json" 'j["test_forces_mae"]')" \
  "$(jget "$WORK/fo/result.json" 'j["test_forces_mae"]')"
expect "... below the MAE of zero forces" \
  "$(jget "$WORK/fm/result.json" 'j["test_forces_mae"] < j["test_forces_zero_mae"]')" True
[ -s "$WORK/fm/model.safetensors" ] || cat "$WORK/fm.err"
# ZeRO stages 2-3 on a forces job over ranks: the force step's layer events (backend_zero.h)
for z in 2 3; do
  fconfig "$WORK/fz$z.json" mpi 2 4 2 "\"zero_stage\": $z"
  zero_like_one "fz$z" emt.ptd fo "forces job, 2 ranks x 2 replicas x A=2, zero_stage $z"
done

# --- several targets (issue 20): 2 ranks = one process -----------------------------------------
hconfig() { # FILE KIND RANKS R A
  cat >"$1" <<EOF
{"targets": [{"key": "gap"}, {"key": "homo", "weight": 2}, {"key": "lumo", "readout": "mean",
 "normalize": "mean_std"}], "model": {"hidden": 16, "filters": 16, "interactions": 1, "gaussians": 10},
 "batching": {"model_batch_size": 2}, "training": {"epochs": 2, "log_every": 1, "seed": 5},
 "backend": {"kind": "$2", "ranks": $3, "replication_factor": $4, "gradient_accumulation": $5,
             "threads": 1}}
EOF
}
hconfig "$WORK/hm.json" mpi 2 4 2
hconfig "$WORK/ho.json" ipu-emulated 1 4 2
"${T[@]}" "$PT" mpirun --config "$WORK/hm.json" -- train "$WORK/d.ptd" --config "$WORK/hm.json" \
  --out "$WORK/hm" >"$WORK/hm.out" 2>"$WORK/hm.err"
expect "3-target job, 2 ranks x 2 replicas x A=2: the run succeeds" "$?" 0
"$PT" train "$WORK/d.ptd" --config "$WORK/ho.json" --out "$WORK/ho" >"$WORK/ho.out" 2>"$WORK/ho.err"
expect "3-target job, 1 process x 4 replicas x A=2: the run succeeds" "$?" 0
check "... the same model, byte for byte" same_bytes "$WORK/hm/model.safetensors" "$WORK/ho/model.safetensors"
expect "... the same weighted loss at every step" "$(losses "$WORK/hm.out")" "$(losses "$WORK/ho.out")"
expect "... the same test errors of every target" "$(jget "$WORK/hm/result.json" 'j["heads"]')" \
  "$(jget "$WORK/ho/result.json" 'j["heads"]')"
[ -s "$WORK/hm/model.safetensors" ] || cat "$WORK/hm.err"

# --- packtrain train starts its ranks itself (no mpirun by hand) -------------------------
"${T[@]}" "$PT" train "$WORK/d.ptd" --config "$WORK/m2.json" --out "$WORK/self2" \
  >"$WORK/self2.out" 2>"$WORK/self2.err"
expect "train with ranks 2, no launcher: the run succeeds" "$?" 0
expect_match "... saying it starts the ranks" "$(cat "$WORK/self2.err")" 'starting 2 ranks'
expect_match "... which run as an MPI world of 2" "$(cat "$WORK/self2.err")" 'mpi: 2 ranks \(2 on this host\)'
expect "... one closing summary (rank 0 alone says it)" "$(count ' epochs in ' "$WORK/self2.err")" 1
check "... the model of the one-process run, byte for byte" same_bytes "$WORK/self2/model.safetensors" "$WORK/o2/model.safetensors"
expect "... one metrics line per step (rank 0 alone prints)" "$(count '"kind":"step"' "$WORK/self2.out")" \
  "$(count '"kind":"step"' "$WORK/o2.out")"

# --- the worker under the launcher, as the server runs it --------------------------------
config "$WORK/w.json" mpi 2 2 1 2
"${T[@]}" "$PT" mpirun --protocol --config "$WORK/w.json" -- "$PT" worker --job j1 --config "$WORK/w.json" \
  --data "$WORK/d.ptd" --out "$WORK/w" >"$WORK/w.out" 2>"$WORK/w.err"
expect "worker under mpirun: exit 0" "$?" 0
expect "... exactly one done line" "$(count '"kind":"done"' "$WORK/w.out")" 1
check "... the model of the one-process run" same_bytes "$WORK/w/model.safetensors" "$WORK/o2/model.safetensors"

# SIGTERM: every rank stops after the same step, rank 0 checkpoints, nothing is left
config "$WORK/long.json" mpi 2 2 1 60
config "$WORK/long1.json" ipu-emulated 1 2 1 60
"$PT" mpirun --protocol --config "$WORK/long.json" -- "$PT" worker --job j2 --config "$WORK/long.json" \
  --data "$WORK/d.ptd" --out "$WORK/s" >"$WORK/s.out" 2>"$WORK/s.err" &
LAUNCHER=$!
for _ in $(seq 1 300); do
  [ "$(count '"kind":"step"' "$WORK/s.out" 2>/dev/null)" -ge 3 ] && break
  sleep 0.05
done
kill -TERM "$LAUNCHER"
wait "$LAUNCHER"
expect "SIGTERM to the launcher: exit 0" "$?" 0
expect "... no done line (stopped, not finished)" "$(count '"kind":"done"' "$WORK/s.out")" 0
CKPT=$(grep '"kind":"checkpoint"' "$WORK/s.out" | tail -1 | "$PY" -c 'import json,sys; print(json.loads(sys.stdin.read())["path"])')
check "... a checkpoint line naming a file" test -s "$WORK/s/$CKPT" -o -s "$CKPT"
sleep 0.3
expect "... no rank left running" "$(pgrep -f "$WORK/s " | wc -l)" 0
[ -s "$CKPT" ] || CKPT="$WORK/s/$CKPT"
"${T[@]}" "$PT" mpirun --protocol --config "$WORK/long.json" -- "$PT" worker --job j2 --config "$WORK/long.json" \
  --data "$WORK/d.ptd" --out "$WORK/s" --resume "$CKPT" >"$WORK/r.out" 2>"$WORK/r.err"
expect "resumed under mpirun: exit 0 with a done line" "$?:$(count '"kind":"done"' "$WORK/r.out")" "0:1"
"$PT" train "$WORK/d.ptd" --config "$WORK/long1.json" --out "$WORK/l1" >/dev/null 2>&1
check "... the model of an uninterrupted one-process run" same_bytes "$WORK/s/model.safetensors" "$WORK/l1/model.safetensors"

# --- failures end the job -------------------------------------------------------------------
"${T[@]}" "${MPIRUN[@]}" -np 1 "$PT" train "$WORK/d.ptd" --config "$WORK/m2.json" --out "$WORK/f1" : \
  -np 1 "$PT" train "$WORK/other.ptd" --config "$WORK/m2.json" --out "$WORK/f1" >/dev/null 2>"$WORK/f1.err"
rc=$?
check "ranks on different datasets: the job fails (exit $rc, not a timeout)" test "$rc" -ne 0 -a "$rc" -ne 124
expect_match "... saying why" "$(cat "$WORK/f1.err")" "the ranks disagree on the dataset"

config "$WORK/lr.json" mpi 2 2 1 2 0.01
"${T[@]}" "${MPIRUN[@]}" -np 1 "$PT" train "$WORK/d.ptd" --config "$WORK/m2.json" --out "$WORK/f2" : \
  -np 1 "$PT" train "$WORK/d.ptd" --config "$WORK/lr.json" --out "$WORK/f2" >/dev/null 2>"$WORK/f2.err"
rc=$?
check "ranks whose parameters diverge: the job fails (exit $rc)" test "$rc" -ne 0 -a "$rc" -ne 124
expect_match "... at the next check" "$(cat "$WORK/f2.err")" "parameters diverged across MPI ranks before step 2"

"${T[@]}" "$PT" mpirun --ranks 3 -- train "$WORK/d.ptd" --config "$WORK/m2.json" --out "$WORK/f3" \
  >/dev/null 2>"$WORK/f3.err"
rc=$?
check "a world of 3 for ranks 2: the job fails (exit $rc)" test "$rc" -ne 0 -a "$rc" -ne 124
expect_match "... saying why" "$(cat "$WORK/f3.err")" "backend.ranks: is 2 but this process runs in an MPI world of 3 processes"

# --- the launcher's refusals (nothing is started) --------------------------------------------
cli() { "$PT" mpirun "$@" >"$WORK/cli.out" 2>"$WORK/cli.err"; echo "$?:$(head -c 300 "$WORK/cli.err")"; }
config "$WORK/one.json" ipu-emulated 1 2 1 2
expect_match "mpirun without --config or --ranks" "$(cli -- train x)" "^2:.*give --config JOB.json or --ranks N"
expect_match "mpirun --ranks 0" "$(cli --ranks 0 -- train x)" "^2:.*--ranks must be an integer from 1 to 65536, got '0'"
expect_match "mpirun without a command" "$(cli --ranks 2)" "^2:.*missing '-- COMMAND"
expect_match "mpirun --ranks=N --print (getopt_long; what follows -- is the command's)" \
  "$("$PT" mpirun --ranks=3 --print -- train x --ranks 9)" " -np 3 .* train x --ranks 9$"
expect_match "mpirun on a job that is not mpi" "$(cli --config "$WORK/one.json" -- train x)" \
  "^1:.*backend.kind: is not \"mpi\""
expect_match "mpirun with a host that is an option" "$(cli --ranks 2 --host -oX -- train x)" \
  "^1:.*\"-oX\" is not a host name"
expect_match "mpirun without mpirun" "$(PACKTRAIN_MPIRUN=/nonexistent/mpirun cli --protocol --ranks 2 -- train x)" \
  "^1:.*needs /nonexistent/mpirun, not found"
expect "... told on stdout as a protocol error line (--protocol)" \
  "$(jget "$WORK/cli.out" 'j["kind"] + " " + str("not found" in j["message"])')" "error True"

# --- the server -------------------------------------------------------------------------------
D=$WORK/server
TOKEN=$("$PT" token create --owner ci --data-dir "$D" 2>/dev/null)
AUTH=(-H "Authorization: Bearer $TOKEN")
if start_server "$D" --auth on --workers 1; then
  config "$WORK/job.json" mpi 2 2 1 2
  JOB=$("$PT" submit --server "$BASE" --token "$TOKEN" --dataset tests/data/api_demo_qm9_64.extxyz \
    --config "$WORK/job.json" --wait 2>"$WORK/submit.err")
  expect "server: an mpi job succeeds" "$?" 0
  expect_match "... and says so" "$(tail -1 "$WORK/submit.err")" "succeeded"
  check "... its model is on disk" test -s "$D/jobs/$JOB/model.safetensors"
  expect_match "... on 2 ranks" "$(cat "$D/jobs/$JOB/worker.log" 2>/dev/null)" "mpi: 2 ranks \\(2 on this host\\), 1 replica"
  expect_match "... which the worker started itself" "$(cat "$D/jobs/$JOB/worker.log" 2>/dev/null)" \
    "starting 2 MPI ranks"
  # ranks alone: one replica per rank (replication_factor "auto")
  printf '{"model":{"hidden":16,"filters":16,"interactions":1,"gaussians":8},"training":{"epochs":1},
           "backend":{"kind":"mpi","ranks":2,"threads":1}}' >"$WORK/ranks.json"
  JOB=$("$PT" submit --server "$BASE" --token "$TOKEN" --dataset tests/data/api_demo_qm9_64.extxyz \
    --config "$WORK/ranks.json" --wait 2>"$WORK/ranks.err")
  expect "server: {\"kind\":\"mpi\",\"ranks\":2} alone is accepted and succeeds" "$?" 0
  expect_match "... with one replica per rank" "$(cat "$D/jobs/$JOB/worker.log" 2>/dev/null)" \
    "mpi: 2 ranks \\(2 on this host\\), 1 replica and 1 BLAS thread per rank"
  req GET "/v1/jobs/$JOB" "${AUTH[@]}"
  expect "... stored with replication_factor auto" "$(jget "$BODY" 'j["config"]["backend"]["replication_factor"]')" auto
  config "$WORK/bad.json" mpi 2 3 1 2
  "$PT" submit --server "$BASE" --token "$TOKEN" --dataset tests/data/api_demo_qm9_64.extxyz \
    --config "$WORK/bad.json" >/dev/null 2>"$WORK/bad.err"
  check "server: replication_factor 3 over 2 ranks is refused" test "$?" -ne 0
  expect_match "... at submission, with the reason" "$(cat "$WORK/bad.err")" "must be a multiple of backend.ranks \\(2\\)"
  stop_server "$SERVER_PID" TERM
else
  not_ok "server did not start"
fi

sleep 0.2
expect "no process of this suite left running" "$(pgrep -f "$WORK/" | wc -l)" 0
finish
