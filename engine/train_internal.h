/* train_internal.h — pieces shared by train.c and train_engine.c (not part
 * of the engine's public API): batch set-up and fill from packs, and the
 * evaluation pass. */
#ifndef PT_TRAIN_INTERNAL_H
#define PT_TRAIN_INTERNAL_H

#include "engine/train.h"

/* A batch of d->micro_packs packs of the given per-pack limits
 * (train_batch.c).  Returns 0, or -1 with errs filled. */
int pt_train_batch_init(pt_batch *b, const pt_train_data *d, pt_pack_limits limits,
                        pt_errors *errs);
void pt_train_batch_close(pt_batch *b);

/* Fills b with packs ids[0..n) of `packs` (n <= the batch's packs; the rest
 * is padding) in engine/batch.h's layout, targets in dataset units.  A pack
 * over the batch's limits is an error, never an overflow.  No allocation. */
int pt_train_fill(pt_batch *b, const pt_train_data *d, const pt_packs *packs,
                  const uint32_t *ids, uint32_t n, pt_errors *errs);

void pt_step_stats_add_batch(pt_step_stats *st, const pt_batch *b);

typedef struct pt_eval_result {
    int64_t n;             /* real graphs evaluated */
    double mae, rmse, mse; /* target units; NaN when n = 0 */
} pt_eval_result;

typedef struct pt_evaluator {
    const pt_train_data *d;
    pt_batch batch;
    pt_schnet_acts acts;
    uint32_t *ids;         /* [micro_packs] scratch */
} pt_evaluator;

int pt_evaluator_init(pt_evaluator *ev, const pt_train_data *d, pt_pack_limits limits,
                      pt_errors *errs);
void pt_evaluator_close(pt_evaluator *ev);

/* Forward over every pack of `packs` with the model's current parameters. */
int pt_evaluate(pt_evaluator *ev, const pt_packs *packs, pt_eval_result *out, pt_errors *errs);

#endif
