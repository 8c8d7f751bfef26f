#!/bin/sh
# sched_fail.sh — test double for the training worker (used by test_scheduler):
# reports two steps, then an error line, and exits 1.
printf '{"kind":"step","step":1,"epoch":0,"loss":1.0}\n'
printf '{"kind":"step","step":2,"epoch":0,"loss":0.9}\n'
printf '{"kind":"error","message":"dataset too small: 3 structures"}\n'
exit 1
