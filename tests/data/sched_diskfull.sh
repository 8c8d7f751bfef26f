#!/bin/sh
# sched_diskfull.sh — test double for the training worker (used by
# test_scheduler): a disk that fills up under a job.  OUT is DATA/jobs/ID.
# Without --resume: steps 1..3, a checkpoint at step 3 in OUT/ckpt-3, then
# the disk is full: it creates DATA/full (the test's room check reads it),
# reports the error of a checkpoint write that found no space, and exits 1.
# With --resume: steps 4..8 and done, unless DATA/always exists: then the
# same error again.
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT=$2; shift 2 ;;
    --resume) RESUME=$2; shift 2 ;;
    *) shift 2 ;;
  esac
done
DATA=$(dirname "$(dirname "$OUT")")
full() {
  : >"$DATA/full"
  printf '{"kind":"error","message":"%s/ckpt-%d.partial: cannot write: No space left on device"}\n' "$OUT" "$1"
  exit 1
}
if [ -z "$RESUME" ]; then
  for s in 1 2 3; do printf '{"kind":"step","step":%d,"epoch":0,"loss":10%d}\n' $s $s; done
  mkdir -p "$OUT/ckpt-3"
  printf '{"kind":"checkpoint","step":3,"epoch":0,"path":"%s/ckpt-3"}\n' "$OUT"
  printf '{"kind":"step","step":4,"epoch":0,"loss":104}\n'
  full 4
fi
[ -e "$DATA/always" ] && full 9
echo "sched_diskfull: resumed from $RESUME" >&2
for s in 4 5 6 7 8; do printf '{"kind":"step","step":%d,"epoch":0,"loss":0.%d}\n' $s $s; done
printf '{"kind":"epoch","step":8,"epoch":0,"train_loss":0.6,"val_mae":0.5}\n'
printf '{"kind":"done","best_val_mae":0.5}\n'
exit 0
