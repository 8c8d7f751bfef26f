/* worker_proto.h — the JSON-lines protocol a training worker speaks on stdout.
 *
 * One JSON object per line, told apart by "kind":
 *   step        {"kind":"step","step":N,"epoch":E,"loss":x,"lr":x,"graphs_per_s":x,
 *                "nodes_per_s":x,"padding_fraction":x,"seconds":x,
 *                optional "mae" and the phase times of engine/core/phase.h (mean seconds
 *                per step): "phase_io_s","phase_forward_s","phase_backward_s",
 *                "phase_allreduce_s","phase_optimizer_s","phase_other_s", and a forces
 *                job's loss parts "loss_energy","loss_forces","loss_stress"}
 *   epoch       {"kind":"epoch","step":N,"epoch":E,"train_loss":x,"val_mae":x,
 *                "val_rmse":x,"seconds":x,"graphs_per_s":x, optional "train_mae","val_loss",
 *                and a forces job's "loss_energy","loss_forces","loss_stress",
 *                "val_forces_mae","val_forces_rmse","val_stress_mae","val_stress_rmse"}
 *   progress    {"kind":"progress","progress":0..1,"epoch":E,"step":N}
 *   checkpoint  {"kind":"checkpoint","step":N,"epoch":E,"path":"..."}
 *   done        {"kind":"done","best_val_mae":x,"model":"path", optional the run's
 *                result: "best_epoch","best_val_rmse","test_mae","test_rmse" and a
 *                forces job's "best_val_forces_mae","best_val_forces_rmse",
 *                "test_forces_mae","test_forces_rmse","test_forces_zero_mae",
 *                "best_val_stress_mae","test_stress_mae","test_stress_rmse"}
 *                then exit 0
 *   error       {"kind":"error","message":"..."}                      then exit 1
 *
 * Required: "kind"; "step" and "epoch" (integers >= 0) on step, epoch,
 * progress and checkpoint lines; "loss" on step lines, "train_loss" on epoch
 * lines, "progress" on progress lines, "path" on checkpoint lines, "message"
 * on error lines.  Every other listed field is optional, but when present it
 * must have the right type: a number or null (null = no value), rates,
 * durations and errors >= 0, padding_fraction within [0, 1].  Keys the protocol
 * does not list are allowed: on step, epoch and done lines they travel into
 * `extra_json`, so a worker can add a metric without a scheduler change (a
 * done line's extra_json, with best_val_mae, is the job's stored result); on
 * other lines they are ignored.  An error message longer than the store's reason column is
 * truncated rather than rejected, since it is the job's failure reason.
 *
 * The parser is pure (no I/O, no globals): the scheduler calls it per line
 * and logs whatever it rejects into the job's worker.log. */
#ifndef PT_WORKER_PROTO_H
#define PT_WORKER_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

/* Longest line the scheduler buffers; longer lines are rejected. */
#define PT_WORKER_LINE_MAX (1024 * 1024)

typedef enum pt_worker_msg_kind {
    PT_WORKER_MSG_STEP = 0,
    PT_WORKER_MSG_EPOCH,
    PT_WORKER_MSG_PROGRESS,
    PT_WORKER_MSG_CHECKPOINT,
    PT_WORKER_MSG_DONE,
    PT_WORKER_MSG_ERROR
} pt_worker_msg_kind;

/* Absent or null numbers are NaN; absent integers are -1. */
typedef struct pt_worker_msg {
    pt_worker_msg_kind kind;
    int64_t step, epoch;
    /* step */
    double loss, mae, lr, graphs_per_s;
    /* epoch (graphs_per_s shared with step) */
    double train_loss, train_mae, val_loss, val_mae, seconds;
    /* progress */
    double progress;
    /* done */
    double best_val_mae;
    char path[PT_STORE_PATH_MAX];       /* checkpoint path, or the done line's model */
    char message[PT_STORE_REASON_MAX];  /* error line */
    /* step/epoch/done fields without a store column (nodes_per_s,
     * padding_fraction, phase times, val_rmse, the forces metrics, a done
     * line's result, unknown keys): a compact JSON object (reals to 15
     * significant digits), heap, or NULL when there are none. */
    char *extra_json;
} pt_worker_msg;

/* Parses one line (without its newline; a trailing '\r' is tolerated).
 * Returns 0 and fills *out, or -1 with the reason in err ("field \"step\":
 * must be an integer >= 0, got -3"), *out left cleared. */
int pt_worker_msg_parse(const char *line, size_t len, pt_worker_msg *out, char *err, size_t errlen);
void pt_worker_msg_clear(pt_worker_msg *m);
const char *pt_worker_msg_kind_name(pt_worker_msg_kind kind);

#endif
