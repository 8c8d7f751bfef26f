#!/bin/sh
# sched_garbage.sh — test double for the training worker (used by test_scheduler):
# mixes malformed stdout lines (not JSON, missing fields, unknown kind, one
# line over the 1 MiB limit, blank lines) with three valid steps and done.
echo "hello from a print statement"
printf '{"kind":"step","step":1,"epoch":0,"loss":1.0}\n'
printf '{"kind":"step"}\n'
printf '\n'
printf '{"kind":"teleport","step":2}\n'
printf '{"kind":"step","step":2,"epoch":0,"loss":0.5}\n'
head -c 1100000 /dev/zero | tr '\0' 'x'
printf '\n'
printf '{"kind":"step","step":3,"epoch":"zero","loss":0.1}\n'
printf '{"kind":"step","step":3,"epoch":0,"loss":0.25}\n'
printf '{"kind":"done"}'
exit 0
