/* cmd_client.c — the CI commands, clients of a running server:
 *   packtrain submit --dataset FILE --config job.json [--wait]
 *   packtrain status JOB [--wait]
 *   packtrain cancel JOB
 * The server is --server URL ($PACKTRAIN_SERVER, default
 * http://127.0.0.1:8080), the token --token T ($PACKTRAIN_TOKEN).
 *
 * stdout carries only what a script wants to capture (the job id, or the
 * job document); progress and errors go to stderr.  Exit status: 0 when the
 * command did what it says (with --wait: the job succeeded), 1 when it did
 * not (HTTP error, job failed or was cancelled; the reason is printed), 2 on
 * a usage error.  While following a job the client rides out a server
 * restart: connection failures are retried for --retry-for seconds. */
#include "server/cli/commands.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "server/cli/client.h"

#define WAIT_S 25
#define DEFAULT_RETRY_S 300

typedef struct client_args {
    const char *cmd, *server, *token, *dataset, *dataset_id, *config, *name, *format, *job, *idem;
    int wait, skip_invalid;
    double retry_s;
} client_args;

static void usage(FILE *out, const char *cmd)
{
    if (!strcmp(cmd, "submit"))
        fprintf(out, "usage: packtrain submit (--dataset FILE | --dataset-id ID) --config job.json [--wait]\n"
                     "                        [--server URL] [--token T] [--name NAME] [--format F]\n"
                     "                        [--skip-invalid] [--idempotency-key K] [--retry-for S]\n\n"
                     "Uploads the dataset (unless --dataset-id names one already uploaded), submits\n"
                     "the job and prints its id on stdout.  With --wait, follows its progress on\n"
                     "stderr and exits 0 only if it succeeds (1 with the reason otherwise).\n");
    else if (!strcmp(cmd, "status"))
        fprintf(out, "usage: packtrain status JOB [--wait] [--server URL] [--token T] [--retry-for S]\n\n"
                     "Prints the job as JSON.  With --wait, follows it to its end first and exits 0\n"
                     "only if it succeeded.\n");
    else
        fprintf(out, "usage: packtrain cancel JOB [--server URL] [--token T]\n\n"
                     "Asks the server to cancel the job (a running one checkpoints and stops).\n");
    fprintf(out, "\nThe server defaults to $PACKTRAIN_SERVER, else http://127.0.0.1:8080; the token\n"
                 "to $PACKTRAIN_TOKEN.\n");
}

static const char *env_or(const char *name, const char *def)
{
    const char *v = getenv(name);
    return v && v[0] ? v : def;
}

static int parse(int argc, char **argv, client_args *a)
{
    memset(a, 0, sizeof(*a));
    a->cmd = argv[0];
    a->server = env_or("PACKTRAIN_SERVER", "http://127.0.0.1:8080");
    a->token = env_or("PACKTRAIN_TOKEN", NULL);
    a->retry_s = DEFAULT_RETRY_S;
    int submit = !strcmp(a->cmd, "submit");
    const char *retry = NULL;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "--wait") && strcmp(a->cmd, "cancel")) {
            a->wait = 1;
            continue;
        }
        if (!strcmp(f, "--skip-invalid") && submit) {
            a->skip_invalid = 1;
            continue;
        }
        const char **slot = !strcmp(f, "--server") ? &a->server : !strcmp(f, "--token") ? &a->token
                          : !strcmp(f, "--retry-for") ? &retry : NULL;
        if (submit && !slot)
            slot = !strcmp(f, "--dataset") ? &a->dataset : !strcmp(f, "--dataset-id") ? &a->dataset_id
                 : !strcmp(f, "--config") ? &a->config : !strcmp(f, "--name") ? &a->name
                 : !strcmp(f, "--format") ? &a->format : !strcmp(f, "--idempotency-key") ? &a->idem : NULL;
        if (slot) {
            if (i + 1 >= argc) {
                fprintf(stderr, "packtrain %s: %s needs a value\n", a->cmd, f);
                return -1;
            }
            *slot = argv[++i];
        } else if (f[0] == '-') {
            fprintf(stderr, "packtrain %s: unknown option '%s'\n", a->cmd, f);
            return -1;
        } else if (!submit && !a->job) {
            a->job = f;
        } else {
            fprintf(stderr, "packtrain %s: unexpected argument '%s'\n", a->cmd, f);
            return -1;
        }
    }
    if (retry) {
        char *end = NULL;
        a->retry_s = strtod(retry, &end);
        if (*end || !(a->retry_s >= 0)) {
            fprintf(stderr, "packtrain %s: --retry-for must be seconds >= 0, got '%s'\n", a->cmd, retry);
            return -1;
        }
    }
    if (submit && !a->config) {
        fprintf(stderr, "packtrain submit: --config job.json is required\n");
        return -1;
    }
    if (submit && !a->dataset == !a->dataset_id) {
        fprintf(stderr, "packtrain submit: give either --dataset FILE or --dataset-id ID\n");
        return -1;
    }
    if (!submit && !a->job) {
        fprintf(stderr, "packtrain %s: which job? give its id (job_...)\n", a->cmd);
        return -1;
    }
    return 0;
}

static int http_failed(const char *cmd, const char *what, const pt_client_resp *r)
{
    char msg[2048];
    pt_client_describe_error(r, msg, sizeof msg);
    fprintf(stderr, "packtrain %s: %s: %s\n", cmd, what, msg);
    return 1;
}

/* ---- following a job ---------------------------------------------------------------- */

static double num(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : -1;
}

static void print_progress(const char *cmd, const json_t *job)
{
    const char *id = json_string_value(json_object_get(job, "id"));
    const char *state = json_string_value(json_object_get(job, "state"));
    const json_t *training = json_object_get(json_object_get(job, "config"), "training");
    double epochs = num(training, "epochs");
    fprintf(stderr, "packtrain %s: %s %-10s epoch %.0f", cmd, id ? id : "?", state ? state : "?", num(job, "epoch"));
    if (epochs > 0) fprintf(stderr, "/%.0f", epochs);
    fprintf(stderr, "  step %.0f  %.1f%%", num(job, "step"), num(job, "progress_percent"));
    if (num(job, "best_val_mae") >= 0) fprintf(stderr, "  best val MAE %.5g", num(job, "best_val_mae"));
    if (num(job, "latest_graphs_per_s") >= 0) fprintf(stderr, "  %.0f graphs/s", num(job, "latest_graphs_per_s"));
    fputc('\n', stderr);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Long-polls the job until it ends; *final gets the last document. */
static int follow(pt_client *c, const client_args *a, const char *job, json_t **final)
{
    char path[256], inm[200] = "";
    snprintf(path, sizeof path, "/v1/jobs/%s?wait=%d", job, WAIT_S);
    double down_since = 0;
    c->timeout_s = WAIT_S + 30;
    for (;;) {
        const char *headers[] = {inm[0] ? inm : NULL, NULL};
        pt_client_resp r;
        int rc = pt_client_request(c, "GET", path, headers, NULL, 0, &r);
        if (rc != 0 || r.status >= 500) {
            if (down_since == 0) {
                down_since = now_s();
                fprintf(stderr, "packtrain %s: %s; retrying for up to %.0f s\n", a->cmd,
                        rc ? c->err : "the server answered an error", a->retry_s);
            }
            if (now_s() - down_since > a->retry_s) {
                if (rc == 0) http_failed(a->cmd, "cannot follow the job", &r);
                else fprintf(stderr, "packtrain %s: giving up: %s\n", a->cmd, c->err);
                pt_client_resp_clear(&r);
                return 1;
            }
            pt_client_resp_clear(&r);
            sleep(1);
            continue;
        }
        if (down_since != 0) fprintf(stderr, "packtrain %s: the server answers again\n", a->cmd);
        down_since = 0;
        if (r.status == 304) {
            pt_client_resp_clear(&r);
            continue;
        }
        if (r.status != 200 || !json_is_object(r.json)) {
            int failed = http_failed(a->cmd, "cannot follow the job", &r);
            pt_client_resp_clear(&r);
            return failed;
        }
        if (r.etag[0]) snprintf(inm, sizeof inm, "If-None-Match: %s", r.etag);
        print_progress(a->cmd, r.json);
        const char *state = json_string_value(json_object_get(r.json, "state"));
        if (state && (!strcmp(state, "succeeded") || !strcmp(state, "failed") || !strcmp(state, "cancelled") ||
                      !strcmp(state, "stopped"))) {
            *final = json_incref(r.json);
            pt_client_resp_clear(&r);
            return 0;
        }
        pt_client_resp_clear(&r);
    }
}

/* The exit status of a finished job, with its story on stderr. */
static int report_end(const client_args *a, const json_t *job)
{
    const char *id = json_string_value(json_object_get(job, "id"));
    const char *state = json_string_value(json_object_get(job, "state"));
    if (state && !strcmp(state, "succeeded")) {
        /* the run's final errors (absent from a server that predates them),
         * then the outcome, the last line as CI logs expect */
        const json_t *res = json_object_get(job, "result");
        const json_t *units = json_object_get(res, "units");
        const char *eu = json_string_value(json_object_get(units, "test_mae"));
        if (num(res, "test_mae") >= 0)
            fprintf(stderr, "packtrain %s: %s test MAE %.6g%s%s, RMSE %.6g\n", a->cmd, id, num(res, "test_mae"),
                    eu ? " " : "", eu ? eu : "", num(res, "test_rmse"));
        /* a multi-task job: every target's test errors, in its units */
        const char *key;
        const json_t *h;
        json_object_foreach((json_t *)json_object_get(res, "heads"), key, h) {
            const char *u = json_string_value(json_object_get(json_object_get(units, "heads"), key));
            fprintf(stderr, "packtrain %s: %s   %s: test MAE %.6g%s%s, RMSE %.6g\n", a->cmd, id, key,
                    num(h, "test_mae"), u ? " " : "", u ? u : "", num(h, "test_rmse"));
        }
        if (num(res, "test_forces_mae") >= 0)
            fprintf(stderr, "packtrain %s: %s forces: test MAE %.6g eV/Å, RMSE %.6g eV/Å (zero forces: MAE %.6g "
                    "eV/Å)\n", a->cmd, id, num(res, "test_forces_mae"), num(res, "test_forces_rmse"),
                    num(res, "test_forces_zero_mae"));
        if (num(res, "test_stress_mae") >= 0)
            fprintf(stderr, "packtrain %s: %s stress: test MAE %.6g eV/Å³\n", a->cmd, id, num(res, "test_stress_mae"));
        fprintf(stderr, "packtrain %s: %s succeeded; best val MAE %.6g; model: %s/v1/jobs/%s/model\n", a->cmd, id,
                num(job, "best_val_mae"), a->server, id);
        return 0;
    }
    const char *reason = json_string_value(json_object_get(job, "failure_reason"));
    const json_t *tr = json_object_get(job, "transitions");
    if (!reason && json_array_size(tr))
        reason = json_string_value(json_object_get(json_array_get(tr, json_array_size(tr) - 1), "reason"));
    fprintf(stderr, "packtrain %s: %s %s: %s\n", a->cmd, id ? id : "?", state ? state : "ended",
            reason ? reason : "no reason recorded");
    return 1;
}

static int follow_and_report(pt_client *c, const client_args *a, const char *job)
{
    json_t *final = NULL;
    if (follow(c, a, job, &final) != 0) return 1;
    int rc = report_end(a, final);
    json_decref(final);
    return rc;
}

/* ---- commands ---------------------------------------------------------------------------- */

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static int upload_dataset(pt_client *c, const client_args *a, char *id, size_t cap)
{
    char name[512], path[1400];
    pt_client_escape(a->name ? a->name : base_name(a->dataset), name, sizeof name);
    int n = snprintf(path, sizeof path, "/v1/datasets?name=%s", name);
    if (a->format) {
        char fmt[64];
        pt_client_escape(a->format, fmt, sizeof fmt);
        n += snprintf(path + n, sizeof path - (size_t)n, "&format=%s", fmt);
    }
    if (a->skip_invalid) snprintf(path + n, sizeof path - (size_t)n, "&skip_invalid=true");
    pt_client_resp r;
    c->timeout_s = 0;   /* a large file may take long */
    if (pt_client_upload(c, path, a->dataset, &r) != 0) {
        fprintf(stderr, "packtrain submit: cannot upload %s: %s\n", a->dataset, c->err);
        return 1;
    }
    c->timeout_s = 120;
    const char *got = r.json ? json_string_value(json_object_get(r.json, "id")) : NULL;
    if ((r.status != 201 && r.status != 200) || !got) {
        int failed = http_failed("submit", "the dataset was refused", &r);
        pt_client_resp_clear(&r);
        return failed;
    }
    snprintf(id, cap, "%s", got);
    /* 200: the server has this file already (uploads are de-duplicated) */
    fprintf(stderr, "packtrain submit: %s %s as dataset %s (%lld structures)\n",
            r.status == 201 ? "uploaded" : "already uploaded:", a->dataset, id,
            (long long)json_integer_value(json_object_get(r.json, "n_structures")));
    pt_client_resp_clear(&r);
    return 0;
}

static int run_submit(pt_client *c, const client_args *a)
{
    json_error_t jerr;
    json_t *job = json_load_file(a->config, JSON_REJECT_DUPLICATES, &jerr);
    if (!job || !json_is_object(job)) {
        if (job) fprintf(stderr, "packtrain submit: %s: the job configuration must be a JSON object\n", a->config);
        else fprintf(stderr, "packtrain submit: %s:%d:%d: %s\n", a->config, jerr.line, jerr.column, jerr.text);
        json_decref(job);
        return 1;
    }
    char ds[128];
    if (a->dataset_id) snprintf(ds, sizeof ds, "%s", a->dataset_id);
    else if (upload_dataset(c, a, ds, sizeof ds) != 0) {
        json_decref(job);
        return 1;
    }
    json_object_set_new(job, "dataset", json_string(ds));
    char idem[400];
    snprintf(idem, sizeof idem, "Idempotency-Key: %s", a->idem ? a->idem : "");
    const char *headers[] = {a->idem ? idem : NULL, NULL};
    pt_client_resp r;
    int rc = pt_client_post_json(c, "/v1/jobs", job, headers, &r);
    json_decref(job);
    if (rc != 0) {
        fprintf(stderr, "packtrain submit: %s\n", c->err);
        return 1;
    }
    const char *id = r.json ? json_string_value(json_object_get(r.json, "id")) : NULL;
    if ((r.status != 201 && r.status != 200) || !id) {
        int failed = http_failed("submit", "the job was refused", &r);
        pt_client_resp_clear(&r);
        return failed;
    }
    char job_id[128];
    snprintf(job_id, sizeof job_id, "%s", id);
    pt_client_resp_clear(&r);
    printf("%s\n", job_id);
    fflush(stdout);
    fprintf(stderr, "packtrain submit: queued %s\n", job_id);
    return a->wait ? follow_and_report(c, a, job_id) : 0;
}

/* METHOD /v1/jobs/ID[SUFFIX] without a body: 0 with *r a response of one of
 * the two `ok` statuses, else 1 with the failure on stderr. */
static int job_call(pt_client *c, const char *cmd, const char *method, const char *id,
                    const char *suffix, long ok1, long ok2, const char *what, pt_client_resp *r)
{
    char path[256];
    snprintf(path, sizeof path, "/v1/jobs/%s%s", id, suffix);
    if (pt_client_request(c, method, path, NULL, NULL, 0, r) != 0) {
        fprintf(stderr, "packtrain %s: %s\n", cmd, c->err);
        return 1;
    }
    if ((r->status != ok1 && r->status != ok2) || !json_is_object(r->json)) {
        int failed = http_failed(cmd, what, r);
        pt_client_resp_clear(r);
        return failed;
    }
    return 0;
}

static int run_status(pt_client *c, const client_args *a)
{
    if (a->wait) {
        json_t *final = NULL;
        if (follow(c, a, a->job, &final) != 0) return 1;
        json_decref(final);
    }
    pt_client_resp r;
    if (job_call(c, "status", "GET", a->job, "", 200, 200, "cannot read the job", &r)) return 1;
    json_dumpf(r.json, stdout, JSON_INDENT(2));
    fputc('\n', stdout);
    int rc = a->wait ? report_end(a, r.json) : 0;
    pt_client_resp_clear(&r);
    return rc;
}

static int run_cancel(pt_client *c, const client_args *a)
{
    pt_client_resp r;
    if (job_call(c, "cancel", "POST", a->job, "/cancel", 200, 202, "the job was not cancelled", &r))
        return 1;
    const char *state = json_string_value(json_object_get(r.json, "state"));
    printf("%s %s\n", a->job, state ? state : "?");
    pt_client_resp_clear(&r);
    return 0;
}

int pt_cmd_client(int argc, char **argv)
{
    if (pt_cli_wants_help(argc, argv)) {
        usage(stdout, argv[0]);
        return 0;
    }
    client_args a;
    if (parse(argc, argv, &a) != 0) {
        usage(stderr, argv[0]);
        return 2;
    }
    pt_client c;
    if (pt_client_init(&c, a.server, a.token) != 0) {
        fprintf(stderr, "packtrain %s: %s\n", a.cmd, c.err);
        pt_client_close(&c);
        return 2;
    }
    int rc = !strcmp(a.cmd, "submit") ? run_submit(&c, &a) : !strcmp(a.cmd, "status") ? run_status(&c, &a)
                                                                                         : run_cancel(&c, &a);
    pt_client_close(&c);
    return rc;
}
