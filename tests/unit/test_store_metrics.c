/* test_store_metrics.c — step and epoch series: batch append, duplicate steps
 * and epochs kept once and reported, best validation MAE, downsampling bounds,
 * since_step, NaN/JSON round trips, discard-after-resume, checkpoints, and
 * owner isolation of reads. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/store.h"
#include "store/store_internal.h"
#include "tests/unit/store_fixture.h"

typedef store_fx fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    if (!f || store_fx_init(f, "store_metrics", 1) != 0) return -1;
    if (store_fx_dataset(f->s, "alice", "ready", f->ds) != 0 ||
        store_fx_job(f->s, "alice", f->ds, f->job) != 0)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    store_fx_close(*state);
    free(*state);
    return 0;
}

static pt_store_step_metric step_row(int64_t step)
{
    pt_store_step_metric m = {.step = step, .epoch = step / 100, .loss = 1.0 / (double)(step + 1),
                              .mae = 0.5, .lr = 1e-3, .graphs_per_s = 1000.0 + (double)step};
    return m;
}

static void append_range(fixture *f, int64_t from, int64_t to, size_t expect_new)
{
    size_t n = (size_t)(to - from);
    pt_store_step_metric *rows = calloc(n, sizeof(*rows));
    assert_non_null(rows);
    for (size_t i = 0; i < n; i++) rows[i] = step_row(from + (int64_t)i);
    size_t inserted = 12345;
    assert_int_equal(pt_store_steps_append(f->s, f->job, rows, n, &inserted), PT_STORE_OK);
    assert_int_equal(inserted, expect_new);
    free(rows);
}

static void test_append_and_read_roundtrip(void **state)
{
    fixture *f = *state;
    pt_store_step_metric rows[3] = {step_row(0), step_row(1), step_row(2)};
    rows[1].loss = NAN;
    rows[1].json = "{\"pack_fill\":0.97}";
    rows[2].at = 1234567;
    size_t inserted = 0;
    assert_int_equal(pt_store_steps_append(f->s, f->job, rows, 3, &inserted), PT_STORE_OK);
    assert_int_equal(inserted, 3);
    pt_store_step_series ser;
    assert_int_equal(pt_store_steps_read(f->s, "alice", f->job, -1, 0, &ser), PT_STORE_OK);
    assert_int_equal(ser.n, 3);
    assert_int_equal(ser.total, 3);
    assert_int_equal(ser.items[0].step, 0);
    assert_true(ser.items[0].loss == 1.0);
    assert_true(ser.items[0].graphs_per_s == 1000.0);
    assert_true(ser.items[0].at > 0);
    assert_null(ser.items[0].json);
    assert_true(isnan(ser.items[1].loss));
    assert_string_equal(ser.items[1].json, "{\"pack_fill\":0.97}");
    assert_int_equal(ser.items[2].at, 1234567);
    pt_store_step_series_clear(&ser);

    /* since_step is exclusive. */
    assert_int_equal(pt_store_steps_read(f->s, "alice", f->job, 1, 0, &ser), PT_STORE_OK);
    assert_int_equal(ser.n, 1);
    assert_int_equal(ser.items[0].step, 2);
    assert_int_equal(ser.total, 1);
    pt_store_step_series_clear(&ser);
    assert_int_equal(pt_store_steps_read(f->s, "alice", f->job, 2, 0, &ser), PT_STORE_OK);
    assert_int_equal(ser.n, 0);
    assert_int_equal(ser.total, 0);
    pt_store_step_series_clear(&ser);
}

static void test_duplicate_steps_are_kept_once(void **state)
{
    fixture *f = *state;
    append_range(f, 0, 50, 50);
    /* A resumed worker replays 40..59: only 50..59 are new. */
    pt_store_step_metric replay[20];
    for (int i = 0; i < 20; i++) {
        replay[i] = step_row(40 + i);
        replay[i].loss = 99.0;
    }
    size_t inserted = 0;
    assert_int_equal(pt_store_steps_append(f->s, f->job, replay, 20, &inserted), PT_STORE_OK);
    assert_int_equal(inserted, 10);
    /* A batch that repeats one step inside itself. */
    pt_store_step_metric twice[2] = {step_row(60), step_row(60)};
    assert_int_equal(pt_store_steps_append(f->s, f->job, twice, 2, &inserted), PT_STORE_OK);
    assert_int_equal(inserted, 1);

    pt_store_step_series ser;
    assert_int_equal(pt_store_steps_read(f->s, "alice", f->job, -1, 0, &ser), PT_STORE_OK);
    assert_int_equal(ser.n, 61);
    for (size_t i = 0; i < ser.n; i++) {
        assert_int_equal(ser.items[i].step, (int64_t)i);
        /* first write wins: the replayed 40..49 kept their original loss */
        if (i < 50) assert_true(ser.items[i].loss == 1.0 / (double)(i + 1));
        else if (i < 60) assert_true(ser.items[i].loss == 99.0);
    }
    pt_store_step_series_clear(&ser);
}

static void check_downsample(fixture *f, int64_t since, int max_points, size_t expect_n, int64_t first,
                             int64_t last, int64_t total)
{
    pt_store_step_series ser;
    assert_int_equal(pt_store_steps_read(f->s, "alice", f->job, since, max_points, &ser), PT_STORE_OK);
    /* the middle row of an odd slot may be one a run already kept */
    int odd = expect_n < (size_t)total && (max_points - 2) % 2;
    assert_true(ser.n == expect_n || (odd && ser.n == expect_n - 1));
    assert_int_equal(ser.total, total);
    assert_int_equal(ser.items[0].step, first);
    assert_int_equal(ser.items[ser.n - 1].step, last);
    /* Strictly increasing, and every run of rows represented: no gap passes
     * two runs' length. */
    int64_t runs = (max_points - 2) / 2;
    double run_len = runs > 0 ? ceil((double)(total - 2) / (double)runs) : (double)total;
    for (size_t i = 1; i < ser.n; i++) {
        int64_t gap = ser.items[i].step - ser.items[i - 1].step;
        assert_true(gap >= 1);
        if (ser.n < (size_t)total) assert_true((double)gap <= 2 * run_len + 1e-9);
    }
    pt_store_step_series_clear(&ser);
}

/* The losses fall with the step (1 / (step + 1)), so every run's lowest and
 * highest loss are two different rows and the count is max_points (one less
 * when the middle row of an odd slot is one of them). */
static void test_downsampling_keeps_bounds(void **state)
{
    fixture *f = *state;
    append_range(f, 0, 1000, 1000);
    check_downsample(f, -1, 2, 2, 0, 999, 1000);
    check_downsample(f, -1, 3, 3, 0, 999, 1000);
    check_downsample(f, -1, 7, 7, 0, 999, 1000);
    check_downsample(f, -1, 100, 100, 0, 999, 1000);
    check_downsample(f, -1, 999, 999, 0, 999, 1000);
    check_downsample(f, -1, 1000, 1000, 0, 999, 1000);
    check_downsample(f, -1, 5000, 1000, 0, 999, 1000);
    check_downsample(f, 500, 10, 10, 501, 999, 499);
    check_downsample(f, 997, 2, 2, 998, 999, 2);

    pt_store_step_series ser;
    assert_int_equal(pt_store_steps_read(f->s, "alice", f->job, -1, 1, &ser), PT_STORE_INVALID);
    assert_string_equal(pt_store_errmsg(f->s), "max_points must be within [2, 10000], got 1");
    assert_int_equal(pt_store_steps_read(f->s, "alice", f->job, -1, 10001, &ser), PT_STORE_INVALID);
    assert_int_equal(pt_store_steps_read(f->s, "alice", f->job, -1, -3, &ser), PT_STORE_INVALID);
}

static void test_downsampling_by_rank_across_gaps(void **state)
{
    fixture *f = *state;
    append_range(f, 2000, 2100, 100);
    append_range(f, 3000, 3100, 100);
    pt_store_step_series ser;
    assert_int_equal(pt_store_steps_read(f->s, "alice", f->job, 1999, 10, &ser), PT_STORE_OK);
    assert_int_equal(ser.total, 200);
    assert_int_equal(ser.n, 10);   /* 2 + 4 runs of 2 */
    assert_int_equal(ser.items[0].step, 2000);
    assert_int_equal(ser.items[9].step, 3099);
    /* Runs are by rank, not by step number: the 100 rows on each side of
     * the gap get about half the points each. */
    int before_gap = 0;
    for (size_t i = 0; i < ser.n; i++) before_gap += ser.items[i].step < 2100;
    assert_true(before_gap >= 4 && before_gap <= 6);
    pt_store_step_series_clear(&ser);
}

/* A spike and a dip survive any thinning; so do the first and last rows. */
static void test_downsampling_keeps_extremes(void **state)
{
    fixture *f = *state;
    int64_t n = 10000;
    pt_store_step_metric *rows = calloc((size_t)n, sizeof(*rows));
    assert_non_null(rows);
    for (int64_t i = 0; i < n; i++) {
        rows[i] = step_row(i + 1);
        rows[i].loss = 1.0 + 0.1 * sin((double)i / 50.0);
    }
    rows[5002].loss = 1e3;      /* step 5003: a spike */
    rows[7776].loss = 1e-9;     /* step 7777: the best loss */
    rows[100].loss = NAN;       /* a step without a loss is never an extreme */
    assert_int_equal(pt_store_steps_append(f->s, f->job, rows, (size_t)n, NULL), PT_STORE_OK);
    free(rows);
    int sizes[] = {4, 6, 50, 999};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        pt_store_step_series ser;
        assert_int_equal(pt_store_steps_read(f->s, "alice", f->job, -1, sizes[k], &ser), PT_STORE_OK);
        assert_true(ser.n <= (size_t)sizes[k] && ser.n >= (size_t)sizes[k] - 1);
        assert_int_equal(ser.items[0].step, 1);
        assert_int_equal(ser.items[ser.n - 1].step, n);
        int spike = 0, dip = 0;
        for (size_t i = 0; i < ser.n; i++) {
            spike |= ser.items[i].step == 5003 && ser.items[i].loss == 1e3;
            dip |= ser.items[i].step == 7777;
            if (i) assert_true(ser.items[i].step > ser.items[i - 1].step);
        }
        assert_true(spike);
        assert_true(dip);
        pt_store_step_series_clear(&ser);
    }
}

/* The row choice itself, on hand-made losses. */
static void test_thin_rows(void **state)
{
    (void)state;
    unsigned char keep[12];
    const double flat[12] = {5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5};
    pt_store_thin_rows(flat, 12, 20, keep);   /* fewer rows than points: all */
    for (int i = 0; i < 12; i++) assert_int_equal(keep[i], 1);
    const double v[12] = {3, 9, 1, 4, NAN, 7, 2, 8, 6, 0.5, NAN, 3};
    pt_store_thin_rows(v, 12, 6, keep);       /* 2 runs of 5 interior rows: [1,6) and [6,11) */
    const unsigned char want[12] = {1, 1, 1, 0, 0, 0, 0, 1, 0, 1, 0, 1};
    for (int i = 0; i < 12; i++) assert_int_equal(keep[i], want[i]);
    pt_store_thin_rows(v, 12, 7, keep);       /* the same, and the middle row (6) for the odd slot */
    const unsigned char want_odd[12] = {1, 1, 1, 0, 0, 0, 1, 1, 0, 1, 0, 1};
    for (int i = 0; i < 12; i++) assert_int_equal(keep[i], want_odd[i]);
    const double nan_run[6] = {1, NAN, NAN, NAN, NAN, 2};
    pt_store_thin_rows(nan_run, 6, 4, keep);  /* one run, no finite loss: its first row */
    const unsigned char want2[6] = {1, 1, 0, 0, 0, 1};
    for (int i = 0; i < 6; i++) assert_int_equal(keep[i], want2[i]);
}

static void test_epochs_and_best_mae(void **state)
{
    fixture *f = *state;
    pt_store_epoch_metric e = {.epoch = 0, .step = 99, .train_loss = 2.0, .train_mae = 1.0, .val_loss = 2.5,
                               .val_mae = 0.8, .graphs_per_s = 900, .seconds = 12.5, .json = "{\"x\":1}"};
    int inserted = -1;
    assert_int_equal(pt_store_epoch_append(f->s, f->job, &e, &inserted), PT_STORE_OK);
    assert_int_equal(inserted, 1);
    pt_store_job j;
    assert_int_equal(pt_store_job_get(f->s, "alice", f->job, &j), PT_STORE_OK);
    assert_true(j.best_val_mae == 0.8);
    int64_t v = j.version;
    pt_store_job_clear(&j);

    e.epoch = 1, e.step = 199, e.val_mae = 0.5;
    assert_int_equal(pt_store_epoch_append(f->s, f->job, &e, &inserted), PT_STORE_OK);
    e.epoch = 2, e.step = 299, e.val_mae = 0.6;
    assert_int_equal(pt_store_epoch_append(f->s, f->job, &e, &inserted), PT_STORE_OK);
    e.epoch = 3, e.step = 399, e.val_mae = NAN;
    assert_int_equal(pt_store_epoch_append(f->s, f->job, &e, &inserted), PT_STORE_OK);
    /* A replayed epoch is not stored twice and does not move best_val_mae. */
    e.epoch = 1, e.step = 199, e.val_mae = 0.01;
    assert_int_equal(pt_store_epoch_append(f->s, f->job, &e, &inserted), PT_STORE_OK);
    assert_int_equal(inserted, 0);
    assert_int_equal(pt_store_job_get(f->s, "alice", f->job, &j), PT_STORE_OK);
    assert_true(j.best_val_mae == 0.5);
    assert_true(j.version > v);
    pt_store_job_clear(&j);

    pt_store_epoch_series es;
    assert_int_equal(pt_store_epochs_read(f->s, "alice", f->job, &es), PT_STORE_OK);
    assert_int_equal(es.n, 4);
    for (size_t i = 0; i < 4; i++) assert_int_equal(es.items[i].epoch, (int64_t)i);
    assert_true(es.items[1].val_mae == 0.5);
    assert_true(isnan(es.items[3].val_mae));
    assert_true(es.items[0].seconds == 12.5);
    assert_string_equal(es.items[0].json, "{\"x\":1}");
    pt_store_epoch_series_clear(&es);

    e.epoch = -1;
    assert_int_equal(pt_store_epoch_append(f->s, f->job, &e, &inserted), PT_STORE_INVALID);
    assert_string_equal(pt_store_errmsg(f->s), "epoch metric: epoch and step must be >= 0 (epoch -1, step 199)");
}

static void test_discard_after_resume_point(void **state)
{
    fixture *f = *state;
    append_range(f, 0, 300, 300);
    pt_store_epoch_metric e = {.epoch = 0, .step = 99, .val_mae = 0.9};
    assert_int_equal(pt_store_epoch_append(f->s, f->job, &e, NULL), PT_STORE_OK);
    e.epoch = 1, e.step = 199, e.val_mae = 0.4;
    assert_int_equal(pt_store_epoch_append(f->s, f->job, &e, NULL), PT_STORE_OK);
    assert_int_equal(pt_store_metrics_discard_after(f->s, f->job, 150), PT_STORE_OK);

    pt_store_step_series ser;
    assert_int_equal(pt_store_steps_read(f->s, "alice", f->job, -1, 0, &ser), PT_STORE_OK);
    assert_int_equal(ser.n, 151);
    assert_int_equal(ser.items[150].step, 150);
    pt_store_step_series_clear(&ser);
    pt_store_epoch_series es;
    assert_int_equal(pt_store_epochs_read(f->s, "alice", f->job, &es), PT_STORE_OK);
    assert_int_equal(es.n, 1);
    pt_store_epoch_series_clear(&es);
    pt_store_job j;
    assert_int_equal(pt_store_job_get(f->s, "alice", f->job, &j), PT_STORE_OK);
    assert_true(j.best_val_mae == 0.9);   /* recomputed from what is left */
    pt_store_job_clear(&j);
    /* The replay now inserts the discarded steps again. */
    append_range(f, 140, 300, 149);
    assert_int_equal(pt_store_metrics_discard_after(f->s, "job_missing", 1), PT_STORE_NOT_FOUND);
}

static void test_checkpoints(void **state)
{
    fixture *f = *state;
    pt_store_checkpoint c;
    assert_int_equal(pt_store_checkpoint_latest(f->s, "alice", f->job, &c), PT_STORE_NOT_FOUND);
    char expect[96];
    snprintf(expect, sizeof(expect), "job %s has no checkpoint yet", f->job);
    assert_string_equal(pt_store_errmsg(f->s), expect);

    assert_int_equal(pt_store_checkpoint_record(f->s, f->job, 100, 0, "/ck/100.bin"), PT_STORE_OK);
    assert_int_equal(pt_store_checkpoint_record(f->s, f->job, 300, 2, "/ck/300.bin"), PT_STORE_OK);
    assert_int_equal(pt_store_checkpoint_record(f->s, f->job, 200, 1, "/ck/200.bin"), PT_STORE_OK);
    assert_int_equal(pt_store_checkpoint_latest(f->s, "alice", f->job, &c), PT_STORE_OK);
    assert_int_equal(c.step, 300);
    assert_int_equal(c.epoch, 2);
    assert_string_equal(c.path, "/ck/300.bin");
    assert_string_equal(c.job_id, f->job);
    assert_true(c.created_at > 0);
    /* Re-recording a step replaces its location. */
    assert_int_equal(pt_store_checkpoint_record(f->s, f->job, 300, 2, "/ck/300b.bin"), PT_STORE_OK);
    assert_int_equal(pt_store_checkpoint_latest(f->s, NULL, f->job, &c), PT_STORE_OK);
    assert_string_equal(c.path, "/ck/300b.bin");

    assert_int_equal(pt_store_checkpoint_latest(f->s, "bob", f->job, &c), PT_STORE_NOT_FOUND);
    assert_int_equal(pt_store_checkpoint_record(f->s, f->job, -1, 0, "/x"), PT_STORE_INVALID);
    assert_string_equal(pt_store_errmsg(f->s), "checkpoint: step and epoch must be >= 0 (step -1, epoch 0)");
    assert_int_equal(pt_store_checkpoint_record(f->s, f->job, 1, 0, ""), PT_STORE_INVALID);
    assert_string_equal(pt_store_errmsg(f->s), "checkpoint path is empty");
    assert_int_equal(pt_store_checkpoint_record(f->s, "job_missing", 1, 0, "/x"), PT_STORE_NOT_FOUND);
    assert_string_equal(pt_store_errmsg(f->s), "job job_missing not found");
}

/* Pages: every step once, in order, past the thinning cap. */
static void test_pages(void **state)
{
    fixture *f = *state;
    append_range(f, 1, PT_STORE_POINTS_MAX + 501, PT_STORE_POINTS_MAX + 500);   /* steps 1..10500 */
    int64_t since = -1, seen = 0;
    for (;;) {
        pt_store_step_series ser;
        assert_int_equal(pt_store_steps_page(f->s, "alice", f->job, since, 3000, &ser), PT_STORE_OK);
        assert_int_equal(ser.total, PT_STORE_POINTS_MAX + 500 - seen);
        for (size_t i = 0; i < ser.n; i++) assert_int_equal(ser.items[i].step, ++seen);
        int more = ser.total > (int64_t)ser.n;
        if (ser.n) since = ser.items[ser.n - 1].step;
        pt_store_step_series_clear(&ser);
        if (!more) break;
    }
    assert_int_equal(seen, PT_STORE_POINTS_MAX + 500);
    pt_store_step_series ser;
    assert_int_equal(pt_store_steps_page(f->s, "alice", f->job, since, 10, &ser), PT_STORE_OK);
    assert_int_equal(ser.n, 0);
    assert_int_equal(ser.total, 0);
    pt_store_step_series_clear(&ser);
    assert_int_equal(pt_store_steps_page(f->s, "alice", f->job, -1, 0, &ser), PT_STORE_INVALID);
    assert_string_equal(pt_store_errmsg(f->s), "page_size must be within [1, 10000], got 0");
    assert_int_equal(pt_store_steps_page(f->s, "bob", f->job, -1, 10, &ser), PT_STORE_NOT_FOUND);
}

static void test_errors_and_owner_isolation(void **state)
{
    fixture *f = *state;
    append_range(f, 0, 5, 5);
    pt_store_step_metric bad = step_row(-4);
    size_t inserted = 99;
    assert_int_equal(pt_store_steps_append(f->s, f->job, &bad, 1, &inserted), PT_STORE_INVALID);
    assert_string_equal(pt_store_errmsg(f->s), "step metric: step and epoch must be >= 0 (step -4, epoch 0)");
    assert_int_equal(inserted, 0);
    /* A bad row anywhere rolls back the whole batch. */
    pt_store_step_metric batch[3] = {step_row(10), step_row(11), step_row(-1)};
    assert_int_equal(pt_store_steps_append(f->s, f->job, batch, 3, &inserted), PT_STORE_INVALID);
    pt_store_step_series ser;
    assert_int_equal(pt_store_steps_read(f->s, "alice", f->job, -1, 0, &ser), PT_STORE_OK);
    assert_int_equal(ser.n, 5);
    pt_store_step_series_clear(&ser);

    assert_int_equal(pt_store_steps_append(f->s, "job_missing", batch, 1, NULL), PT_STORE_NOT_FOUND);
    assert_string_equal(pt_store_errmsg(f->s), "job job_missing not found");
    assert_int_equal(pt_store_steps_append(f->s, "", batch, 1, NULL), PT_STORE_INVALID);
    assert_string_equal(pt_store_errmsg(f->s), "job id is empty");
    pt_store_epoch_metric e = {.epoch = 0, .step = 1};
    assert_int_equal(pt_store_epoch_append(f->s, "job_missing", &e, NULL), PT_STORE_NOT_FOUND);

    char expect[64];
    snprintf(expect, sizeof(expect), "job %s not found", f->job);
    assert_int_equal(pt_store_steps_read(f->s, "bob", f->job, -1, 0, &ser), PT_STORE_NOT_FOUND);
    assert_string_equal(pt_store_errmsg(f->s), expect);
    assert_int_equal(ser.n, 0);
    pt_store_epoch_series es;
    assert_int_equal(pt_store_epochs_read(f->s, "bob", f->job, &es), PT_STORE_NOT_FOUND);
    assert_string_equal(pt_store_errmsg(f->s), expect);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_append_and_read_roundtrip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_duplicate_steps_are_kept_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_downsampling_keeps_bounds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_downsampling_by_rank_across_gaps, setup, teardown),
        cmocka_unit_test_setup_teardown(test_downsampling_keeps_extremes, setup, teardown),
        cmocka_unit_test(test_thin_rows),
        cmocka_unit_test_setup_teardown(test_epochs_and_best_mae, setup, teardown),
        cmocka_unit_test_setup_teardown(test_discard_after_resume_point, setup, teardown),
        cmocka_unit_test_setup_teardown(test_checkpoints, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pages, setup, teardown),
        cmocka_unit_test_setup_teardown(test_errors_and_owner_isolation, setup, teardown),
    };
    return cmocka_run_group_tests_name("store_metrics", tests, NULL, NULL);
}
