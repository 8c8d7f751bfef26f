#!/bin/sh
# sched_hog.sh — test double for the training worker (test_api_hardening.sh):
# reports one step, then lets its resident memory run away, 32 MiB every
# 0.1 s up to 2 GiB, every page written (as a job whose memory grows out of
# hand would), and then waits.  The scheduler's memory watch must kill it.
printf '{"kind":"step","step":1,"epoch":0,"loss":1.0}\n'
exec /usr/bin/python3 -c '
import time
chunks = []
for i in range(64):
    chunks.append(b"\x01" * (32 << 20))
    time.sleep(0.1)
time.sleep(120)
'
