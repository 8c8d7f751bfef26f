/* test_client.c — the REST client (server/client.h) and the CI commands
 * (submit, status, wait, logs, cancel) against a real app without workers:
 * the event stream parser and --follow (a job's log streamed, resumed after
 * a given line, the end's exit status), transport
 * errors, uploads, problem descriptions with line numbers, and the exit
 * status contract: 0 done, 1 the job did not succeed, 2 usage, 3 the server
 * (unreachable), 4 the request refused, 5 --timeout, 130 interrupted (a real
 * `packtrain` process sent SIGINT), with what becomes of the job. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "server/cli/client.h"
#include "server/cli/commands.h"
#include "tests/unit/api_fixture.h"

static char g_cfg[300], g_bad_cfg[300];

static int setup(void **state)
{
    static api_fx fx;
    if (fx_start(&fx, NULL) != 0) return -1;
    snprintf(g_cfg, sizeof g_cfg, "%s/job.json", fx.dir);
    snprintf(g_bad_cfg, sizeof g_bad_cfg, "%s/bad.json", fx.dir);
    FILE *f = fopen(g_cfg, "w");
    fputs("{\"training\": {\"epochs\": 1}}", f);
    fclose(f);
    f = fopen(g_bad_cfg, "w");
    fputs("{\"training\": {\"epochs\": -1}}", f);
    fclose(f);
    *state = &fx;
    return 0;
}

static int teardown(void **state)
{
    fx_stop(*state);
    return 0;
}

/* Runs a command with stdout and stderr sent to a file; returns its status
 * and leaves what it printed in out (static). */
static int run_cmd(const char *out_path, int argc, char **argv)
{
    fflush(stdout);
    fflush(stderr);
    int saved_out = dup(1), saved_err = dup(2);
    int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    close(fd);
    int rc = pt_cmd_client(argc, argv);
    fflush(stdout);
    fflush(stderr);
    dup2(saved_out, 1);
    dup2(saved_err, 2);
    close(saved_out);
    close(saved_err);
    return rc;
}

static const char *slurp(const char *path)
{
    static char buf[8192];
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = '\0';
    return buf;
}

static void test_init_and_transport_errors(void **state)
{
    (void)state;
    pt_client c;
    assert_int_equal(pt_client_init(&c, "ftp://example", NULL), -1);
    assert_string_equal(c.err, "the server URL must start with http:// or https://, got 'ftp://example'");
    pt_client_close(&c);
    assert_int_equal(pt_client_init(&c, "http://127.0.0.1:1/", "tok"), 0);
    assert_string_equal(c.base, "http://127.0.0.1:1");
    pt_client_resp r;
    assert_int_equal(pt_client_request(&c, "GET", "/healthz", NULL, NULL, 0, &r), -1);
    assert_non_null(strstr(c.err, "GET http://127.0.0.1:1/healthz: "));
    pt_client_resp_clear(&r);
    pt_client_close(&c);
}

static void test_upload_and_describe(void **state)
{
    api_fx *fx = *state;
    pt_client c;
    assert_int_equal(pt_client_init(&c, fx->base, NULL), 0);
    pt_client_resp r;
    assert_int_equal(pt_client_upload(&c, "/v1/datasets?name=demo", "tests/data/api_demo_qm9_64.extxyz", &r), 0);
    assert_int_equal(r.status, 201);
    assert_int_equal(json_integer_value(json_object_get(r.json, "n_structures")), 64);
    assert_non_null(strstr(r.location, "/v1/datasets/ds_"));
    pt_client_resp_clear(&r);
    char bad[300];
    snprintf(bad, sizeof bad, "%s/bad.xyz", fx->dir);
    FILE *f = fopen(bad, "w");
    fputs("1\nProperties=species:S:1:pos:R:3 e=1\nQq 0 0 0\n", f);
    fclose(f);
    assert_int_equal(pt_client_upload(&c, "/v1/datasets?name=bad.xyz", bad, &r), 0);
    assert_int_equal(r.status, 422);
    char msg[1024];
    pt_client_describe_error(&r, msg, sizeof msg);
    assert_non_null(strstr(msg, "HTTP 422: 'bad.xyz' is not a valid dataset: 1 problem\n  line 3: "));
    pt_client_resp_clear(&r);
    assert_int_equal(pt_client_upload(&c, "/v1/datasets", "/nonexistent/file.xyz", &r), -1);
    assert_string_equal(c.err, "cannot read /nonexistent/file.xyz: No such file or directory");
    pt_client_resp_clear(&r);
    /* The reused handle is back to plain GETs after an upload. */
    assert_int_equal(pt_client_request(&c, "GET", "/healthz", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    pt_client_resp_clear(&r);
    pt_client_close(&c);
}

static void test_escape(void **state)
{
    (void)state;
    char out[64];
    assert_int_equal(pt_client_escape("water 20k/é&x=1~a-b.c_d", out, sizeof out), 0);
    assert_string_equal(out, "water%2020k%2F%C3%A9%26x%3D1~a-b.c_d");
    char small[8];
    assert_int_equal(pt_client_escape("a b c d", small, sizeof small), -1);   /* "a%20b%20c%20d" */
    assert_string_equal(small, "");
}

static void test_submit_status_cancel(void **state)
{
    api_fx *fx = *state;
    char out[300];
    snprintf(out, sizeof out, "%s/out.txt", fx->dir);
    char *submit[] = {"submit", "--server", fx->base, "--dataset", "tests/data/api_demo_qm9_64.extxyz", "--config",
                      g_cfg, NULL};
    assert_int_equal(run_cmd(out, 7, submit), 0);
    char job[64] = "";
    const char *text = slurp(out);   /* "uploaded ..." on stderr, then the job id alone on stdout */
    /* test_upload_and_describe stored this file already: the server says so */
    assert_non_null(strstr(text, "packtrain submit: already uploaded: tests/data/api_demo_qm9_64.extxyz as dataset ds_"));
    const char *id = strstr(text, "\njob_");
    assert_non_null(id);
    snprintf(job, sizeof job, "%.20s", id + 1);
    char *status[] = {"status", job, "--server", fx->base, NULL};
    assert_int_equal(run_cmd(out, 4, status), 0);
    assert_non_null(strstr(slurp(out), "\"state\": \"queued\""));
    char *cancel[] = {"cancel", job, "--server", fx->base, NULL};
    assert_int_equal(run_cmd(out, 4, cancel), 0);
    char want[160];
    snprintf(want, sizeof want, "%s cancelled\n", job);
    assert_string_equal(slurp(out), want);
    /* Waiting on a job that ended badly exits 1 with the reason. */
    char *wait[] = {"status", job, "--wait", "--server", fx->base, NULL};
    assert_int_equal(run_cmd(out, 5, wait), 1);
    snprintf(want, sizeof want, "packtrain status: %s cancelled: cancelled by local through the API", job);
    assert_non_null(strstr(slurp(out), want));
    /* a request the server refuses: 4 */
    assert_int_equal(run_cmd(out, 4, cancel), 4);
    assert_non_null(strstr(slurp(out), "packtrain cancel: the job was not cancelled: HTTP 409: "));
}

static void test_refusals(void **state)
{
    api_fx *fx = *state;
    char out[300];
    snprintf(out, sizeof out, "%s/out.txt", fx->dir);
    char *bad_cfg[] = {"submit", "--server", fx->base, "--dataset-id", "ds_0000000000000000", "--config", g_bad_cfg, NULL};
    assert_int_equal(run_cmd(out, 7, bad_cfg), 4);
    const char *text = slurp(out);
    assert_non_null(strstr(text, "packtrain submit: the job was refused: HTTP 422: the job is not valid: 2 problems"));
    assert_non_null(strstr(text, "\n  training.epochs: must be an integer"));
    assert_non_null(strstr(text, "\n  dataset: there is no dataset 'ds_0000000000000000'"));
    char *status[] = {"status", "job_0000000000000000", "--server", fx->base, NULL};
    assert_int_equal(run_cmd(out, 4, status), 4);
    assert_string_equal(slurp(out), "packtrain status: cannot read the job: HTTP 404: there is no job "
                                    "'job_0000000000000000'\n");
    char *missing[] = {"submit", "--server", fx->base, "--dataset", "x.xyz", NULL};
    assert_int_equal(run_cmd(out, 5, missing), 2);
    assert_non_null(strstr(slurp(out), "packtrain submit: --config job.json is required\n"));
    char *both[] = {"submit", "--config", g_cfg, NULL};
    assert_int_equal(run_cmd(out, 3, both), 2);
    assert_non_null(strstr(slurp(out), "packtrain submit: give either --dataset FILE or --dataset-id ID\n"));
    char *nojob[] = {"cancel", NULL};
    assert_int_equal(run_cmd(out, 1, nojob), 2);
    assert_non_null(strstr(slurp(out), "packtrain cancel: which job? give its id (job_...)\n"));
    char *badurl[] = {"status", "job_1", "--server", "localhost:8080", NULL};
    assert_int_equal(run_cmd(out, 4, badurl), 2);
    assert_non_null(strstr(slurp(out), "the server URL must start with http:// or https://"));
    char *unreachable[] = {"status", "job_1", "--wait", "--retry-for", "0", "--server", "http://127.0.0.1:1", NULL};
    assert_int_equal(run_cmd(out, 7, unreachable), 3);
    assert_non_null(strstr(slurp(out), "packtrain status: giving up: GET http://127.0.0.1:1/v1/jobs/job_1?wait=25: "));
    char *down[] = {"cancel", "job_1", "--server=http://127.0.0.1:1", NULL};
    assert_int_equal(run_cmd(out, 3, down), 3);
    assert_non_null(strstr(slurp(out), "packtrain cancel: POST http://127.0.0.1:1/v1/jobs/job_1/cancel: "));
    /* usage errors: 2, whatever the option */
    char *unknown[] = {"status", "job_1", "--bogus", NULL};
    assert_int_equal(run_cmd(out, 3, unknown), 2);
    assert_non_null(strstr(slurp(out), "packtrain status: unknown option '--bogus'\n"));
    char *foreign[] = {"cancel", "job_1", "--wait", NULL};
    assert_int_equal(run_cmd(out, 3, foreign), 2);
    assert_non_null(strstr(slurp(out), "packtrain cancel: unknown option '--wait'\n"));
    char *novalue[] = {"status", "job_1", "--server", NULL};
    assert_int_equal(run_cmd(out, 3, novalue), 2);
    assert_non_null(strstr(slurp(out), "packtrain status: --server needs a value\n"));
    char *lone[] = {"status", "job_1", "--timeout", "5", NULL};
    assert_int_equal(run_cmd(out, 4, lone), 2);
    assert_non_null(strstr(slurp(out), "packtrain status: --timeout goes with --wait (or --follow)\n"));
    char *badtime[] = {"status", "job_1", "--wait", "--timeout=-1", NULL};
    assert_int_equal(run_cmd(out, 4, badtime), 2);
    assert_non_null(strstr(slurp(out), "packtrain status: --timeout must be seconds >= 0, got '-1'\n"));
    char *two[] = {"status", "job_1", "job_2", NULL};
    assert_int_equal(run_cmd(out, 3, two), 2);
    assert_non_null(strstr(slurp(out), "packtrain status: unexpected argument 'job_2'\n"));
    char *nofile[] = {"submit", "--dataset=/nonexistent/x.xyz", "--config", g_cfg, "--server", fx->base, NULL};
    assert_int_equal(run_cmd(out, 6, nofile), 2);
    char *help[] = {"submit", "--help", NULL};
    assert_int_equal(run_cmd(out, 2, help), 0);
    assert_non_null(strstr(slurp(out), "  130  interrupted (Ctrl-C or SIGTERM)\n"));
}

/* A job that failed: 1, the reason the last line. */
static void test_job_failed(void **state)
{
    api_fx *fx = *state;
    char out[300], id[64];
    snprintf(out, sizeof out, "%s/out.txt", fx->dir);
    char ds[64];
    assert_int_equal(fx_demo_dataset(fx, NULL, ds, sizeof ds), 0);
    fx_cancel_queued(fx);
    assert_int_equal(fx_job(fx, NULL, ds, id, sizeof id), 0);
    fx_claim(fx, id);
    assert_int_equal(pt_store_job_transition(fx->db, NULL, id, PT_JOB_FAILED, "the loss became NaN", NULL),
                     PT_STORE_OK);
    char *wait[] = {"status", id, "--wait", "--server=", NULL};
    char server[160];
    snprintf(server, sizeof server, "--server=%s", fx->base);
    wait[3] = server;
    assert_int_equal(run_cmd(out, 4, wait), 1);
    char want[160];
    snprintf(want, sizeof want, "packtrain status: %s failed: the loss became NaN\n", id);
    assert_non_null(strstr(slurp(out), want));
}

/* --timeout: 5.  The job submit started is cancelled, unless --detach; a
 * job status only watched keeps running. */
static void test_timeout(void **state)
{
    api_fx *fx = *state;   /* no workers: a job stays queued */
    char out[300], ds[64];
    snprintf(out, sizeof out, "%s/out.txt", fx->dir);
    assert_int_equal(fx_demo_dataset(fx, NULL, ds, sizeof ds), 0);
    fx_cancel_queued(fx);
    char *submit[] = {"submit", "--server", fx->base, "--dataset-id", ds, "--config", g_cfg, "--wait",
                      "--timeout=1", NULL};
    assert_int_equal(run_cmd(out, 9, submit), 5);
    const char *text = slurp(out);
    const char *id = strstr(text, "job_");
    assert_non_null(id);
    char job[32];
    snprintf(job, sizeof job, "%.20s", id);
    char want[200];
    snprintf(want, sizeof want, "packtrain submit: --timeout passed; cancelled %s (now cancelled; --detach leaves "
             "a job running)\n", job);
    assert_non_null(strstr(text, want));
    pt_store_job j;
    assert_int_equal(pt_store_job_get(fx->db, NULL, job, &j), PT_STORE_OK);
    assert_int_equal(j.state, PT_JOB_CANCELLED);
    pt_store_job_clear(&j);

    char *detach[] = {"submit", "--server", fx->base, "--dataset-id", ds, "--config", g_cfg, "--wait",
                      "--timeout", "1", "--detach", NULL};
    assert_int_equal(run_cmd(out, 11, detach), 5);
    text = slurp(out);
    snprintf(job, sizeof job, "%.20s", strstr(text, "job_"));
    snprintf(want, sizeof want, "packtrain submit: --timeout passed; %s keeps running (packtrain status %s --wait "
             "follows it)\n", job, job);
    assert_non_null(strstr(text, want));
    assert_int_equal(pt_store_job_get(fx->db, NULL, job, &j), PT_STORE_OK);
    assert_int_equal(j.state, PT_JOB_QUEUED);
    pt_store_job_clear(&j);
    char *watch[] = {"status", job, "--server", fx->base, "--wait", "--timeout", "1", NULL};
    assert_int_equal(run_cmd(out, 7, watch), 5);
    snprintf(want, sizeof want, "packtrain status: --timeout passed; %s keeps running", job);
    assert_non_null(strstr(slurp(out), want));
    assert_int_equal(pt_store_job_get(fx->db, NULL, job, &j), PT_STORE_OK);
    assert_int_equal(j.state, PT_JOB_QUEUED);
    pt_store_job_clear(&j);
    fx_cancel_queued(fx);
}

/* Ctrl-C of a real `packtrain submit --wait` process: 130, and the job it
 * submitted is cancelled (the message says so). */
static void test_interrupt(void **state)
{
    api_fx *fx = *state;
    char out[300], ds[64];
    snprintf(out, sizeof out, "%s/int.txt", fx->dir);
    assert_int_equal(fx_demo_dataset(fx, NULL, ds, sizeof ds), 0);
    fx_cancel_queued(fx);
    const char *bin = getenv("PACKTRAIN_BIN");
    if (!bin || !bin[0]) bin = "bin/packtrain";
    char *argv[] = {(char *)bin, "submit", "--server", fx->base, "--dataset-id", ds, "--config", g_cfg, "--wait",
                    NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid;
    extern char **environ;
    assert_int_equal(posix_spawn(&pid, bin, &fa, NULL, argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    /* once it follows the job (its id is printed), Ctrl-C */
    for (int i = 0; i < 500 && !strstr(slurp(out), "queued job_"); i++) usleep(20000);
    assert_non_null(strstr(slurp(out), "packtrain submit: queued job_"));
    usleep(300000);
    kill(pid, SIGINT);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 130);
    const char *text = slurp(out);
    char job[32];
    snprintf(job, sizeof job, "%.20s", strstr(text, "job_"));
    char want[200];
    snprintf(want, sizeof want, "packtrain submit: interrupted; cancelled %s (now cancelled;", job);
    assert_non_null(strstr(text, want));
    pt_store_job j;
    assert_int_equal(pt_store_job_get(fx->db, NULL, job, &j), PT_STORE_OK);
    assert_int_equal(j.state, PT_JOB_CANCELLED);
    pt_store_job_clear(&j);
}

/* ---- the event stream parser and --follow -------------------------------------------------- */

typedef struct seen {
    int n;
    char name[8][16], data[8][64], id[8][64];
    const pt_sse_parser *p;
} seen;

static int collect(void *ud, const char *event, const char *data, size_t len)
{
    seen *s = ud;
    assert_int_equal(strlen(data), len);
    if (s->n < 8) {
        snprintf(s->name[s->n], sizeof s->name[0], "%s", event);
        snprintf(s->data[s->n], sizeof s->data[0], "%s", data);
        snprintf(s->id[s->n], sizeof s->id[0], "%s", s->p->last_id);
    }
    s->n++;
    return 0;
}

/* Any split of the bytes between two reads gives the same events: \r\n cut
 * in two is one line end; an id counts once its event is dispatched, so
 * the id of an event cut short is not where a reconnection resumes. */
static void test_sse_parser(void **state)
{
    (void)state;
    static const char text[] = ": hello\r\nretry: 100\r\n\r\nid: 7\nevent: log\ndata: {\"line\":\"a\"}\n\n"
                               "data: one\rdata:two\r\rid: 9\r\nevent: end\r\ndata\r\n\r\nid: 12\ndata: cut";
    size_t n = sizeof text - 1;
    for (size_t cut = 0; cut <= n; cut++) {
        seen s = {0};
        pt_sse_parser p;
        pt_sse_parser_init(&p, collect, &s);
        s.p = &p;
        assert_int_equal(pt_sse_parser_feed(&p, text, cut), 0);
        assert_int_equal(pt_sse_parser_feed(&p, text + cut, n - cut), 0);
        assert_int_equal(s.n, 3);
        assert_string_equal(s.name[0], "log");
        assert_string_equal(s.data[0], "{\"line\":\"a\"}");
        assert_string_equal(s.id[0], "7");
        assert_string_equal(s.name[1], "message");   /* no event field */
        assert_string_equal(s.data[1], "one\ntwo");
        assert_string_equal(s.id[1], "7");            /* an event without id keeps the last */
        assert_string_equal(s.name[2], "end");
        assert_string_equal(s.data[2], "");
        assert_string_equal(s.id[2], "9");
        assert_string_equal(p.last_id, "9");          /* not 12: that event never ended */
        /* a new connection forgets the half-read event */
        pt_sse_parser_restart(&p);
        assert_int_equal(pt_sse_parser_feed(&p, "\n\nid: 13\nevent: log\ndata: b\n\n", 29), 0);
        assert_int_equal(s.n, 4);
        assert_string_equal(p.last_id, "13");
        pt_sse_parser_close(&p);
    }
}

static int stop_at_first(void *ud, const char *event, const char *data, size_t len)
{
    (void)event, (void)data, (void)len;
    (*(int *)ud)++;
    return 1;
}

/* A failed job with a log: `logs --follow` prints it whole (its last line
 * without a newline too, bytes that are not UTF-8 as U+FFFD) and exits 1
 * with the reason; --json gives one object per line, log ids being the
 * byte offsets; the stream resumes after a given offset, answers 204 at the
 * end of a final job's log and 400 past it. */
static void test_follow(void **state)
{
    api_fx *fx = *state;
    char out[300], ds[64], id[64], path[600];
    snprintf(out, sizeof out, "%s/follow.txt", fx->dir);
    assert_int_equal(fx_demo_dataset(fx, NULL, ds, sizeof ds), 0);
    fx_cancel_queued(fx);
    assert_int_equal(fx_job(fx, NULL, ds, id, sizeof id), 0);
    fx_claim(fx, id);
    assert_int_equal(pt_app_job_dir(&fx->app, id, path, sizeof path - 16), 0);
    mkdir(path, 0755);
    strcat(path, "/worker.log");
    static const char log[] = "line one\nline two \xc3\xa9\nbad \xff byte\nlast without newline";
    FILE *f = fopen(path, "w");
    fputs(log, f);
    fclose(f);
    assert_int_equal(pt_store_job_transition(fx->db, NULL, id, PT_JOB_FAILED, "the loss became NaN", NULL),
                     PT_STORE_OK);
    pt_app_jobs_changed(&fx->app);
    char server[160];
    snprintf(server, sizeof server, "--server=%s", fx->base);

    char *logs[] = {"logs", id, "--follow", server, NULL};
    /* a second after its end the log is taken as whole (the scheduler's last
     * note follows the final state): all of it comes in one go */
    usleep(1100000);
    assert_int_equal(run_cmd(out, 4, logs), 1);
    const char *text = slurp(out);
    assert_non_null(strstr(text, "line one\nline two \xc3\xa9\nbad \xef\xbf\xbd byte\nlast without newline\n"));
    char want[200];
    snprintf(want, sizeof want, "packtrain logs: %s failed: the loss became NaN\n", id);
    assert_non_null(strstr(text, want));

    char *json[] = {"logs", id, "--follow", "--json", server, NULL};
    assert_int_equal(run_cmd(out, 5, json), 1);
    text = slurp(out);
    assert_non_null(strstr(text, "{\"event\":\"log\",\"id\":9,\"line\":\"line one\"}\n"));
    assert_non_null(strstr(text, "{\"event\":\"log\",\"id\":21,\"line\":\"line two \xc3\xa9\"}\n"));
    snprintf(want, sizeof want, "{\"event\":\"log\",\"id\":%zu,\"line\":\"last without newline\"}\n", sizeof log - 1);
    assert_non_null(strstr(text, want));
    assert_non_null(strstr(text, "{\"event\":\"end\",\"job\":{\"id\":\""));

    char *wait[] = {"wait", id, "--follow", server, NULL};
    assert_int_equal(run_cmd(out, 4, wait), 1);
    char *status[] = {"status", id, "--follow", server, NULL};
    assert_int_equal(run_cmd(out, 4, status), 1);
    assert_non_null(strstr(slurp(out), "\"state\": \"failed\""));   /* status prints the job after */

    /* resuming after "line one\n" (9 bytes): the next line comes first */
    pt_client c;
    assert_int_equal(pt_client_init(&c, fx->base, NULL), 0);
    seen s = {0};
    pt_sse_parser p;
    pt_sse_parser_init(&p, collect, &s);
    s.p = &p;
    snprintf(p.last_id, sizeof p.last_id, "9");
    char stream[128];
    snprintf(stream, sizeof stream, "/v1/jobs/%s/logs/stream", id);
    pt_client_resp r;
    assert_int_equal(pt_client_stream(&c, stream, &p, 10, &r), 0);
    assert_int_equal(r.status, 200);
    assert_true(s.n >= 3);
    assert_string_equal(s.name[0], "log");
    assert_string_equal(s.data[0], "{\"line\":\"line two \xc3\xa9\"}");
    assert_string_equal(s.id[0], "21");
    assert_string_equal(s.name[s.n - 1], "end");
    snprintf(want, sizeof want, "%zu", sizeof log - 1);
    assert_string_equal(p.last_id, want);
    pt_client_resp_clear(&r);
    /* at the end of a final job's log: 204, nothing more will come */
    assert_int_equal(pt_client_stream(&c, stream, &p, 10, &r), 0);
    assert_int_equal(r.status, 204);
    pt_client_resp_clear(&r);
    snprintf(p.last_id, sizeof p.last_id, "%zu", sizeof log);   /* one past */
    assert_int_equal(pt_client_stream(&c, stream, &p, 10, &r), 0);
    assert_int_equal(r.status, 400);
    assert_non_null(strstr(r.body, "is after the end of the log"));
    pt_client_resp_clear(&r);
    /* a callback that stops the reader: a transport failure saying so */
    int calls = 0;
    pt_sse_parser stopper;
    pt_sse_parser_init(&stopper, stop_at_first, &calls);
    assert_int_equal(pt_client_stream(&c, stream, &stopper, 10, &r), -1);
    assert_int_equal(calls, 1);
    assert_non_null(strstr(c.err, "the event stream's reader stopped"));
    pt_client_resp_clear(&r);
    pt_sse_parser_close(&stopper);
    pt_sse_parser_close(&p);
    pt_client_close(&c);

    /* --timeout with --follow: 5, and a job only watched keeps running */
    char queued[64];
    assert_int_equal(fx_job(fx, NULL, ds, queued, sizeof queued), 0);
    char *slow[] = {"logs", queued, "--follow", "--timeout=1", server, NULL};
    assert_int_equal(run_cmd(out, 5, slow), 5);
    snprintf(want, sizeof want, "packtrain logs: --timeout passed; %s keeps running", queued);
    assert_non_null(strstr(slurp(out), want));
    fx_cancel_queued(fx);

    /* an unknown job: 4; --lines goes without --follow: 2 */
    char *unknown[] = {"logs", "job_0000000000000000", "--follow", server, NULL};
    assert_int_equal(run_cmd(out, 4, unknown), 4);
    assert_non_null(strstr(slurp(out), "packtrain logs: cannot follow the job: HTTP 404: "));
    char *both[] = {"logs", id, "--follow", "--lines=3", server, NULL};
    assert_int_equal(run_cmd(out, 5, both), 2);
    char *tail[] = {"logs", id, "--lines", "2", server, NULL};
    assert_int_equal(run_cmd(out, 5, tail), 0);
    assert_string_equal(slurp(out), "bad \xff byte\nlast without newline");
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_and_transport_errors),
        cmocka_unit_test(test_upload_and_describe),
        cmocka_unit_test(test_escape),
        cmocka_unit_test(test_submit_status_cancel),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_job_failed),
        cmocka_unit_test(test_timeout),
        cmocka_unit_test(test_interrupt),
        cmocka_unit_test(test_sse_parser),
        cmocka_unit_test(test_follow),
    };
    int rc = cmocka_run_group_tests_name("client", tests, setup, teardown);
    curl_global_cleanup();
    return rc;
}
