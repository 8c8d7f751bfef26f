/* train_fixture.h — what the training tests share (test_train.c,
 * test_train_heads.c, test_train_atom_heads.c): a dataset ingested into a
 * fresh temporary directory, a recorder of the metric lines a run reports
 * (and a stop after N polls), one training run that says why it failed, and
 * the global-batch invariance check every kind of job must pass.
 * Header-only; include cmocka.h first. */
#ifndef PT_TRAIN_FIXTURE_H
#define PT_TRAIN_FIXTURE_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/run/run.h"
#include "engine/train/config.h"
#include "engine/train/train.h"
#include "tests/unit/tmp_fixture.h"

#define TRF_MAX_LINES 512

/* Makes the mkdtemp pattern `dir` a directory and opens `src` ingested into
 * it as data.ptd.  0, or -1. */
static inline int trf_open_ingested(char *dir, const char *src, pt_dataset *ds)
{
    if (!mkdtemp(dir)) return -1;
    char ptd[256], err[512];
    snprintf(ptd, sizeof ptd, "%s/data.ptd", dir);
    if (tfx_ingest(src, ptd) != 0) return -1;
    return pt_dataset_open(ds, ptd, err, sizeof err);
}

typedef struct trf_recorder {
    int n;
    pt_train_metrics m[TRF_MAX_LINES];
    char json[TRF_MAX_LINES][1024];
    int stop_after;          /* trf_stop_when_told answers 1 from this poll on; 0 = never */
    int polls;
} trf_recorder;

static inline void trf_record(void *user, const pt_train_metrics *m, const char *json)
{
    trf_recorder *r = user;
    if (r->n >= TRF_MAX_LINES) return;
    r->m[r->n] = *m;
    snprintf(r->json[r->n++], sizeof r->json[0], "%s", json);
}

static inline int trf_stop_when_told(void *user)
{
    trf_recorder *r = user;
    return r->stop_after && ++r->polls >= r->stop_after;
}

/* pt_run_train with the recorder (lines, stop); the first error is printed
 * when it fails. */
static inline int trf_run(const pt_job_config *cfg, const pt_dataset *ds, const char *out,
                          trf_recorder *rec, pt_train_result *res)
{
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_train_options opt = {.user = rec, .on_metrics = trf_record, .should_stop = trf_stop_when_told};
    int rc = pt_run_train(cfg, ds, out, &opt, res, &errs);
    if (rc != 0) {
        char buf[600];
        pt_errors_first(&errs, buf, sizeof buf);
        fprintf(stderr, "training failed: %s\n", buf);
    }
    pt_errors_close(&errs);
    return rc;
}

/* R=2 replicas x A=2 accumulation x b=2 packs consume the same 8 packs per
 * step as R=A=1 with b=8, for 6 steps of `base`: the same lines, every loss
 * equal up to float summation order (so every term, an atom head's too, is
 * normalised by the global batch's counts, not a micro-batch's). */
static inline void trf_check_global_batch_invariance(const pt_job_config *base, const pt_dataset *ds)
{
    pt_job_config one = *base, split;
    one.training.epochs = 1;
    one.training.max_steps = 6;
    one.training.log_every = 1;
    one.batching.model_batch_size = 8;
    split = one;
    split.batching.model_batch_size = 2;
    split.backend.replication_factor = 2;
    split.backend.gradient_accumulation = 2;
    trf_recorder *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    pt_train_result ra, rb;
    assert_int_equal(trf_run(&one, ds, NULL, a, &ra), 0);
    assert_int_equal(trf_run(&split, ds, NULL, b, &rb), 0);
    assert_int_equal(ra.steps, 6);
    assert_int_equal(rb.steps, 6);
    assert_int_equal(a->n, b->n);
    for (int i = 0; i < a->n; i++) {
        assert_string_equal(a->m[i].kind, b->m[i].kind);
        assert_float_equal(a->m[i].loss, b->m[i].loss, 1e-5 * fabs(a->m[i].loss));
    }
    free(a);
    free(b);
}

#endif
