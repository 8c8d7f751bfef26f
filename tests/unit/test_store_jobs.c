/* test_store_jobs.c — jobs: creation and its errors, idempotency keys, the
 * lifecycle (every legal and illegal edge, side effects, history rows),
 * cancel, claim order, progress, versions, listing with filters and page
 * tokens, restart-recovery lists, counts, owner isolation. */
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
#include "tests/unit/store_fixture.h"

typedef store_fx fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    if (!f || store_fx_init(f, "store_jobs", 1) != 0) return -1;
    if (store_fx_dataset(f->s, "alice", "ready", f->ds) != 0 ||
        store_fx_dataset(f->s, "bob", "ready", f->ds2) != 0)
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

static void new_job(fixture *f, const char *owner, char id[PT_STORE_ID_MAX])
{
    pt_store_job_request req = {.owner = owner, .dataset_id = strcmp(owner, "bob") ? f->ds : f->ds2,
                                .config_json = "{\"epochs\":2}"};
    pt_store_job job;
    assert_int_equal(pt_store_job_create(f->s, &req, &job, NULL), PT_STORE_OK);
    memcpy(id, job.id, PT_STORE_ID_MAX);
    pt_store_job_clear(&job);
}

static void move(fixture *f, const char *id, pt_job_state to)
{
    assert_int_equal(pt_store_job_transition(f->s, NULL, id, to, "test", NULL), PT_STORE_OK);
}

static void test_create_and_get(void **state)
{
    fixture *f = *state;
    const char *config = "{\"epochs\":3,\"lr\":0.001}";
    pt_store_job_request req = {.owner = "alice", .dataset_id = f->ds, .config_json = config};
    pt_store_job job;
    int created = -1;
    assert_int_equal(pt_store_job_create(f->s, &req, &job, &created), PT_STORE_OK);
    assert_int_equal(created, 1);
    assert_memory_equal(job.id, "job_", 4);
    assert_int_equal(strlen(job.id), 20);
    assert_string_equal(job.owner, "alice");
    assert_string_equal(job.dataset_id, f->ds);
    assert_string_equal(job.config_json, config);
    char hash[PT_STORE_HASH_HEX];
    pt_store_sha256_hex(config, strlen(config), hash);
    assert_string_equal(job.config_hash, hash);
    assert_int_equal(job.state, PT_JOB_QUEUED);
    assert_int_equal(job.version, 1);
    assert_int_equal(job.attempts, 0);
    assert_int_equal(job.started_at, 0);
    assert_int_equal(job.finished_at, 0);
    assert_true(isnan(job.best_val_mae));
    assert_true(isnan(job.latest_graphs_per_s));
    assert_true(job.created_at > 0);

    pt_store_job got;
    assert_int_equal(pt_store_job_get(f->s, "alice", job.id, &got), PT_STORE_OK);
    assert_string_equal(got.config_json, config);
    assert_int_equal(got.created_at, job.created_at);
    pt_store_job_clear(&got);

    pt_store_transition_list tl;
    assert_int_equal(pt_store_job_transitions(f->s, "alice", job.id, &tl), PT_STORE_OK);
    assert_int_equal(tl.n, 1);
    assert_int_equal(tl.items[0].from, PT_JOB_ANY);
    assert_int_equal(tl.items[0].to, PT_JOB_QUEUED);
    assert_string_equal(tl.items[0].reason, "submitted");
    assert_int_equal(tl.items[0].at, job.created_at);
    pt_store_transition_list_clear(&tl);
    pt_store_job_clear(&job);
}

static void test_create_errors(void **state)
{
    fixture *f = *state;
    pt_store_job job;
    pt_store_job_request req = {.owner = "alice", .dataset_id = "ds_nope", .config_json = "{}"};
    assert_int_equal(pt_store_job_create(f->s, &req, &job, NULL), PT_STORE_NOT_FOUND);
    assert_string_equal(pt_store_errmsg(f->s), "dataset ds_nope not found");
    req.dataset_id = f->ds2;   /* another owner's dataset is invisible */
    assert_int_equal(pt_store_job_create(f->s, &req, &job, NULL), PT_STORE_NOT_FOUND);

    char uploading[PT_STORE_ID_MAX];
    assert_int_equal(store_fx_dataset(f->s, "alice", "uploading", uploading), 0);
    req.dataset_id = uploading;
    assert_int_equal(pt_store_job_create(f->s, &req, &job, NULL), PT_STORE_CONFLICT);
    char expect[160];
    snprintf(expect, sizeof(expect), "dataset %s is 'uploading', not 'ready'; jobs need a ready dataset",
             uploading);
    assert_string_equal(pt_store_errmsg(f->s), expect);

    req.dataset_id = f->ds;
    req.config_json = "";
    assert_int_equal(pt_store_job_create(f->s, &req, &job, NULL), PT_STORE_INVALID);
    assert_string_equal(pt_store_errmsg(f->s), "job config is empty");
    req.config_json = "{}";
    req.owner = NULL;
    assert_int_equal(pt_store_job_create(f->s, &req, &job, NULL), PT_STORE_INVALID);
    assert_string_equal(pt_store_errmsg(f->s), "owner is empty");
    req.owner = "alice";
    char key[301];
    memset(key, 'k', 300);
    key[300] = '\0';
    req.idempotency_key = key;
    assert_int_equal(pt_store_job_create(f->s, &req, &job, NULL), PT_STORE_INVALID);
    assert_string_equal(pt_store_errmsg(f->s), "Idempotency-Key is 300 bytes long; the limit is 255");

    pt_store_job_page page;
    assert_int_equal(pt_store_job_list(f->s, "alice", NULL, 0, NULL, &page), PT_STORE_OK);
    assert_int_equal(page.n, 0);   /* nothing was half-created */
    pt_store_job_page_clear(&page);
}

static void test_idempotency(void **state)
{
    fixture *f = *state;
    pt_store_job_request req = {.owner = "alice", .dataset_id = f->ds, .config_json = "{\"a\":1}",
                                .idempotency_key = "ci-run-42"};
    pt_store_job first, again;
    int created = -1;
    assert_int_equal(pt_store_job_create(f->s, &req, &first, &created), PT_STORE_OK);
    assert_int_equal(created, 1);
    assert_int_equal(pt_store_job_create(f->s, &req, &again, &created), PT_STORE_OK);
    assert_int_equal(created, 0);
    assert_string_equal(again.id, first.id);
    pt_store_job_clear(&again);

    pt_store_job_request other = req;
    other.config_json = "{\"a\":2}";
    assert_int_equal(pt_store_job_create(f->s, &other, &again, &created), PT_STORE_IDEMPOTENCY_MISMATCH);
    char expect[200];
    snprintf(expect, sizeof(expect), "Idempotency-Key 'ci-run-42' was already used for a different request "
             "(job %s); use a new key for a new job", first.id);
    assert_string_equal(pt_store_errmsg(f->s), expect);
    char ds2[PT_STORE_ID_MAX];
    assert_int_equal(store_fx_dataset(f->s, "alice", "ready", ds2), 0);
    other = req;
    other.dataset_id = ds2;
    assert_int_equal(pt_store_job_create(f->s, &other, &again, NULL), PT_STORE_IDEMPOTENCY_MISMATCH);

    /* Keys are per owner. */
    other = req;
    other.owner = "bob";
    other.dataset_id = f->ds2;
    assert_int_equal(pt_store_job_create(f->s, &other, &again, &created), PT_STORE_OK);
    assert_int_equal(created, 1);
    assert_string_not_equal(again.id, first.id);
    pt_store_job_clear(&again);

    pt_store_job_page page;
    assert_int_equal(pt_store_job_list(f->s, "alice", NULL, 0, NULL, &page), PT_STORE_OK);
    assert_int_equal(page.n, 1);
    pt_store_job_page_clear(&page);

    /* Without a key, the same body makes a new job every time. */
    other = req;
    other.idempotency_key = NULL;
    assert_int_equal(pt_store_job_create(f->s, &other, &again, &created), PT_STORE_OK);
    assert_string_not_equal(again.id, first.id);
    pt_store_job_clear(&again);

    /* Pruned keys can be reused. */
    int64_t removed = -1;
    assert_int_equal(pt_store_idempotency_prune(f->s, pt_store_now_us() + 1000000, &removed), PT_STORE_OK);
    assert_int_equal(removed, 2);
    assert_int_equal(pt_store_job_create(f->s, &req, &again, &created), PT_STORE_OK);
    assert_int_equal(created, 1);
    assert_string_not_equal(again.id, first.id);
    pt_store_job_clear(&again);
    pt_store_job_clear(&first);
}

static void test_transition_side_effects_and_history(void **state)
{
    fixture *f = *state;
    char id[PT_STORE_ID_MAX];
    new_job(f, "alice", id);
    pt_store_job j;
    assert_int_equal(pt_store_job_transition(f->s, NULL, id, PT_JOB_RUNNING, "worker started", &j), PT_STORE_OK);
    assert_int_equal(j.state, PT_JOB_RUNNING);
    assert_int_equal(j.attempts, 1);
    assert_int_equal(j.version, 2);
    int64_t started = j.started_at;
    assert_true(started > 0);
    pt_store_job_clear(&j);
    assert_int_equal(pt_store_job_set_worker(f->s, id, 4242), PT_STORE_OK);
    assert_int_equal(pt_store_job_get(f->s, NULL, id, &j), PT_STORE_OK);
    assert_int_equal(j.worker_pid, 4242);
    pt_store_job_clear(&j);

    assert_int_equal(pt_store_job_transition(f->s, NULL, id, PT_JOB_QUEUED, "server restart", &j), PT_STORE_OK);
    assert_int_equal(j.worker_pid, 0);
    assert_int_equal(j.finished_at, 0);
    pt_store_job_clear(&j);
    assert_int_equal(pt_store_job_transition(f->s, NULL, id, PT_JOB_RUNNING, "resumed", &j), PT_STORE_OK);
    assert_int_equal(j.attempts, 2);
    assert_int_equal(j.started_at, started);   /* first start is kept */
    pt_store_job_clear(&j);
    assert_int_equal(pt_store_job_set_worker(f->s, id, 77), PT_STORE_OK);
    assert_int_equal(pt_store_job_transition(f->s, "alice", id, PT_JOB_FAILED, "worker crashed 3 times", &j),
                     PT_STORE_OK);
    assert_int_equal(j.state, PT_JOB_FAILED);
    assert_string_equal(j.failure_reason, "worker crashed 3 times");
    assert_true(j.finished_at >= started);
    assert_int_equal(j.worker_pid, 0);
    assert_int_equal(j.version, 5);
    pt_store_job_clear(&j);

    pt_store_transition_list tl;
    assert_int_equal(pt_store_job_transitions(f->s, "alice", id, &tl), PT_STORE_OK);
    assert_int_equal(tl.n, 5);
    const pt_job_state from[] = {PT_JOB_ANY, PT_JOB_QUEUED, PT_JOB_RUNNING, PT_JOB_QUEUED, PT_JOB_RUNNING};
    const pt_job_state to[] = {PT_JOB_QUEUED, PT_JOB_RUNNING, PT_JOB_QUEUED, PT_JOB_RUNNING, PT_JOB_FAILED};
    const char *reason[] = {"submitted", "worker started", "server restart", "resumed", "worker crashed 3 times"};
    for (size_t i = 0; i < 5; i++) {
        assert_int_equal(tl.items[i].from, from[i]);
        assert_int_equal(tl.items[i].to, to[i]);
        assert_string_equal(tl.items[i].reason, reason[i]);
        if (i) assert_true(tl.items[i].at >= tl.items[i - 1].at);
    }
    pt_store_transition_list_clear(&tl);
}

/* Drives a fresh job into `st` along legal edges. */
static void job_in_state(fixture *f, pt_job_state st, char id[PT_STORE_ID_MAX])
{
    new_job(f, "alice", id);
    if (st == PT_JOB_CANCELLED) move(f, id, PT_JOB_CANCELLED);
    if (st == PT_JOB_QUEUED || st == PT_JOB_CANCELLED) return;
    move(f, id, PT_JOB_RUNNING);
    if (st == PT_JOB_CANCELLING) move(f, id, PT_JOB_CANCELLING);
    if (st == PT_JOB_SUCCEEDED || st == PT_JOB_FAILED || st == PT_JOB_STOPPED) move(f, id, st);
}

static void test_every_edge_legal_or_refused(void **state)
{
    fixture *f = *state;
    for (int from = 0; from < PT_JOB_STATE_COUNT; from++) {
        for (int to = 0; to < PT_JOB_STATE_COUNT; to++) {
            char id[PT_STORE_ID_MAX];
            job_in_state(f, (pt_job_state)from, id);
            pt_store_transition_list before, after;
            assert_int_equal(pt_store_job_transitions(f->s, NULL, id, &before), PT_STORE_OK);
            int rc = pt_store_job_transition(f->s, NULL, id, (pt_job_state)to, "edge test", NULL);
            assert_int_equal(pt_store_job_transitions(f->s, NULL, id, &after), PT_STORE_OK);
            pt_store_job j;
            assert_int_equal(pt_store_job_get(f->s, NULL, id, &j), PT_STORE_OK);
            if (pt_job_transition_allowed((pt_job_state)from, (pt_job_state)to)) {
                assert_int_equal(rc, PT_STORE_OK);
                assert_int_equal(j.state, to);
                assert_int_equal(after.n, before.n + 1);
            } else {
                assert_int_equal(rc, PT_STORE_ILLEGAL_TRANSITION);
                assert_int_equal(j.state, from);
                assert_int_equal(after.n, before.n);
                char head[128];
                snprintf(head, sizeof(head), "job %s cannot go from %s to %s (from %s it may go to: ", id,
                         pt_job_state_name((pt_job_state)from), pt_job_state_name((pt_job_state)to),
                         pt_job_state_name((pt_job_state)from));
                assert_memory_equal(pt_store_errmsg(f->s), head, strlen(head));
            }
            pt_store_job_clear(&j);
            pt_store_transition_list_clear(&before);
            pt_store_transition_list_clear(&after);
        }
    }
    char id[PT_STORE_ID_MAX];
    job_in_state(f, PT_JOB_SUCCEEDED, id);
    assert_int_equal(pt_store_job_transition(f->s, NULL, id, PT_JOB_RUNNING, "again", NULL),
                     PT_STORE_ILLEGAL_TRANSITION);
    char expect[160];
    snprintf(expect, sizeof(expect), "job %s cannot go from succeeded to running (from succeeded it may go "
             "to: none, it is final)", id);
    assert_string_equal(pt_store_errmsg(f->s), expect);
    job_in_state(f, PT_JOB_QUEUED, id);
    assert_int_equal(pt_store_job_transition(f->s, NULL, id, PT_JOB_SUCCEEDED, "skip", NULL),
                     PT_STORE_ILLEGAL_TRANSITION);
    snprintf(expect, sizeof(expect), "job %s cannot go from queued to succeeded (from queued it may go to: "
             "running, cancelled)", id);
    assert_string_equal(pt_store_errmsg(f->s), expect);
}

static void test_transition_argument_errors(void **state)
{
    fixture *f = *state;
    char id[PT_STORE_ID_MAX];
    new_job(f, "alice", id);
    assert_int_equal(pt_store_job_transition(f->s, NULL, id, PT_JOB_RUNNING, "", NULL), PT_STORE_INVALID);
    assert_string_equal(pt_store_errmsg(f->s), "transition reason is empty");
    assert_int_equal(pt_store_job_transition(f->s, NULL, id, (pt_job_state)9, "x", NULL), PT_STORE_INVALID);
    assert_string_equal(pt_store_errmsg(f->s), "target job state 9 is not a state");
    assert_int_equal(pt_store_job_transition(f->s, NULL, "job_missing", PT_JOB_RUNNING, "x", NULL),
                     PT_STORE_NOT_FOUND);
    assert_string_equal(pt_store_errmsg(f->s), "job job_missing not found");
    assert_int_equal(pt_store_job_transition(f->s, NULL, "", PT_JOB_RUNNING, "x", NULL), PT_STORE_INVALID);
    assert_string_equal(pt_store_errmsg(f->s), "job id is empty");
    assert_int_equal(pt_store_job_cancel(f->s, "alice", id, NULL, NULL), PT_STORE_INVALID);
    assert_int_equal(pt_store_job_claim_next(f->s, "", NULL), PT_STORE_INVALID);
}

static void test_cancel(void **state)
{
    fixture *f = *state;
    char q[PT_STORE_ID_MAX], r[PT_STORE_ID_MAX], done[PT_STORE_ID_MAX];
    job_in_state(f, PT_JOB_QUEUED, q);
    job_in_state(f, PT_JOB_RUNNING, r);
    job_in_state(f, PT_JOB_SUCCEEDED, done);
    pt_store_job j;
    assert_int_equal(pt_store_job_cancel(f->s, "alice", q, "user asked", &j), PT_STORE_OK);
    assert_int_equal(j.state, PT_JOB_CANCELLED);
    assert_true(j.finished_at > 0);
    pt_store_job_clear(&j);
    assert_int_equal(pt_store_job_cancel(f->s, "alice", r, "user asked", &j), PT_STORE_OK);
    assert_int_equal(j.state, PT_JOB_CANCELLING);
    int64_t v = j.version;
    pt_store_job_clear(&j);
    assert_int_equal(pt_store_job_cancel(f->s, "alice", r, "asked twice", &j), PT_STORE_OK);
    assert_int_equal(j.state, PT_JOB_CANCELLING);
    assert_int_equal(j.version, v);   /* no change, no new version */
    pt_store_job_clear(&j);
    assert_int_equal(pt_store_job_cancel(f->s, "alice", done, "too late", &j), PT_STORE_ILLEGAL_TRANSITION);
    char expect[96];
    snprintf(expect, sizeof(expect), "job %s already succeeded; nothing to cancel", done);
    assert_string_equal(pt_store_errmsg(f->s), expect);
    assert_int_equal(pt_store_job_cancel(f->s, "bob", q, "not mine", NULL), PT_STORE_NOT_FOUND);
}

static void test_claim_next_oldest_first(void **state)
{
    fixture *f = *state;
    char a[PT_STORE_ID_MAX], b[PT_STORE_ID_MAX], c[PT_STORE_ID_MAX];
    new_job(f, "alice", a);
    new_job(f, "bob", b);
    new_job(f, "alice", c);
    const char *order[] = {a, b, c};
    for (int i = 0; i < 3; i++) {
        pt_store_job j;
        assert_int_equal(pt_store_job_claim_next(f->s, "slot free", &j), PT_STORE_OK);
        assert_string_equal(j.id, order[i]);
        assert_int_equal(j.state, PT_JOB_RUNNING);
        assert_int_equal(j.attempts, 1);
        pt_store_job_clear(&j);
    }
    pt_store_job j;
    assert_int_equal(pt_store_job_claim_next(f->s, "slot free", &j), PT_STORE_NOT_FOUND);
    assert_string_equal(pt_store_errmsg(f->s), "no job is queued");
}

static void test_progress_and_versions(void **state)
{
    fixture *f = *state;
    char id[PT_STORE_ID_MAX];
    new_job(f, "alice", id);
    pt_store_progress p = {.progress = 0.25, .epoch = 1, .step = 40, .graphs_per_s = 812.5};
    assert_int_equal(pt_store_job_update_progress(f->s, id, &p), PT_STORE_CONFLICT);
    char expect[128];
    snprintf(expect, sizeof(expect), "job %s is queued; progress is only recorded while it runs", id);
    assert_string_equal(pt_store_errmsg(f->s), expect);
    assert_int_equal(pt_store_job_set_worker(f->s, id, 12), PT_STORE_CONFLICT);
    assert_int_equal(pt_store_job_set_worker(f->s, id, 0), PT_STORE_INVALID);
    assert_string_equal(pt_store_errmsg(f->s), "worker pid must be > 0, got 0");

    int64_t v0 = 0, v1 = 0, v2 = 0;
    pt_job_state st;
    assert_int_equal(pt_store_job_version(f->s, "alice", id, &v0, &st), PT_STORE_OK);
    assert_int_equal(st, PT_JOB_QUEUED);
    move(f, id, PT_JOB_RUNNING);
    assert_int_equal(pt_store_job_version(f->s, "alice", id, &v1, &st), PT_STORE_OK);
    assert_int_equal(st, PT_JOB_RUNNING);
    assert_true(v1 > v0);
    assert_int_equal(pt_store_job_update_progress(f->s, id, &p), PT_STORE_OK);
    assert_int_equal(pt_store_job_version(f->s, "alice", id, &v2, NULL), PT_STORE_OK);
    assert_true(v2 > v1);
    p.progress = 0.5;
    p.step = 80;
    p.graphs_per_s = NAN;   /* keeps the last throughput */
    assert_int_equal(pt_store_job_update_progress(f->s, id, &p), PT_STORE_OK);
    pt_store_job j;
    assert_int_equal(pt_store_job_get(f->s, "alice", id, &j), PT_STORE_OK);
    assert_true(j.progress == 0.5);
    assert_int_equal(j.epoch, 1);
    assert_int_equal(j.step, 80);
    assert_true(j.latest_graphs_per_s == 812.5);
    assert_true(j.version > v2);
    pt_store_job_clear(&j);

    p.progress = 1.5;
    assert_int_equal(pt_store_job_update_progress(f->s, id, &p), PT_STORE_INVALID);
    assert_string_equal(pt_store_errmsg(f->s), "progress must be within [0, 1], got 1.5");
    p.progress = NAN;
    assert_int_equal(pt_store_job_update_progress(f->s, id, &p), PT_STORE_INVALID);
    p.progress = 0.5;
    p.step = -1;
    assert_int_equal(pt_store_job_update_progress(f->s, id, &p), PT_STORE_INVALID);
    assert_string_equal(pt_store_errmsg(f->s), "epoch and step must be >= 0 (epoch 1, step -1)");
    p.step = 1;
    assert_int_equal(pt_store_job_update_progress(f->s, "job_missing", &p), PT_STORE_NOT_FOUND);
    assert_int_equal(pt_store_job_version(f->s, "bob", id, &v0, NULL), PT_STORE_NOT_FOUND);
    assert_int_equal(pt_store_job_version(f->s, "bob", "", &v0, NULL), PT_STORE_INVALID);
}

/* A run's result: kept with the job while it runs (a JSON object only),
 * read back with every job row, refused once the job has ended. */
static void test_result(void **state)
{
    fixture *f = *state;
    char id[PT_STORE_ID_MAX];
    new_job(f, "alice", id);
    const char *res = "{\"best_val_mae\":0.5,\"test_forces_mae\":0.2}";
    assert_int_equal(pt_store_job_set_result(f->s, id, res), PT_STORE_CONFLICT);
    pt_store_job j;
    assert_int_equal(pt_store_job_get(f->s, "alice", id, &j), PT_STORE_OK);
    assert_null(j.result_json);
    pt_store_job_clear(&j);
    move(f, id, PT_JOB_RUNNING);
    int64_t v0 = 0, v1 = 0;
    assert_int_equal(pt_store_job_version(f->s, "alice", id, &v0, NULL), PT_STORE_OK);
    for (const char *bad[] = {"[1,2]", "not json", "7", "", NULL}, **b = bad; *b; b++) {
        assert_int_equal(pt_store_job_set_result(f->s, id, *b), PT_STORE_INVALID);
        assert_string_equal(pt_store_errmsg(f->s), "a job's result must be a JSON object");
    }
    assert_int_equal(pt_store_job_set_result(f->s, id, NULL), PT_STORE_INVALID);
    assert_int_equal(pt_store_job_set_result(f->s, id, res), PT_STORE_OK);
    assert_int_equal(pt_store_job_version(f->s, "alice", id, &v1, NULL), PT_STORE_OK);
    assert_true(v1 > v0);
    move(f, id, PT_JOB_SUCCEEDED);
    assert_int_equal(pt_store_job_get(f->s, "alice", id, &j), PT_STORE_OK);
    assert_string_equal(j.result_json, res);
    pt_store_job_clear(&j);
    pt_store_job_page page;
    assert_int_equal(pt_store_job_list(f->s, "alice", NULL, 10, NULL, &page), PT_STORE_OK);
    assert_int_equal(page.n, 1);
    assert_string_equal(page.items[0].result_json, res);
    pt_store_job_page_clear(&page);
    assert_int_equal(pt_store_job_set_result(f->s, id, res), PT_STORE_CONFLICT);
    assert_int_equal(pt_store_job_set_result(f->s, "job_missing", res), PT_STORE_NOT_FOUND);
}

/* stopped: from running (max_runtime_seconds) or from cancelling (a user's
 * cancel); stop_reason says which, and only a stopped job has one. */
static void test_stopped_and_its_reason(void **state)
{
    fixture *f = *state;
    char a[PT_STORE_ID_MAX], b[PT_STORE_ID_MAX], c[PT_STORE_ID_MAX];
    pt_store_job j;
    new_job(f, "alice", a);
    move(f, a, PT_JOB_RUNNING);
    assert_int_equal(pt_store_job_transition(f->s, NULL, a, PT_JOB_STOPPED, "max runtime", &j), PT_STORE_OK);
    assert_int_equal(j.state, PT_JOB_STOPPED);
    assert_string_equal(j.stop_reason, "max_runtime");
    assert_true(j.finished_at > 0);
    assert_int_equal(j.worker_pid, 0);
    pt_store_job_clear(&j);
    new_job(f, "alice", b);
    move(f, b, PT_JOB_RUNNING);
    move(f, b, PT_JOB_CANCELLING);
    assert_int_equal(pt_store_job_transition(f->s, NULL, b, PT_JOB_STOPPED, "cancelled", &j), PT_STORE_OK);
    assert_string_equal(j.stop_reason, "cancelled");
    pt_store_job_clear(&j);
    new_job(f, "alice", c);
    move(f, c, PT_JOB_RUNNING);
    assert_int_equal(pt_store_job_transition(f->s, NULL, c, PT_JOB_FAILED, "boom", &j), PT_STORE_OK);
    assert_string_equal(j.stop_reason, "");
    pt_store_job_clear(&j);
    /* a queued job never ran: cancelling it is `cancelled`, never stopped */
    char q[PT_STORE_ID_MAX];
    new_job(f, "alice", q);
    assert_int_equal(pt_store_job_transition(f->s, NULL, q, PT_JOB_STOPPED, "x", NULL), PT_STORE_ILLEGAL_TRANSITION);
    int64_t counts[PT_JOB_STATE_COUNT];
    assert_int_equal(pt_store_job_count_by_state(f->s, "alice", counts), PT_STORE_OK);
    assert_int_equal(counts[PT_JOB_STOPPED], 2);
}

/* Name, tags and metadata are stored as given, part of an idempotent
 * request, and filters of the list (with state and dataset). */
static void test_labels_and_filters(void **state)
{
    fixture *f = *state;
    char ds_b[PT_STORE_ID_MAX];
    assert_int_equal(store_fx_dataset(f->s, "alice", "ready", ds_b), 0);
    pt_store_job_request r1 = {.owner = "alice", .dataset_id = f->ds, .config_json = "{\"epochs\":2}",
                               .name = "baseline", .tags_json = "[\"qm9\",\"nightly\"]",
                               .metadata_json = "{\"commit\":\"abc\"}", .idempotency_key = "k1"};
    pt_store_job j1, j2, j3;
    int created = 0;
    assert_int_equal(pt_store_job_create(f->s, &r1, &j1, &created), PT_STORE_OK);
    assert_int_equal(created, 1);
    assert_string_equal(j1.name, "baseline");
    assert_string_equal(j1.tags_json, "[\"qm9\",\"nightly\"]");
    assert_string_equal(j1.metadata_json, "{\"commit\":\"abc\"}");
    /* the same key with other labels is another request */
    pt_store_job_request r1b = r1;
    r1b.name = "renamed";
    assert_int_equal(pt_store_job_create(f->s, &r1b, &j2, NULL), PT_STORE_IDEMPOTENCY_MISMATCH);
    r1b = r1;
    r1b.tags_json = "[\"qm9\"]";
    assert_int_equal(pt_store_job_create(f->s, &r1b, &j2, NULL), PT_STORE_IDEMPOTENCY_MISMATCH);
    assert_int_equal(pt_store_job_create(f->s, &r1, &j2, &created), PT_STORE_OK);
    assert_int_equal(created, 0);
    assert_string_equal(j2.id, j1.id);
    pt_store_job_clear(&j2);

    pt_store_job_request r2 = {.owner = "alice", .dataset_id = ds_b, .config_json = "{\"epochs\":2}",
                               .tags_json = "[\"nightly\"]"};
    assert_int_equal(pt_store_job_create(f->s, &r2, &j2, NULL), PT_STORE_OK);
    assert_string_equal(j2.name, "");
    assert_string_equal(j2.metadata_json, "{}");
    pt_store_job_request r3 = {.owner = "alice", .dataset_id = ds_b, .config_json = "{\"epochs\":3}"};
    assert_int_equal(pt_store_job_create(f->s, &r3, &j3, NULL), PT_STORE_OK);
    assert_string_equal(j3.tags_json, "[]");
    move(f, j3.id, PT_JOB_RUNNING);

    struct {
        pt_store_job_filter f;
        int n;
        const char *first;
    } cases[] = {
        {{.dataset_id = f->ds}, 1, j1.id},
        {{.dataset_id = ds_b}, 2, j3.id},
        {{.tag = "nightly"}, 2, j2.id},
        {{.tag = "qm9"}, 1, j1.id},
        {{.tag = "night"}, 0, NULL},          /* a tag matches whole */
        {{.name = "baseline"}, 1, j1.id},
        {{.name = "base"}, 0, NULL},
        {{.dataset_id = ds_b, .tag = "nightly"}, 1, j2.id},
        {{.dataset_id = ds_b, .state = "running"}, 1, j3.id},
        {{.dataset_id = f->ds, .state = "running"}, 0, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pt_store_job_page page;
        assert_int_equal(pt_store_job_list(f->s, "alice", &cases[i].f, 10, NULL, &page), PT_STORE_OK);
        assert_int_equal(page.n, (size_t)cases[i].n);
        if (cases[i].first) assert_string_equal(page.items[0].id, cases[i].first);
        pt_store_job_page_clear(&page);
    }
    /* a filter paged on: the token keeps the filter's order */
    pt_store_job_page page;
    const pt_store_job_filter nightly = {.tag = "nightly"};
    assert_int_equal(pt_store_job_list(f->s, "alice", &nightly, 1, NULL, &page), PT_STORE_OK);
    assert_int_equal(page.n, 1);
    char token[PT_STORE_PAGE_TOKEN_MAX];
    memcpy(token, page.next_token, sizeof token);
    pt_store_job_page_clear(&page);
    assert_int_equal(pt_store_job_list(f->s, "alice", &nightly, 1, token, &page), PT_STORE_OK);
    assert_int_equal(page.n, 1);
    assert_string_equal(page.items[0].id, j1.id);
    assert_string_equal(page.next_token, "");
    pt_store_job_page_clear(&page);

    char longname[PT_STORE_NAME_MAX + 1];
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    pt_store_job_request bad = r3;
    bad.name = longname;
    pt_store_job_clear(&j2);
    assert_int_equal(pt_store_job_create(f->s, &bad, &j2, NULL), PT_STORE_INVALID);
    pt_store_job_clear(&j1);
    pt_store_job_clear(&j2);
    pt_store_job_clear(&j3);
}

/* Only a final job is deleted, with its history, metrics and keys. */
static void test_delete(void **state)
{
    fixture *f = *state;
    pt_store_job_request req = {.owner = "alice", .dataset_id = f->ds, .config_json = "{\"epochs\":2}",
                                .idempotency_key = "del-key"};
    pt_store_job j;
    assert_int_equal(pt_store_job_create(f->s, &req, &j, NULL), PT_STORE_OK);
    char id[PT_STORE_ID_MAX];
    memcpy(id, j.id, sizeof id);
    pt_store_job_clear(&j);
    pt_store_job removed;
    assert_int_equal(pt_store_job_delete(f->s, "alice", id, &removed), PT_STORE_CONFLICT);
    char expect[160];
    snprintf(expect, sizeof expect, "job %s is queued; only a job that has ended can be deleted", id);
    assert_string_equal(pt_store_errmsg(f->s), expect);
    move(f, id, PT_JOB_RUNNING);
    pt_store_step_metric m = {.step = 1, .epoch = 0, .loss = 1};
    assert_int_equal(pt_store_steps_append(f->s, id, &m, 1, NULL), PT_STORE_OK);
    assert_int_equal(pt_store_job_delete(f->s, "alice", id, &removed), PT_STORE_CONFLICT);
    move(f, id, PT_JOB_SUCCEEDED);
    assert_int_equal(pt_store_job_delete(f->s, "bob", id, &removed), PT_STORE_NOT_FOUND);
    assert_int_equal(pt_store_job_delete(f->s, "alice", id, &removed), PT_STORE_OK);
    assert_string_equal(removed.id, id);
    assert_int_equal(removed.state, PT_JOB_SUCCEEDED);
    pt_store_job_clear(&removed);
    assert_int_equal(pt_store_job_get(f->s, "alice", id, &j), PT_STORE_NOT_FOUND);
    pt_store_transition_list tl;
    assert_int_equal(pt_store_job_transitions(f->s, "alice", id, &tl), PT_STORE_NOT_FOUND);
    assert_int_equal(pt_store_job_delete(f->s, "alice", id, NULL), PT_STORE_NOT_FOUND);
    /* the key went with the job: it makes a new one */
    int created = 0;
    assert_int_equal(pt_store_job_create(f->s, &req, &j, &created), PT_STORE_OK);
    assert_int_equal(created, 1);
    assert_string_not_equal(j.id, id);
    pt_store_job_clear(&j);
}

static void test_list_filters_and_tokens(void **state)
{
    fixture *f = *state;
    char ids[5][PT_STORE_ID_MAX], other[PT_STORE_ID_MAX];
    for (int i = 0; i < 5; i++) new_job(f, "alice", ids[i]);
    new_job(f, "bob", other);
    move(f, ids[1], PT_JOB_RUNNING);
    move(f, ids[3], PT_JOB_RUNNING);

    char token[PT_STORE_PAGE_TOKEN_MAX] = "";
    int seen = 0;
    do {
        pt_store_job_page page;
        assert_int_equal(pt_store_job_list(f->s, "alice", NULL, 2, token, &page), PT_STORE_OK);
        assert_true(page.n <= 2);
        for (size_t i = 0; i < page.n; i++) assert_string_equal(page.items[i].id, ids[4 - seen++]);
        memcpy(token, page.next_token, sizeof(token));
        pt_store_job_page_clear(&page);
    } while (token[0]);
    assert_int_equal(seen, 5);

    pt_store_job_page page;
    const pt_store_job_filter running = {.state = "running"};
    assert_int_equal(pt_store_job_list(f->s, "alice", &running, 1, NULL, &page), PT_STORE_OK);
    assert_int_equal(page.n, 1);
    assert_string_equal(page.items[0].id, ids[3]);
    assert_string_equal(page.items[0].config_json, "{\"epochs\":2}");
    memcpy(token, page.next_token, sizeof(token));
    pt_store_job_page_clear(&page);
    assert_int_equal(pt_store_job_list(f->s, "alice", &running, 1, token, &page), PT_STORE_OK);
    assert_int_equal(page.n, 1);
    assert_string_equal(page.items[0].id, ids[1]);
    assert_string_equal(page.next_token, "");
    pt_store_job_page_clear(&page);

    assert_int_equal(pt_store_job_list(f->s, "alice", &(pt_store_job_filter){.state = "sleeping"}, 0, NULL, &page), PT_STORE_INVALID);
    assert_string_equal(pt_store_errmsg(f->s), "job state filter 'sleeping' is not a state");
    const char *bad[] = {"zz", "0123456789abcdef6", "0123456789abcdeg6a6a", "0123456789ABCDEF6a6a",
                         "0123456789abcdef2d2d", "ffffffffffffffff6a6f62"};
    const char *why[] = {"wrong length", "wrong length", "not lowercase hex", "not lowercase hex", "bad id",
                         "time out of range"};
    for (int i = 0; i < 6; i++) {
        assert_int_equal(pt_store_job_list(f->s, "alice", NULL, 0, bad[i], &page), PT_STORE_INVALID);
        char expect[160];
        snprintf(expect, sizeof(expect), "page_token is malformed (%s); pass the next_page_token of a "
                 "previous response unchanged", why[i]);
        assert_string_equal(pt_store_errmsg(f->s), expect);
    }
}

static void test_unfinished_and_counts(void **state)
{
    fixture *f = *state;
    char q[PT_STORE_ID_MAX], r1[PT_STORE_ID_MAX], c[PT_STORE_ID_MAX], r2[PT_STORE_ID_MAX], s[PT_STORE_ID_MAX];
    job_in_state(f, PT_JOB_QUEUED, q);
    job_in_state(f, PT_JOB_RUNNING, r1);
    job_in_state(f, PT_JOB_CANCELLING, c);
    job_in_state(f, PT_JOB_SUCCEEDED, s);
    new_job(f, "bob", r2);
    move(f, r2, PT_JOB_RUNNING);

    pt_store_job_array list;
    assert_int_equal(pt_store_job_list_unfinished(f->s, &list), PT_STORE_OK);
    assert_int_equal(list.n, 3);
    assert_string_equal(list.items[0].id, r1);
    assert_string_equal(list.items[1].id, c);
    assert_string_equal(list.items[2].id, r2);
    pt_store_job_array_clear(&list);

    int64_t counts[PT_JOB_STATE_COUNT];
    assert_int_equal(pt_store_job_count_by_state(f->s, NULL, counts), PT_STORE_OK);
    const int64_t all[PT_JOB_STATE_COUNT] = {1, 2, 1, 1, 0, 0};
    for (int i = 0; i < PT_JOB_STATE_COUNT; i++) assert_int_equal(counts[i], all[i]);
    assert_int_equal(pt_store_job_count_by_state(f->s, "alice", counts), PT_STORE_OK);
    const int64_t alice[PT_JOB_STATE_COUNT] = {1, 1, 1, 1, 0, 0};
    for (int i = 0; i < PT_JOB_STATE_COUNT; i++) assert_int_equal(counts[i], alice[i]);
    assert_int_equal(pt_store_job_count_by_state(f->s, "carol", counts), PT_STORE_OK);
    for (int i = 0; i < PT_JOB_STATE_COUNT; i++) assert_int_equal(counts[i], 0);
}

static void test_owner_isolation(void **state)
{
    fixture *f = *state;
    char id[PT_STORE_ID_MAX];
    new_job(f, "alice", id);
    pt_store_job j;
    char expect[64];
    snprintf(expect, sizeof(expect), "job %s not found", id);
    assert_int_equal(pt_store_job_get(f->s, "bob", id, &j), PT_STORE_NOT_FOUND);
    assert_string_equal(pt_store_errmsg(f->s), expect);
    pt_store_transition_list tl;
    assert_int_equal(pt_store_job_transitions(f->s, "bob", id, &tl), PT_STORE_NOT_FOUND);
    assert_int_equal(tl.n, 0);
    assert_int_equal(pt_store_job_transition(f->s, "bob", id, PT_JOB_RUNNING, "x", NULL), PT_STORE_NOT_FOUND);
    pt_store_job_page page;
    assert_int_equal(pt_store_job_list(f->s, "bob", NULL, 0, NULL, &page), PT_STORE_OK);
    assert_int_equal(page.n, 0);
    pt_store_job_page_clear(&page);
    assert_int_equal(pt_store_job_get(f->s, "alice", id, &j), PT_STORE_OK);
    assert_int_equal(j.state, PT_JOB_QUEUED);
    pt_store_job_clear(&j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_create_and_get, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_idempotency, setup, teardown),
        cmocka_unit_test_setup_teardown(test_transition_side_effects_and_history, setup, teardown),
        cmocka_unit_test_setup_teardown(test_every_edge_legal_or_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_transition_argument_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel, setup, teardown),
        cmocka_unit_test_setup_teardown(test_claim_next_oldest_first, setup, teardown),
        cmocka_unit_test_setup_teardown(test_progress_and_versions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_result, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_filters_and_tokens, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stopped_and_its_reason, setup, teardown),
        cmocka_unit_test_setup_teardown(test_labels_and_filters, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unfinished_and_counts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_owner_isolation, setup, teardown),
    };
    return cmocka_run_group_tests_name("store_jobs", tests, NULL, NULL);
}
