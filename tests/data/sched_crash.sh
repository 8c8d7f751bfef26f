#!/bin/sh
# sched_crash.sh — test double for the training worker (used by test_scheduler):
# reports a step and then dies of SIGSEGV, every time it runs.
ulimit -c 0
printf '{"kind":"step","step":1,"epoch":0,"loss":1.0}\n'
kill -SEGV $$
