#!/bin/sh
# sched_escape.sh — test double for the training worker (used by test_scheduler):
# leaves behind a process in a new session (out of reach of the scheduler's
# group kill) that holds stdout open for 10 s, writes its pid to
# OUT/escaped.pid, reports done and exits 0.
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT=$2; shift 2 ;;
    *) shift 2 ;;
  esac
done
setsid sh -c 'echo $$ > "$1/escaped.pid"; exec sleep 10' sh "$OUT" &
while [ ! -s "$OUT/escaped.pid" ]; do sleep 0.01; done
printf '{"kind":"done"}\n'
exit 0
