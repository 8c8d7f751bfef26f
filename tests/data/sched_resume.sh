#!/bin/sh
# sched_resume.sh — test double for the training worker (used by test_scheduler).
# Without --resume: steps 1..5 (loss 101..105), a checkpoint at step 3 in
# OUT/ckpt-3, then it dies of SIGSEGV.  With --resume: checks that it is
# OUT/ckpt-3 (else reports an error), then steps 4..8 (loss 0.4..0.8), an
# epoch line and done.  The losses tell the two runs apart in the store.
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT=$2; shift 2 ;;
    --resume) RESUME=$2; shift 2 ;;
    *) shift 2 ;;
  esac
done
if [ -z "$RESUME" ]; then
  for s in 1 2 3; do printf '{"kind":"step","step":%d,"epoch":0,"loss":10%d}\n' $s $s; done
  mkdir -p "$OUT/ckpt-3"
  printf '{"kind":"checkpoint","step":3,"epoch":0,"path":"%s/ckpt-3"}\n' "$OUT"
  for s in 4 5; do printf '{"kind":"step","step":%d,"epoch":0,"loss":10%d}\n' $s $s; done
  ulimit -c 0
  kill -SEGV $$
fi
if [ "$RESUME" != "$OUT/ckpt-3" ]; then
  printf '{"kind":"error","message":"expected --resume %s/ckpt-3, got %s"}\n' "$OUT" "$RESUME"
  exit 1
fi
echo "sched_resume: resumed from $RESUME" >&2
for s in 4 5 6 7 8; do printf '{"kind":"step","step":%d,"epoch":0,"loss":0.%d}\n' $s $s; done
printf '{"kind":"epoch","step":8,"epoch":0,"train_loss":0.6,"val_mae":0.5}\n'
printf '{"kind":"done","best_val_mae":0.5}\n'
exit 0
