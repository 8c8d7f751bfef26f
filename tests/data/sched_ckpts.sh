#!/bin/sh
# sched_ckpts.sh — test double for the training worker (used by test_scheduler):
# writes a distinct checkpoint file every 10 steps (ckpt-10 … ckpt-50) and
# reports each, as the real worker does, then succeeds.  The scheduler must
# delete each superseded checkpoint once the newer one is recorded.
while [ $# -gt 0 ]; do
  case "$1" in
    --job|--config|--data|--resume) shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    *) echo "sched_ckpts: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUT/checkpoints"
s=1
while [ "$s" -le 50 ]; do
  printf '{"kind":"step","step":%d,"epoch":1,"loss":1.5,"lr":0.001,"graphs_per_s":100,"seconds":0.01}\n' "$s"
  if [ $((s % 10)) -eq 0 ]; then
    echo "$s" > "$OUT/checkpoints/ckpt-$s"
    printf '{"kind":"checkpoint","step":%d,"epoch":1,"path":"checkpoints/ckpt-%d"}\n' "$s" "$s"
  fi
  s=$((s + 1))
done
printf '{"kind":"done","best_val_mae":0.5,"model":"%s/model.safetensors"}\n' "$OUT"
exit 0
