#!/bin/sh
# sched_silent.sh — test double for the training worker (used by test_scheduler):
# reports one step and exits 0 without the done line (a protocol violation).
printf '{"kind":"step","step":1,"epoch":0,"loss":1.0}\n'
exit 0
