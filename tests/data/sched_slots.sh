#!/bin/sh
# sched_slots.sh — test double for the training worker (used by test_scheduler):
# works for 0.3 s (one step line), then succeeds.
printf '{"kind":"step","step":1,"epoch":0,"loss":1.0}\n'
sleep 0.3
printf '{"kind":"done"}\n'
exit 0
