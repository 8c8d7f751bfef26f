#!/bin/sh
# sched_graceful.sh — test double for the training worker (used by test_scheduler):
# reports a step every 50 ms until SIGTERM; on SIGTERM it reports a checkpoint
# of its last step (as a real worker does) and exits 0.  With
# SCHED_TEST_DONE_ON_TERM=1 it reports done instead, as a worker whose last
# step coincided with the signal.
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT=$2; shift 2 ;;
    --resume) shift 2 ;;
    *) shift 2 ;;
  esac
done
s=0
on_term() {
  echo "sched_graceful: got SIGTERM at step $s" >&2
  mkdir -p "$OUT/checkpoint" && echo "$s" > "$OUT/checkpoint/step"
  printf '{"kind":"checkpoint","step":%d,"epoch":0,"path":"%s/checkpoint"}\n' "$s" "$OUT"
  if [ "${SCHED_TEST_DONE_ON_TERM:-0}" = 1 ]; then printf '{"kind":"done"}\n'; fi
  exit 0
}
trap on_term TERM
while :; do
  s=$((s + 1))
  printf '{"kind":"step","step":%d,"epoch":0,"loss":1.0}\n' "$s"
  sleep 0.05
done
