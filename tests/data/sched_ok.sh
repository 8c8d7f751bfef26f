#!/bin/sh
# sched_ok.sh — test double for the training worker (used by test_scheduler):
# speaks the worker protocol and succeeds.  Emits SCHED_TEST_STEPS step lines
# (default 250), an epoch line and a checkpoint every 100 steps and at the end,
# progress every 50 steps, one line split across two writes, then done.
# Its arguments and config go to stderr (worker.log) for the test to check.
while [ $# -gt 0 ]; do
  case "$1" in
    --job) JOB=$2; shift 2 ;;
    --config) CONFIG=$2; shift 2 ;;
    --data) DATA=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --resume) RESUME=$2; shift 2 ;;
    *) echo "sched_ok: unknown argument $1" >&2; exit 2 ;;
  esac
done
echo "sched_ok: job $JOB data $DATA out $OUT resume ${RESUME:-none}" >&2
echo "sched_ok: config $(cat "$CONFIG")" >&2
n=${SCHED_TEST_STEPS:-250}
first=1
if [ -n "$RESUME" ]; then first=$(( $(cat "$RESUME/step") + 1 )); fi
s=$first
while [ "$s" -le "$n" ]; do
  e=$(( (s - 1) / 100 ))
  if [ "$s" -eq 7 ]; then
    # one line in two writes, with a pause between them
    printf '{"kind":"step","step":%d,"epoch":%d,' "$s" "$e"
    sleep 0.05
    printf '"loss":%d.5,"lr":0.001,"graphs_per_s":100,"nodes_per_s":1800,"padding_fraction":0.1,"seconds":0.01}\n' "$s"
  else
    printf '{"kind":"step","step":%d,"epoch":%d,"loss":%d.5,"lr":0.001,"graphs_per_s":100,"nodes_per_s":1800,"padding_fraction":0.1,"seconds":0.01}\n' "$s" "$e" "$s"
  fi
  if [ $((s % 50)) -eq 0 ]; then
    printf '{"kind":"progress","progress":0.%02d,"epoch":%d,"step":%d}\n' $((s * 100 / n)) "$e" "$s"
  fi
  if [ $((s % 100)) -eq 0 ] || [ "$s" -eq "$n" ]; then
    printf '{"kind":"epoch","step":%d,"epoch":%d,"train_loss":%d.25,"val_mae":0.%d,"val_rmse":0.9,"seconds":1,"graphs_per_s":90}\n' "$s" "$e" "$s" $((9 - e))
    mkdir -p "$OUT/checkpoint" && echo "$s" > "$OUT/checkpoint/step"
    printf '{"kind":"checkpoint","step":%d,"epoch":%d,"path":"checkpoint"}\n' "$s" "$e"
  fi
  s=$((s + 1))
done
printf '{"kind":"progress","progress":1,"epoch":%d,"step":%d}\n' $(( (n - 1) / 100 )) "$n"
printf '{"kind":"done","best_val_mae":0.7,"model":"%s/model.safetensors"}\n' "$OUT"
exit 0
