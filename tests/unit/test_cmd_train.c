/* test_cmd_train.c — `packtrain train` with checkpoints: --checkpoint-every
 * writes them (newest three kept), Ctrl-C (SIGINT) stops with a checkpoint
 * and prints how to continue, --resume continues with the next step and
 * ends like the uninterrupted run; bad values get a clear message.  The
 * command runs in a forked child (pt_cmd_train) with stdout on a one-page
 * pipe, on 400 QM9 molecules with a tiny model. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "engine/core/errors.h"
#include "engine/data/ingest.h"
#include "server/cli/commands.h"
#include "tests/unit/tmp_fixture.h"

static char tmpdir[] = "/tmp/pt_test_cmd_train_" "XX" "XX" "XX"; /* mkdtemp pattern */
static char data_path[300], cfg_path[300], emt_path[300];

static int write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fputs(text, f);
    return fclose(f);
}

static int setup(void **state)
{
    (void)state;
    if (!mkdtemp(tmpdir)) return -1;
    snprintf(data_path, sizeof data_path, "%s/qm9.ptd", tmpdir);
    int rc = tfx_ingest("tests/data/train_qm9_400.extxyz.gz", data_path);
    snprintf(emt_path, sizeof emt_path, "%s/emt.ptd", tmpdir);
    if (rc == 0) rc = tfx_ingest("tests/data/emt_train_240.extxyz.gz", emt_path);
    snprintf(cfg_path, sizeof cfg_path, "%s/job.json", tmpdir);
    FILE *f = fopen(cfg_path, "w");
    if (rc != 0 || !f) return -1;
    fputs("{\"model\":{\"hidden\":16,\"filters\":16,\"interactions\":1,\"gaussians\":12},"
          "\"batching\":{\"model_batch_size\":4},\"backend\":{\"threads\":1},"
          "\"training\":{\"epochs\":20,\"log_every\":1,\"seed\":9}}", f);
    fclose(f);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tfx_rmtree(tmpdir);
    return 0;
}

typedef struct child {
    pid_t pid;
    FILE *out;
    char err_path[400];
} child;

/* Forks `packtrain train ARGS...` (NULL-terminated), stderr to NAME.err. */
static void start(child *c, const char *name, ...)
{
    char *argv[16] = {"train"};
    int argc = 1;
    va_list ap;
    va_start(ap, name);
    for (char *a; argc < 15 && (a = va_arg(ap, char *));) argv[argc++] = a;
    va_end(ap);
    snprintf(c->err_path, sizeof c->err_path, "%s/%s.err", tmpdir, name);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fcntl(fds[0], F_SETPIPE_SZ, 4096);
    fflush(stdout);
    fflush(stderr);
    c->pid = fork();
    assert_true(c->pid >= 0);
    if (c->pid == 0) {
        int err = open(c->err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fds[1], 1);
        dup2(err, 2);
        close(fds[0]);
        close(fds[1]);
        close(err);
        int rc = pt_cmd_train(argc, argv);
        fflush(stdout);
        fflush(stderr);
        _exit(rc);
    }
    close(fds[1]);
    c->out = fdopen(fds[0], "r");
}

/* The "step" of the next JSON line of stdout, -1 at EOF; kind in *kind. */
static long long next_step(child *c, char *kind, size_t len)
{
    char line[2048];
    if (!fgets(line, sizeof line, c->out)) return -1;
    json_error_t jerr;
    json_t *o = json_loads(line, 0, &jerr);
    assert_non_null(o);
    snprintf(kind, len, "%s", json_string_value(json_object_get(o, "kind")));
    long long step = json_integer_value(json_object_get(o, "step"));
    json_decref(o);
    return step;
}

static int wait_exit(child *c)
{
    char kind[16];
    while (next_step(c, kind, sizeof kind) >= 0) {
    }
    fclose(c->out);
    int status;
    assert_int_equal(waitpid(c->pid, &status, 0), c->pid);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static void read_err(const child *c, char *buf, size_t len)
{
    FILE *f = fopen(c->err_path, "r");
    assert_non_null(f);
    size_t n = fread(buf, 1, len - 1, f);
    buf[n] = '\0';
    fclose(f);
}

static void test_bad_checkpoint_every(void **state)
{
    (void)state;
    child c;
    start(&c, "bad", data_path, "--checkpoint-every", "-3", NULL);
    assert_int_equal(wait_exit(&c), 2);
    char err[2048];
    read_err(&c, err, sizeof err);
    assert_non_null(strstr(err, "packtrain train: --checkpoint-every must be an integer from 0 "
                                "to 1000000000, got '-3'"));
}

/* A forces weight on data without forces is a configuration error (exit
 * 2, the key and the reason), before anything is trained; on data with
 * forces the job trains them and the summary says how well, in eV/Å,
 * next to the MAE of predicting zero forces. */
static void test_forces(void **state)
{
    (void)state;
    char job[400], out[400], err[4096];
    snprintf(job, sizeof job, "%s/forces.json", tmpdir);
    assert_int_equal(write_file(job, "{\"target\":\"energy\",\"model\":{\"hidden\":16,"
                                     "\"filters\":16,\"interactions\":1,\"gaussians\":12,"
                                     "\"cutoff\":4.0,\"max_neighbors\":null},"
                                     "\"backend\":{\"threads\":1},\"training\":{\"epochs\":2,"
                                     "\"log_every\":1,\"loss\":{\"forces_weight\":1}}}"), 0);
    child c;
    snprintf(out, sizeof out, "%s/forces-qm9", tmpdir);
    start(&c, "forces-qm9", data_path, "--config", job, "--out", out, NULL);
    assert_int_equal(wait_exit(&c), 2);
    read_err(&c, err, sizeof err);
    assert_non_null(strstr(err, "training.loss.forces_weight: forces weight 1, but none of the "
                                "dataset's 400 structures has force labels"));
    assert_null(strstr(err, "steps,"));
    snprintf(out, sizeof out, "%s/forces-emt", tmpdir);
    start(&c, "forces-emt", emt_path, "--config", job, "--out", out, NULL);
    assert_int_equal(wait_exit(&c), 0);
    read_err(&c, err, sizeof err);
    if (!strstr(err, "packtrain train: forces (eV/A): best val MAE "))
        fail_msg("no forces summary in: %s", err);
    assert_non_null(strstr(err, "; predicting zero forces: test MAE "));
}

/* Ctrl-C after step 5 with a checkpoint every 2 steps, then --resume. */
static void test_interrupt_and_resume(void **state)
{
    (void)state;
    char out[300], ck[400], kind[16];
    snprintf(out, sizeof out, "%s/run", tmpdir);
    child c;
    start(&c, "first", data_path, "--config", cfg_path, "--out", out, "--checkpoint-every", "2",
          NULL);
    long long step, stopped = -1;
    while ((step = next_step(&c, kind, sizeof kind)) >= 0)
        if (stopped < 0 && step >= 5) {
            kill(c.pid, SIGINT);
            stopped = step;
        }
    assert_true(stopped >= 5);
    assert_int_equal(wait_exit(&c), 0);
    char err[4096];
    read_err(&c, err, sizeof err);
    const char *hint = strstr(err, "packtrain train: to continue: packtrain train ");
    assert_non_null(hint);
    const char *resume = strstr(hint, "--resume ");
    assert_non_null(resume);
    snprintf(ck, sizeof ck, "%s", resume + strlen("--resume "));
    ck[strcspn(ck, "\n")] = '\0';
    assert_int_equal(access(ck, F_OK), 0);
    /* the newest three periodic checkpoints and the one of the stop */
    int kept = 0;
    for (int s = 1; s <= 40; s++) {
        char p[400];
        snprintf(p, sizeof p, "%s/checkpoints/ckpt-%010d.safetensors", out, s);
        kept += access(p, F_OK) == 0;
    }
    assert_int_equal(kept, 3);

    start(&c, "second", data_path, "--config", cfg_path, "--out", out, "--resume", ck, NULL);
    long long first = next_step(&c, kind, sizeof kind);
    assert_string_equal(kind, "step");
    long long ck_step = atoll(strrchr(ck, '-') + 1);
    assert_int_equal(first, ck_step + 1);
    assert_int_equal(wait_exit(&c), 0);
    read_err(&c, err, sizeof err);
    assert_non_null(strstr(err, " 20 epochs in "));
}

/* A job's max_runtime_seconds stops the run after the step that passes it,
 * with a checkpoint to continue from, and fails it. */
static void test_max_runtime(void **state)
{
    (void)state;
    char cfg[300], out[300], err[4096];
    snprintf(cfg, sizeof cfg, "%s/limited.json", tmpdir);
    snprintf(out, sizeof out, "%s/limited", tmpdir);
    assert_int_equal(tfx_write(cfg, "{\"model\":{\"hidden\":16,\"filters\":16,\"interactions\":1,"
                                    "\"gaussians\":12},\"batching\":{\"model_batch_size\":4},"
                                    "\"backend\":{\"threads\":1},\"max_runtime_seconds\":0.001,"
                                    "\"training\":{\"epochs\":20,\"log_every\":1,\"seed\":9}}"), 0);
    child c;
    start(&c, "limited", data_path, "--config", cfg, "--out", out, NULL);
    assert_int_equal(wait_exit(&c), 1);
    read_err(&c, err, sizeof err);
    assert_non_null(strstr(err, "1 steps, 0 epochs"));
    assert_non_null(strstr(err, "--resume "));
    assert_non_null(strstr(err, "packtrain train: exceeded max_runtime_seconds=0.001\n"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_checkpoint_every),
        cmocka_unit_test(test_forces),
        cmocka_unit_test(test_interrupt_and_resume),
        cmocka_unit_test(test_max_runtime),
    };
    return cmocka_run_group_tests_name("cmd_train", tests, setup, teardown);
}
