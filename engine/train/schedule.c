/* schedule.c — constant / ReduceLROnPlateau / warm-up + cosine learning rates
 * and early stopping; see schedule.h. */
#include "engine/train/schedule.h"

#include <math.h>
#include <string.h>

/* torch's ReduceLROnPlateau ignores reductions smaller than this */
#define PT_PLATEAU_EPS 1e-8

pt_schedule_params pt_schedule_defaults(pt_schedule_kind kind, double lr)
{
    pt_schedule_params p = {
        .kind = kind,
        .lr = lr,
        .min_lr = kind == PT_SCHEDULE_PLATEAU ? 1e-6 : 0.0,
        .factor = 0.5,
        .patience = 25,
        .threshold = 1e-4,
        .cooldown = 0,
        .warmup_steps = 0,
        .total_steps = 0,
    };
    return p;
}

/* Cosine with linear warm-up, for the step with 0-based index s:
 *   s < W:  lr * (s+1) / W                 (reaches lr on the last warm-up step)
 *   else:   min + (lr - min) * (1 + cos(pi * min(1, (s-W)/(S-W)))) / 2
 * With S <= W there is nothing to anneal and the rate stays at lr. */
static double cosine_lr(const pt_schedule_params *p, long s)
{
    if (s < p->warmup_steps) return p->lr * (double)(s + 1) / (double)p->warmup_steps;
    long span = p->total_steps - p->warmup_steps;
    if (span <= 0) return p->lr;
    double progress = (double)(s - p->warmup_steps) / (double)span;
    if (progress > 1.0) progress = 1.0;
    return p->min_lr + (p->lr - p->min_lr) * 0.5 * (1.0 + cos(M_PI * progress));
}

void pt_schedule_init(pt_schedule *s, const pt_schedule_params *params)
{
    memset(s, 0, sizeof(*s));
    s->p = *params;
    s->best = INFINITY;
    s->lr = s->p.kind == PT_SCHEDULE_COSINE ? cosine_lr(&s->p, 0) : s->p.lr;
}

double pt_schedule_lr(const pt_schedule *s)
{
    return s->lr;
}

void pt_schedule_step(pt_schedule *s)
{
    s->step++;
    if (s->p.kind == PT_SCHEDULE_COSINE) s->lr = cosine_lr(&s->p, s->step);
}

/* torch "rel" mode for minimisation: an improvement must beat the best by a
 * fraction `threshold` of it.  A NaN loss is never an improvement. */
static int is_better(double loss, double best, double threshold)
{
    return loss < best * (1.0 - threshold);
}

/* ReduceLROnPlateau.step(metrics), mode "min", one parameter group. */
int pt_schedule_epoch_end(pt_schedule *s, double val_loss)
{
    if (s->p.kind != PT_SCHEDULE_PLATEAU) return 0;
    if (is_better(val_loss, s->best, s->p.threshold)) {
        s->best = val_loss;
        s->num_bad_epochs = 0;
    } else {
        s->num_bad_epochs++;
    }
    if (s->cooldown_counter > 0) {
        s->cooldown_counter--;
        s->num_bad_epochs = 0;
    }
    if (s->num_bad_epochs <= s->p.patience) return 0;

    double new_lr = fmax(s->lr * s->p.factor, s->p.min_lr);
    s->cooldown_counter = s->p.cooldown;
    s->num_bad_epochs = 0;
    if (s->lr - new_lr <= PT_PLATEAU_EPS) return 0;
    s->lr = new_lr;
    s->reductions++;
    return 1;
}

void pt_early_stop_init(pt_early_stop *es, int patience, double threshold)
{
    es->patience = patience;
    es->threshold = threshold;
    es->best = INFINITY;
    es->bad_epochs = 0;
}

int pt_early_stop_update(pt_early_stop *es, double val_loss)
{
    if (is_better(val_loss, es->best, es->threshold)) {
        es->best = val_loss;
        es->bad_epochs = 0;
    } else {
        es->bad_epochs++;
    }
    return es->patience > 0 && es->bad_epochs >= es->patience;
}
