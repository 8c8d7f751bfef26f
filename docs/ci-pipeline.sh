#!/usr/bin/env bash
# ci-pipeline.sh — an example CI job: train on a packtrain server, wait for
# the result, keep the model as a build artefact, fail the build when the
# job does not succeed.  Copy it into a pipeline step (GitLab CI, GitHub
# Actions, Jenkins...); tests/integration/test_api_flow.sh runs it as is.
#
#   PACKTRAIN_SERVER=https://trainer.example PACKTRAIN_TOKEN=... \
#     docs/ci-pipeline.sh data/water.extxyz job.json artefacts/
#
# Every step's exit status is packtrain's (see `packtrain submit --help`):
# 0 succeeded, 1 the job failed or stopped, 2 usage, 3 the server could not be
# reached or refused the token, 4 the job was refused, 5 timed out, 130
# interrupted (the job is cancelled then: a cancelled pipeline leaves no job
# running).  The Idempotency-Key makes a retried pipeline step find the job
# its first attempt submitted instead of training twice.
set -euo pipefail
dataset=${1:?usage: ci-pipeline.sh DATASET JOB.json ARTEFACT_DIR}
config=${2:?usage: ci-pipeline.sh DATASET JOB.json ARTEFACT_DIR}
out=${3:?usage: ci-pipeline.sh DATASET JOB.json ARTEFACT_DIR}
: "${PACKTRAIN_SERVER:?set PACKTRAIN_SERVER to the URL of the server}"
key=${CI_PIPELINE_ID:-local}-$(sha256sum "$dataset" "$config" | sha256sum | cut -c1-16)
timeout_s=${PACKTRAIN_TIMEOUT:-3600}
mkdir -p "$out"

# 1. train and wait; the job document is kept for the build's records
status=0
packtrain submit --dataset "$dataset" --config "$config" --name "${CI_JOB_NAME:-ci} $(basename "$dataset")" \
  --idempotency-key "$key" --wait --timeout "$timeout_s" --json >"$out/job.json" || status=$?
if [ "$status" -ne 0 ]; then
  echo "ci-pipeline: training did not succeed (packtrain exit $status)" >&2
  exit "$status"
fi
job=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$out/job.json")

# 2. the model as an artefact, with its test errors next to it
curl -fsS ${PACKTRAIN_TOKEN:+-H "Authorization: Bearer $PACKTRAIN_TOKEN"} \
  -o "$out/model.safetensors" "$PACKTRAIN_SERVER/v1/jobs/$job/model"
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(json.dumps(j.get("result"), indent=2))' \
  "$out/job.json" >"$out/result.json"
echo "ci-pipeline: $job succeeded; model in $out/model.safetensors ($(stat -c %s "$out/model.safetensors") bytes)" >&2
