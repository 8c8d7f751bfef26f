/* test_store_writer.c — the store writer thread: ops run in submission
 * order, done callbacks run on the loop thread in the same order, an op
 * submitted while closing still runs, and an unopenable database is reported. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server/sched/store_writer.h"
#include "tests/unit/tmp_fixture.h"

typedef struct order_op {
    pt_store_op op;
    int index, *ran, *done_order, *n_done;
    pthread_t loop_thread;
    pt_store_writer *w;
    struct order_op *then;   /* submitted from this op's done callback */
} order_op;

static void order_work(pt_store *st, pt_store_op *op)
{
    order_op *o = (order_op *)op;
    assert_non_null(st);
    o->ran[o->index] = 1;
}

static void order_done(pt_store_op *op)
{
    order_op *o = (order_op *)op;
    assert_true(pthread_equal(pthread_self(), o->loop_thread));
    assert_int_equal(o->ran[o->index], 1);
    o->done_order[(*o->n_done)++] = o->index;
    if (o->then) pt_store_writer_submit(o->w, &o->then->op);
    free(o);
}

static void test_store_writer_runs_in_order(void **state)
{
    (void)state;
    enum { N = 500 };
    char dir[64], db[96];
    snprintf(dir, sizeof(dir), "/tmp/pt_store_writer_%d", (int)getpid());
    assert_int_equal(mkdir(dir, 0700), 0);
    snprintf(db, sizeof(db), "%s/db.sqlite", dir);
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    pt_store_writer w;
    char err[256];
    assert_int_equal(pt_store_writer_init(&w, &loop, "/nonexistent/x.sqlite", err, sizeof(err)), -1);
    assert_non_null(strstr(err, "cannot open the job database /nonexistent/x.sqlite: "));
    assert_int_equal(pt_store_writer_init(&w, &loop, db, err, sizeof(err)), 0);
    static int ran[N + 1], order[N + 1];
    int n_done = 0;
    order_op *ops[N + 1];
    for (int i = 0; i <= N; i++) {
        ops[i] = calloc(1, sizeof(*ops[i]));
        assert_non_null(ops[i]);
        *ops[i] = (order_op){.op = {.work = order_work, .done = order_done}, .index = i, .ran = ran,
                             .done_order = order, .n_done = &n_done, .loop_thread = pthread_self(), .w = &w};
    }
    /* The last op is submitted by the one before it, whose done callback runs
     * inside close (the loop does not run after the midpoint): it must still
     * run, inline, before the store is closed. */
    ops[N - 1]->then = ops[N];
    for (int i = 0; i < N; i++) {
        pt_store_writer_submit(&w, &ops[i]->op);
        if (i == N / 2) uv_run(&loop, UV_RUN_NOWAIT);
    }
    pt_store_writer_close(&w);
    assert_int_equal(n_done, N + 1);
    assert_int_equal(ran[N], 1);
    uv_run(&loop, UV_RUN_DEFAULT);   /* finishes closing the async handle */
    assert_int_equal(uv_loop_close(&loop), 0);
    for (int i = 0; i <= N; i++) assert_int_equal(order[i], i);
    tfx_rmtree(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_store_writer_runs_in_order),
    };
    return cmocka_run_group_tests_name("store_writer", tests, NULL, NULL);
}
