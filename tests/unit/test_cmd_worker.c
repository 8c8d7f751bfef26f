/* test_cmd_worker.c — `packtrain worker` as the scheduler sees it: the
 * command runs in a forked child (pt_cmd_worker, stdout on a pipe, stderr to
 * a log file) on 400 QM9 molecules with a tiny model, and the parent reads
 * its stdout line by line exactly as server/scheduler_worker.c does, parsing
 * every line with pt_worker_msg_parse.
 *
 * Proves: a full run speaks only valid protocol (step, progress, epoch,
 * checkpoint lines, done last) and exits 0; SIGTERM yields a checkpoint line
 * and exit 0 without done; --resume from that checkpoint continues the step
 * numbering with the next step and ends with done; bad arguments,
 * configuration, data and checkpoints give an error line and exit 1 (2 for
 * usage).  The pipe is shrunk to one page so a child cannot run far ahead of
 * the reader, which makes "signal after step 3" deterministic enough. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/core/errors.h"
#include "engine/data/ingest.h"
#include "server/cli/commands.h"
#include "server/sched/worker_proto.h"
#include "tests/unit/tmp_fixture.h"

#define MAX_MSGS 4096

static char tmpdir[] = "/tmp/pt_test_worker_" "XX" "XX" "XX"; /* mkdtemp pattern */
static char data_path[300], cfg_long[300], cfg_short[300];

static int setup(void **state)
{
    (void)state;
    if (!mkdtemp(tmpdir)) return -1;
    snprintf(data_path, sizeof data_path, "%s/qm9.ptd", tmpdir);
    int rc = tfx_ingest("tests/data/train_qm9_400.extxyz.gz", data_path);
    if (rc != 0) return -1;
    static const char *model =
        "\"model\":{\"hidden\":16,\"filters\":16,\"interactions\":1,\"gaussians\":12,"
        "\"cutoff\":5.0},\"batching\":{\"model_batch_size\":4},\"backend\":{\"threads\":1}";
    char text[1024];
    snprintf(cfg_long, sizeof cfg_long, "%s/long.json", tmpdir);
    snprintf(text, sizeof text, "{%s,\"training\":{\"epochs\":20,\"log_every\":1,\"seed\":2,"
             "\"checkpoint_every\":null}}", model);
    assert_int_equal(tfx_write(cfg_long, text), 0);
    snprintf(cfg_short, sizeof cfg_short, "%s/short.json", tmpdir);
    snprintf(text, sizeof text, "{%s,\"training\":{\"epochs\":2,\"log_every\":4,\"seed\":2,"
             "\"checkpoint_every\":25}}", model);
    assert_int_equal(tfx_write(cfg_short, text), 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tfx_rmtree(tmpdir);
    return 0;
}

/* --- running the command ------------------------------------------------------ */

typedef struct run {
    pid_t pid;
    FILE *out;               /* the child's stdout */
    int n;
    pt_worker_msg msgs[MAX_MSGS];
    int status;              /* waitpid status */
} run;

/* Forks `packtrain worker ARGS...` (NULL-terminated); stderr goes to
 * tmpdir/NAME.log. */
static void start(run *r, const char *name, ...)
{
    char *argv[32];
    int argc = 0;
    argv[argc++] = "worker";
    va_list ap;
    va_start(ap, name);
    for (char *a; argc < 31 && (a = va_arg(ap, char *));) argv[argc++] = a;
    va_end(ap);
    argv[argc] = NULL;
    char log[400];
    snprintf(log, sizeof log, "%s/%s.log", tmpdir, name);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fcntl(fds[0], F_SETPIPE_SZ, 4096);
    fflush(stdout);
    fflush(stderr);
    r->n = 0;
    r->pid = fork();
    assert_true(r->pid >= 0);
    if (r->pid == 0) {
        int err = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fds[1], 1);
        dup2(err, 2);
        close(fds[0]);
        close(fds[1]);
        close(err);
        int rc = pt_cmd_worker(argc, argv);
        fflush(stdout);
        fflush(stderr);
        _exit(rc);
    }
    close(fds[1]);
    r->out = fdopen(fds[0], "r");
    assert_non_null(r->out);
}

/* Reads and parses the next line; 0 at EOF.  Any line that is not valid
 * protocol fails the test. */
static int next(run *r)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t len = getline(&line, &cap, r->out);
    if (len <= 0) {
        free(line);
        return 0;
    }
    if (line[len - 1] == '\n') line[--len] = '\0';
    assert_true(r->n < MAX_MSGS);
    char err[256] = "";
    int rc = pt_worker_msg_parse(line, (size_t)len, &r->msgs[r->n], err, sizeof err);
    if (rc != 0) fprintf(stderr, "rejected: %s\n  line: %s\n", err, line);
    assert_int_equal(rc, 0);
    free(line);
    r->n++;
    return 1;
}

/* Reads to EOF and reaps the child; returns its exit status. */
static int finish(run *r)
{
    while (next(r)) {
    }
    fclose(r->out);
    assert_int_equal(waitpid(r->pid, &r->status, 0), r->pid);
    assert_true(WIFEXITED(r->status));
    return WEXITSTATUS(r->status);
}

static void clear(run *r)
{
    for (int i = 0; i < r->n; i++) pt_worker_msg_clear(&r->msgs[i]);
    r->n = 0;
}

static const pt_worker_msg *last(const run *r)
{
    assert_true(r->n > 0);
    return &r->msgs[r->n - 1];
}

static int count_kind(const run *r, pt_worker_msg_kind kind)
{
    int n = 0;
    for (int i = 0; i < r->n; i++) n += r->msgs[i].kind == kind;
    return n;
}

static void out_dir(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s", tmpdir, name);
}

/* --- tests ---------------------------------------------------------------------- */

static void test_full_run(void **state)
{
    (void)state;
    run *r = calloc(1, sizeof *r);
    char out[300];
    out_dir(out, sizeof out, "full");
    start(r, "full", "--job", "j-full", "--config", cfg_short, "--data", data_path, "--out", out,
          NULL);
    assert_int_equal(finish(r), 0);
    /* done is the last line, and the only one */
    assert_int_equal(last(r)->kind, PT_WORKER_MSG_DONE);
    assert_int_equal(count_kind(r, PT_WORKER_MSG_DONE), 1);
    assert_true(last(r)->best_val_mae > 0);
    char model[400];
    snprintf(model, sizeof model, "%s/model.safetensors", out);
    assert_string_equal(last(r)->path, model);
    assert_int_equal(count_kind(r, PT_WORKER_MSG_EPOCH), 2);
    assert_int_equal(count_kind(r, PT_WORKER_MSG_ERROR), 0);
    /* every metrics line is followed by its progress line; progress rises to 1 */
    double progress = 0;
    int64_t step = 0;
    for (int i = 0; i < r->n; i++) {
        const pt_worker_msg *m = &r->msgs[i];
        if (m->kind == PT_WORKER_MSG_STEP || m->kind == PT_WORKER_MSG_EPOCH) {
            assert_true(m->step >= step);
            step = m->step;
            assert_int_equal(r->msgs[i + 1].kind, PT_WORKER_MSG_PROGRESS);
            assert_int_equal(r->msgs[i + 1].step, m->step);
            assert_true(r->msgs[i + 1].progress >= progress);
            progress = r->msgs[i + 1].progress;
        }
        if (m->kind == PT_WORKER_MSG_STEP) {
            assert_true(isfinite(m->loss) && m->lr > 0 && m->graphs_per_s > 0);
            assert_non_null(m->extra_json);   /* nodes_per_s, padding, the phase times */
            assert_non_null(strstr(m->extra_json, "\"phase_forward_s\":"));
            assert_non_null(strstr(m->extra_json, "\"phase_optimizer_s\":"));
        }
        if (m->kind == PT_WORKER_MSG_CHECKPOINT) {
            assert_int_equal(m->step % 25 == 0 || r->msgs[i - 2].kind == PT_WORKER_MSG_EPOCH, 1);
            assert_true(m->epoch >= 1);
        }
    }
    assert_float_equal(progress, 1.0, 0);
    /* the newest checkpoint still exists (older ones are pruned to three) */
    int last_ck = -1;
    for (int i = 0; i < r->n; i++)
        if (r->msgs[i].kind == PT_WORKER_MSG_CHECKPOINT) last_ck = i;
    assert_true(last_ck > 0);
    assert_int_equal(access(r->msgs[last_ck].path, F_OK), 0);
    assert_int_equal(r->msgs[last_ck].step, step);
    clear(r);
    free(r);
}

/* SIGTERM after step 3: a checkpoint line, exit 0, no done.  Then --resume
 * continues with step ckpt+1 and finishes with done. */
static void test_sigterm_then_resume(void **state)
{
    (void)state;
    run *r = calloc(1, sizeof *r);
    char out[300];
    out_dir(out, sizeof out, "term");
    start(r, "term", "--job", "j-term", "--config", cfg_long, "--data", data_path, "--out", out,
          NULL);
    int signalled = 0;
    while (next(r)) {
        const pt_worker_msg *m = last(r);
        if (!signalled && m->kind == PT_WORKER_MSG_STEP && m->step >= 3) {
            assert_int_equal(kill(r->pid, SIGTERM), 0);
            signalled = 1;
        }
    }
    assert_true(signalled);
    fclose(r->out);
    assert_int_equal(waitpid(r->pid, &r->status, 0), r->pid);
    assert_true(WIFEXITED(r->status));
    assert_int_equal(WEXITSTATUS(r->status), 0);
    assert_int_equal(count_kind(r, PT_WORKER_MSG_DONE), 0);
    assert_int_equal(count_kind(r, PT_WORKER_MSG_ERROR), 0);
    const pt_worker_msg *ck = last(r);
    assert_int_equal(ck->kind, PT_WORKER_MSG_CHECKPOINT);
    int64_t ck_step = ck->step;
    assert_true(ck_step >= 3 && ck_step < 800);   /* stopped early, far from the end */
    assert_int_equal(access(ck->path, F_OK), 0);
    /* the checkpoint is of the last step reported */
    assert_int_equal(r->msgs[r->n - 3].kind, PT_WORKER_MSG_STEP);
    assert_int_equal(r->msgs[r->n - 3].step, ck_step);
    char resume[PT_STORE_PATH_MAX];
    snprintf(resume, sizeof resume, "%s", ck->path);
    clear(r);

    start(r, "resume", "--job", "j-term", "--config", cfg_long, "--data", data_path, "--out", out,
          "--resume", resume, NULL);
    assert_true(next(r));
    assert_int_equal(r->msgs[0].kind, PT_WORKER_MSG_STEP);
    assert_int_equal(r->msgs[0].step, ck_step + 1);
    assert_int_equal(finish(r), 0);
    assert_int_equal(last(r)->kind, PT_WORKER_MSG_DONE);
    assert_int_equal(count_kind(r, PT_WORKER_MSG_EPOCH), 20);
    /* one step line per step from ck_step + 1 on: none skipped or repeated */
    int64_t expect = ck_step + 1;
    for (int i = 0; i < r->n; i++)
        if (r->msgs[i].kind == PT_WORKER_MSG_STEP) assert_int_equal(r->msgs[i].step, expect++);
    clear(r);
    free(r);
}

/* Runs the worker expecting an error line; returns it (copied). */
static void expect_error(const char *name, int want_status, const char *want, ...)
{
    char *args[16];
    int n = 0;
    va_list ap;
    va_start(ap, want);
    for (char *a; n < 15 && (a = va_arg(ap, char *));) args[n++] = a;
    va_end(ap);
    args[n] = NULL;
    run *r = calloc(1, sizeof *r);
    start(r, name, args[0], args[1], args[2], args[3], args[4], args[5], args[6], args[7],
          args[8], args[9], args[10], args[11], NULL);
    assert_int_equal(finish(r), want_status);
    assert_int_equal(r->n, 1);
    assert_int_equal(last(r)->kind, PT_WORKER_MSG_ERROR);
    if (!strstr(last(r)->message, want)) fprintf(stderr, "message: %s\n", last(r)->message);
    assert_non_null(strstr(last(r)->message, want));
    clear(r);
    free(r);
}

static void test_errors(void **state)
{
    (void)state;
    char out[300], bad_cfg[300], bad_ckpt[300];
    out_dir(out, sizeof out, "err");
    expect_error("usage", 2, "--data is required", "--job", "j", "--config", cfg_short, "--out",
                 out, NULL);
    expect_error("usage2", 2, "unexpected argument '--bogus'", "--bogus", "1", NULL);
    expect_error("usage3", 2, "--out needs a value", "--job=j", "--out", NULL);   /* getopt_long: both forms */
    expect_error("usage4", 2, "unexpected argument 'stray'", "--job=j", "stray", NULL);

    snprintf(bad_cfg, sizeof bad_cfg, "%s/bad.json", tmpdir);
    assert_int_equal(tfx_write(bad_cfg, "{\"training\":{\"epochs\":2,\"lr\":-1}}"), 0);
    expect_error("badcfg", 1, "invalid job configuration: ", "--job", "j", "--config", bad_cfg,
                 "--data", data_path, "--out", out, NULL);
    expect_error("badcfg2", 1, "training.lr", "--job", "j", "--config", bad_cfg, "--data",
                 data_path, "--out", out, NULL);

    expect_error("nodata", 1, "cannot open the dataset: /nonexistent.ptd", "--job", "j",
                 "--config", cfg_short, "--data", "/nonexistent.ptd", "--out", out, NULL);

    snprintf(bad_ckpt, sizeof bad_ckpt, "%s/bad.ckpt", tmpdir);
    assert_int_equal(tfx_write(bad_ckpt, "not a checkpoint at all, just text"), 0);
    expect_error("badckpt", 1, "training failed: ", "--job", "j", "--config", cfg_short,
                 "--data", data_path, "--out", out, "--resume", bad_ckpt, NULL);
}

static void test_help(void **state)
{
    (void)state;
    run *r = calloc(1, sizeof *r);
    start(r, "help", "--help", NULL);
    /* usage text is not protocol: read raw */
    char buf[256];
    assert_non_null(fgets(buf, sizeof buf, r->out));
    assert_non_null(strstr(buf, "usage: packtrain worker --job ID"));
    while (fgets(buf, sizeof buf, r->out)) {
    }
    fclose(r->out);
    assert_int_equal(waitpid(r->pid, &r->status, 0), r->pid);
    assert_int_equal(WEXITSTATUS(r->status), 0);
    free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_help),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_full_run),
        cmocka_unit_test(test_sigterm_then_resume),
    };
    return cmocka_run_group_tests_name("cmd_worker", tests, setup, teardown);
}
