/* test_train_eval.c — the validation pass over several threads
 * (engine/train/train_eval.c): for micro-batches of 1, 2 and 3 packs (fp32)
 * and of 2 (bf16), and 1 to 3 helper threads, pt_evaluate's result equals
 * the serial pass's (2 kernel threads) bit for bit (every field, the NaN
 * ones too), repeated passes agree, and the kernel thread settings are
 * restored; a job that
 * is not one graph-level energy head gets no helpers and stays serial; a
 * pack over the evaluator's limits fails the split pass with the serial
 * pass's located error. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <cblas.h>

#include "tests/unit/backend_fixture.h"
#include "engine/model/bf16.h"
#include "engine/train/train_internal.h"

static pt_eval_result eval_with(const pt_train_data *d, pt_pack_limits limits, int extra,
                                const pt_packs *packs)
{
    pt_errors errs;
    pt_errors_init(&errs, 2);
    pt_evaluator ev;
    assert_int_equal(pt_evaluator_init(&ev, d, limits, &errs), 0);
    assert_int_equal(pt_evaluator_split(&ev, extra, &errs), 0);
    assert_int_equal(ev.n_workers, extra);
    pt_eval_result r;
    memset(&r, 0, sizeof r);
    assert_int_equal(pt_evaluate(&ev, packs, &r, &errs), 0);
    /* a second pass on the same evaluator: same numbers */
    pt_eval_result again;
    memset(&again, 0, sizeof again);
    assert_int_equal(pt_evaluate(&ev, packs, &again, &errs), 0);
    assert_memory_equal(&r, &again, sizeof r);
    pt_evaluator_close(&ev);
    pt_errors_close(&errs);
    return r;
}

static void test_split_equals_serial(void **state)
{
    (void)state;
    /* the serial pass runs with the process's kernel threads (2 here), the
     * split one with 1 per thread: the bits must not care */
    openblas_set_num_threads(2);
    pt_bf16_set_threads(2);
    for (int c = 0; c < 4; c++) {
        const int b = c < 3 ? 1 + c : 2;
        pt_job_config cfg;
        pt_train_data d = data_for(&cfg, 1, 1, b);
        if (c == 3) cfg.training.precision = PT_PRECISION_BF16;
        pt_eval_result serial = eval_with(&d, F.packer.limits, 0, &F.packs);
        assert_int_equal(openblas_get_num_threads(), 2);
        assert_true(serial.n > 0);
        assert_true(isfinite(serial.mae) && serial.mae > 0.0);
        for (int extra = 1; extra <= 3; extra++) {
            pt_eval_result split = eval_with(&d, F.packer.limits, extra, &F.packs);
            assert_memory_equal(&serial, &split, sizeof serial);
            /* and the kernels' thread settings are given back */
            assert_int_equal(openblas_get_num_threads(), 2);
            assert_int_equal(pt_bf16_get_threads(), 2);
        }
    }
}

static void test_not_eligible_stays_serial(void **state)
{
    (void)state;
    pt_job_config cfg;
    pt_train_data d = data_for(&cfg, 1, 1, 2);
    assert_true(pt_eval_split_eligible(&d));
    pt_errors errs;
    pt_errors_init(&errs, 2);
    /* forces, a second target, a per-atom first target: serial */
    for (int c = 0; c < 3; c++) {
        pt_train_data x = d;
        if (c == 0) x.loss.forces = 1;
        if (c == 1) x.loss.heads = 2;
        if (c == 2) x.loss.head_atom[0] = 1;
        assert_false(pt_eval_split_eligible(&x));
        pt_evaluator ev;
        memset(&ev, 0, sizeof ev);
        ev.d = &x;
        assert_int_equal(pt_evaluator_split(&ev, 2, &errs), 0);
        assert_int_equal(ev.n_workers, 0);
        assert_null(ev.workers);
    }
    pt_errors_close(&errs);
}

static void test_split_reports_fill_error(void **state)
{
    (void)state;
    pt_job_config cfg;
    pt_train_data d = data_for(&cfg, 1, 1, 2);
    /* limits below the packs': every fill fails, in every thread */
    pt_pack_limits small = F.packer.limits;
    small.max_nodes = 2;
    for (int extra = 0; extra <= 2; extra++) {
        pt_errors errs;
        pt_errors_init(&errs, 2);
        pt_evaluator ev;
        assert_int_equal(pt_evaluator_init(&ev, &d, small, &errs), 0);
        assert_int_equal(pt_evaluator_split(&ev, extra, &errs), 0);
        pt_eval_result r;
        assert_int_equal(pt_evaluate(&ev, &F.packs, &r, &errs), -1);
        char msg[512];
        pt_errors_first(&errs, msg, sizeof msg);
        assert_non_null(strstr(msg, "over its limits"));
        pt_evaluator_close(&ev);
        pt_errors_close(&errs);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_equals_serial),
        cmocka_unit_test(test_not_eligible_stays_serial),
        cmocka_unit_test(test_split_reports_fill_error),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
