#!/bin/sh
# sched_hang.sh — test double for the training worker (used by test_scheduler):
# ignores SIGTERM (its sleeping child inherits that) and never finishes, so
# only SIGKILL stops it.
trap '' TERM
printf '{"kind":"progress","progress":0.1,"epoch":0,"step":1}\n'
while :; do sleep 1; done
