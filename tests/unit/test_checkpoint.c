/* test_checkpoint.c — the checkpoint file format (engine/checkpoint.h) on
 * its own: every field round-trips bit for bit, the write is atomic (no
 * .partial left), and a truncated, bit-flipped, edited, malformed or foreign
 * file is refused with a message that says what is wrong.  The training
 * loop's resume is tested in test_train_resume.c. */
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

#include "engine/train/checkpoint.h"
#include "engine/train/config.h"
#include "tests/unit/tmp_fixture.h"

static char tmpdir[] = "/tmp/pt_test_ckpt_" "XX" "XX" "XX"; /* mkdtemp pattern */

static int setup(void **state)
{
    (void)state;
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    tfx_rmtree(tmpdir);
    return 0;
}

static void fill_state(pt_checkpoint_state *s)
{
    memset(s, 0, sizeof(*s));
    snprintf(s->config_sha256, sizeof s->config_sha256, "%064d", 7);
    s->data_crc32 = 0xdeadbeefu;
    s->n_structs = 400;
    s->n_train = 320;
    s->n_val = 40;
    s->n_test = 40;
    s->epoch = 2;
    s->position = 17;
    s->steps = 1234567890123LL;
    s->lines = 99;
    s->seconds = 12.345678901234567;
    snprintf(s->stop_reason, sizeof s->stop_reason, "max_steps");
    s->optim_step = 77;
    s->sched_lr = 1.0 / 3.0;
    s->sched_best = INFINITY;
    s->sched_step = -5;
    s->sched_bad_epochs = 3;
    s->sched_cooldown = 1;
    s->sched_reductions = 2;
    s->early_best = -INFINITY;
    s->early_bad_epochs = 4;
    s->best_val_mae = NAN;
    s->best_val_loss = 1e-300;
    s->first_loss = 6.02214076e23;
    s->epoch_window = (pt_checkpoint_window){.loss_sum = 0.1, .seconds = 2.5, .graphs = 3,
                                             .nodes = 4, .node_slots = 5, .edges = 6,
                                             .edge_slots = 7, .steps = 8};
    s->step_window.loss_sum = -0.0;
    s->norm_mean = -1.5;
    s->norm_std = 0.7;
    for (int z = 0; z <= PT_Z_MAX; z++) s->norm_atomref[z] = z * -0.123456789012345678;
}

#define N_FLOATS 1000

typedef struct buffers {
    float p[N_FLOATS], m[N_FLOATS], v[N_FLOATS], b[N_FLOATS];
} buffers;

static pt_checkpoint_tensors tensors(buffers *b)
{
    return (pt_checkpoint_tensors){.n = N_FLOATS, .params = b->p, .adam_m = b->m,
                                   .adam_v = b->v, .best = b->b};
}

static void write_sample(const char *path)
{
    pt_checkpoint_state s;
    fill_state(&s);
    buffers *b = malloc(sizeof *b);
    for (int i = 0; i < N_FLOATS; i++) {
        b->p[i] = (float)i * 0.5f;
        b->m[i] = -(float)i;
        b->v[i] = 1.0f / (float)(i + 1);
        b->b[i] = (float)(i % 7);
    }
    pt_checkpoint_tensors t = tensors(b);
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(pt_checkpoint_save(path, &s, &t, &errs), 0);
    pt_errors_close(&errs);
    free(b);
}

static void sample_path(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s", tmpdir, name);
}

static void test_round_trip(void **state)
{
    (void)state;
    char path[300];
    sample_path(path, sizeof path, "sample.ckpt");
    write_sample(path);
    char partial[320];
    snprintf(partial, sizeof partial, "%s.partial", path);
    assert_int_equal(access(partial, F_OK), -1);   /* renamed into place */

    pt_checkpoint ck;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(pt_checkpoint_open(&ck, path, &errs), 0);
    pt_checkpoint_state want;
    fill_state(&want);
    /* zero-initialised on both sides, so padding compares equal too */
    assert_memory_equal(&ck.state, &want, sizeof want);
    assert_int_equal(pt_checkpoint_numel(&ck), N_FLOATS);
    buffers *b = calloc(1, sizeof *b);
    pt_checkpoint_tensors t = tensors(b);
    assert_int_equal(pt_checkpoint_tensors_get(&ck, &t, &errs), 0);
    for (int i = 0; i < N_FLOATS; i++) {
        assert_true(b->p[i] == (float)i * 0.5f && b->m[i] == -(float)i);
        assert_true(b->v[i] == 1.0f / (float)(i + 1) && b->b[i] == (float)(i % 7));
    }
    t.n = N_FLOATS - 1;
    assert_int_equal(pt_checkpoint_tensors_get(&ck, &t, &errs), -1);
    assert_string_equal(errs.items[0].field, "params");
    assert_string_equal(errs.items[0].message,
                        "the checkpoint holds 1000 parameters, this model has 999");
    pt_checkpoint_close(&ck);
    pt_errors_close(&errs);
    free(b);
}

static long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* Opens path expecting failure; returns the first error (static copy). */
static pt_error open_fails(const char *path)
{
    pt_checkpoint ck;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(pt_checkpoint_open(&ck, path, &errs), -1);
    assert_true(errs.kept >= 1);
    pt_error e = errs.items[0];
    assert_string_equal(e.file, path);
    pt_errors_close(&errs);
    return e;
}

/* Replaces the first occurrence of `find` in the file by `repl` (same length). */
static void patch_file(const char *path, const char *find, const char *repl)
{
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    long n = file_size(path);
    char *buf = malloc((size_t)n);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    char *at = memmem(buf, (size_t)n, find, strlen(find));
    assert_non_null(at);
    assert_int_equal(strlen(find), strlen(repl));
    fseek(f, at - buf, SEEK_SET);
    fwrite(repl, 1, strlen(repl), f);
    fclose(f);
    free(buf);
}

static void test_error_truncated(void **state)
{
    (void)state;
    char path[300];
    sample_path(path, sizeof path, "truncated.ckpt");
    write_sample(path);
    assert_int_equal(truncate(path, file_size(path) - 100), 0);
    pt_error e = open_fails(path);
    assert_non_null(strstr(e.message, "-byte data section (truncated file?)"));
    assert_int_equal(truncate(path, 5), 0);
    e = open_fails(path);
    assert_string_equal(e.message, "truncated: 5 bytes, shorter than the 8-byte header length");
}

static void test_error_flipped_data(void **state)
{
    (void)state;
    char path[300];
    sample_path(path, sizeof path, "flipped.ckpt");
    write_sample(path);
    FILE *f = fopen(path, "r+b");
    fseek(f, -9, SEEK_END);   /* inside "best" */
    int c = fgetc(f);
    fseek(f, -9, SEEK_END);
    fputc(c ^ 0x10, f);
    fclose(f);
    pt_error e = open_fails(path);
    assert_string_equal(e.field, "state_crc32");
    assert_non_null(strstr(e.message, "): the checkpoint is corrupted"));
    assert_non_null(strstr(e.message, "checksum mismatch (stored "));
}

static void test_error_edited_metadata(void **state)
{
    (void)state;
    char path[300];
    sample_path(path, sizeof path, "edited.ckpt");
    write_sample(path);
    patch_file(path, "\"lines\":\"99\"", "\"lines\":\"98\"");   /* still well-formed */
    pt_error e = open_fails(path);
    assert_string_equal(e.field, "state_crc32");

    write_sample(path);
    patch_file(path, "\"lines\":\"99\"", "\"lines\":\"9x\"");
    e = open_fails(path);
    assert_string_equal(e.field, "lines");
    assert_string_equal(e.message, "must be a 64-bit integer, got \"9x\"");

    write_sample(path);
    patch_file(path, "\"lines\":", "\"lin_s\":");
    e = open_fails(path);
    assert_string_equal(e.field, "lines");
    assert_string_equal(e.message, "missing from the checkpoint's metadata");
}

static void test_error_not_a_checkpoint(void **state)
{
    (void)state;
    char path[300];
    sample_path(path, sizeof path, "model.safetensors");
    float w[4] = {1, 2, 3, 4};
    pt_st_entry t = {.name = "embedding.weight", .ndim = 2, .shape = {2, 2}, .data = w};
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(pt_safetensors_write(path, &t, 1, NULL, 0, &errs), 0);
    pt_errors_close(&errs);
    pt_error e = open_fails(path);
    assert_string_equal(e.field, "format");
    assert_string_equal(e.message, "not a packtrain checkpoint (format \"(none)\", expected "
                                   "\"" PT_CHECKPOINT_FORMAT "\")");

    sample_path(path, sizeof path, "missing.ckpt");
    e = open_fails(path);
    assert_string_equal(e.message, "cannot open: No such file or directory");
}

/* The hash ignores checkpoint_every and max_runtime_seconds and nothing
 * else. */
static void test_config_hash(void **state)
{
    (void)state;
    pt_job_config a, b;
    pt_job_config_defaults(&a);
    b = a;
    char ha[65], hb[65];
    assert_int_equal(pt_checkpoint_config_hash(&a, ha), 0);
    b.training.checkpoint_every = 7;
    b.max_runtime_seconds = 3600;
    assert_int_equal(pt_checkpoint_config_hash(&b, hb), 0);
    assert_string_equal(ha, hb);
    assert_int_equal(strlen(ha), 64);
    b.training.lr = 2e-3;
    assert_int_equal(pt_checkpoint_config_hash(&b, hb), 0);
    assert_string_not_equal(ha, hb);
    b = a;
    b.training.precision = PT_PRECISION_BF16;
    assert_int_equal(pt_checkpoint_config_hash(&b, hb), 0);
    assert_string_not_equal(ha, hb);
    /* "auto", "all" and a number are three configurations */
    char hall[65], h32[65];
    b = a;
    b.model.max_neighbors = PT_JOB_NEIGHBORS_ALL;
    assert_int_equal(pt_checkpoint_config_hash(&b, hall), 0);
    b.model.max_neighbors = 32;
    assert_int_equal(pt_checkpoint_config_hash(&b, h32), 0);
    assert_string_not_equal(ha, hall);
    assert_string_not_equal(ha, h32);
    assert_string_not_equal(hall, h32);
}

/* A job of max_neighbors null checkpointed before "all" existed hashes as
 * it did then (the hash below is what commit fff646b computed for it): its
 * stored text, read today, is "all". */
static void test_config_hash_all_was_null(void **state)
{
    (void)state;
    const char *then = "{\"model\":{\"max_neighbors\":null}}";
    const char *now = "{\"model\":{\"max_neighbors\":\"all\"}}";
    pt_job_config a, b;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(pt_job_config_parse(&a, then, strlen(then), NULL, &errs), 0);
    assert_int_equal(pt_job_config_parse(&b, now, strlen(now), NULL, &errs), 0);
    pt_errors_close(&errs);
    char ha[65], hb[65];
    assert_int_equal(pt_checkpoint_config_hash(&a, ha), 0);
    assert_int_equal(pt_checkpoint_config_hash(&b, hb), 0);
    assert_string_equal(ha, hb);
    assert_string_equal(ha, "773835a91443b38366ae71c6ae634155c4a66621a2686a44b444f7b0704a4df0");
}

/* The default configuration's hash as packtrain computed it before
 * training.precision existed (commit 2a44888): fp32 jobs checkpointed by
 * that version still resume.  Their stored configurations name the layout
 * of the defaults of then, one replica of 16 packs, and the 32 neighbours
 * that were the default before "auto". */
static void test_config_hash_predates_precision(void **state)
{
    (void)state;
    pt_job_config a;
    pt_job_config_defaults(&a);
    a.backend.replication_factor = 1;
    a.batching.model_batch_size = 16;
    a.model.max_neighbors = 32;
    char h[65];
    assert_int_equal(pt_checkpoint_config_hash(&a, h), 0);
    assert_string_equal(h, "fe006d0fe18c4511ed65e89a075a14cf918b9873c592875548a47f611b157d15");
}
int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_error_truncated),
        cmocka_unit_test(test_error_flipped_data),
        cmocka_unit_test(test_error_edited_metadata),
        cmocka_unit_test(test_error_not_a_checkpoint),
        cmocka_unit_test(test_config_hash),
        cmocka_unit_test(test_config_hash_predates_precision),
        cmocka_unit_test(test_config_hash_all_was_null),
    };
    return cmocka_run_group_tests_name("checkpoint", tests, setup, teardown);
}
