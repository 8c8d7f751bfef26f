/* schedule.h — learning-rate schedules and early stopping.
 *
 * Three policies, all queried through pt_schedule_lr() before each optimizer
 * step:
 *   constant  lr for every step;
 *   plateau   torch.optim.lr_scheduler.ReduceLROnPlateau (mode "min",
 *             threshold_mode "rel") fed the validation loss once per epoch,
 *             with SchNetPack's defaults factor 0.5, patience 25, min_lr 1e-6;
 *   cosine    linear warm-up over warmup_steps optimizer steps to lr, then a
 *             half cosine down to min_lr at total_steps.
 * Early stopping ends training after `patience` epochs without a validation
 * improvement (same relative threshold as plateau). */
#ifndef PT_SCHEDULE_H
#define PT_SCHEDULE_H

typedef enum pt_schedule_kind {
    PT_SCHEDULE_CONSTANT = 0,
    PT_SCHEDULE_PLATEAU = 1,
    PT_SCHEDULE_COSINE = 2
} pt_schedule_kind;

typedef struct pt_schedule_params {
    pt_schedule_kind kind;
    double lr;            /* base learning rate */
    double min_lr;        /* floor (plateau) / end value (cosine) */
    /* plateau */
    double factor;        /* new_lr = lr * factor, in (0, 1) */
    int patience;         /* epochs without improvement tolerated */
    double threshold;     /* relative: better means < best * (1 - threshold) */
    int cooldown;         /* epochs ignored after a reduction */
    /* cosine */
    long warmup_steps;    /* steps of linear warm-up, may be 0 */
    long total_steps;     /* step at which the cosine reaches min_lr */
} pt_schedule_params;

typedef struct pt_schedule {
    pt_schedule_params p;
    double lr;            /* rate of the next step */
    long step;            /* optimizer steps taken */
    /* plateau state */
    double best;
    int num_bad_epochs;
    int cooldown_counter;
    int reductions;
} pt_schedule;

/* Defaults for `kind` at base rate lr: plateau factor 0.5, patience 25,
 * min_lr 1e-6, threshold 1e-4, cooldown 0; cosine warmup 0, min_lr 0. */
pt_schedule_params pt_schedule_defaults(pt_schedule_kind kind, double lr);

void pt_schedule_init(pt_schedule *s, const pt_schedule_params *params);

/* Learning rate for the next optimizer step. */
double pt_schedule_lr(const pt_schedule *s);

/* Call after every optimizer step (advances the cosine). */
void pt_schedule_step(pt_schedule *s);

/* Call once per epoch with the validation loss.  Returns 1 when the plateau
 * policy lowered the rate, else 0. */
int pt_schedule_epoch_end(pt_schedule *s, double val_loss);

/* Early stopping on validation loss; patience <= 0 never stops. */
typedef struct pt_early_stop {
    int patience;
    double threshold;     /* relative, as in plateau */
    double best;
    int bad_epochs;
} pt_early_stop;

void pt_early_stop_init(pt_early_stop *es, int patience, double threshold);

/* Feeds one epoch's validation loss; returns 1 when training should stop. */
int pt_early_stop_update(pt_early_stop *es, double val_loss);

#endif
