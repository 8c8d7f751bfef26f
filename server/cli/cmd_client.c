/* cmd_client.c — the CI commands, clients of a running server:
 *   packtrain submit --dataset FILE --config job.json [--wait [--timeout S] [--detach]]
 *   packtrain status JOB [--wait [--timeout S]]
 *   packtrain cancel JOB
 * The server is --server URL ($PACKTRAIN_SERVER, default
 * http://127.0.0.1:8080), the token --token T ($PACKTRAIN_TOKEN).  Options
 * are read by getopt_long: `--opt value` and `--opt=value` alike.
 *
 * stdout carries only what a script wants to capture (the job id, or with
 * --json the job document); progress and errors go to stderr.  While a job
 * is followed, its status is one line: redrawn in place on a terminal,
 * else printed when the state or the epoch changes.  The exit status says
 * what happened (EXIT_* below, printed by --help); a server restart is
 * ridden out (connection failures retried for --retry-for seconds). */
#include "server/cli/commands.h"

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/cli/client.h"

#define WAIT_S 25
#define DEFAULT_RETRY_S 300

/* The exit statuses, one meaning each (documented in usage() and
 * docs/api.md). */
enum {
    EXIT_OK = 0,            /* done; with --wait: the job succeeded */
    EXIT_JOB = 1,           /* the job ended without succeeding: failed, stopped or cancelled */
    EXIT_USAGE = 2,         /* bad command line or configuration file */
    EXIT_SERVER = 3,        /* the server cannot be reached, refused the token, or kept failing */
    EXIT_REFUSED = 4,       /* the server refused the request (an invalid job, an unknown job...) */
    EXIT_TIMEOUT = 5,       /* --timeout passed before the job ended */
    EXIT_INTERRUPTED = 130  /* SIGINT or SIGTERM (128 + 2) */
};

typedef struct client_args {
    const char *cmd, *server, *token, *dataset, *dataset_id, *config, *name, *format, *job, *idem;
    int wait, skip_invalid, detach, json;
    double retry_s, timeout_s;   /* timeout 0: none */
} client_args;

static volatile sig_atomic_t g_signal;

static void on_signal(int sig)
{
    g_signal = sig;
}

static void usage(FILE *out, const char *cmd)
{
    if (!strcmp(cmd, "submit"))
        fprintf(out, "usage: packtrain submit (--dataset FILE | --dataset-id ID) --config job.json\n"
                     "                        [--wait [--timeout S] [--detach]] [--json]\n"
                     "                        [--server URL] [--token T] [--name NAME] [--format F]\n"
                     "                        [--skip-invalid] [--idempotency-key K] [--retry-for S]\n\n"
                     "Uploads the dataset (unless --dataset-id names one already uploaded; the same\n"
                     "file again is the dataset stored before), submits the job and prints its id on\n"
                     "stdout (--json: the job document).  With --wait, follows the job on stderr\n"
                     "until it ends; Ctrl-C or --timeout cancel it then, unless --detach leaves it\n"
                     "running.\n");
    else if (!strcmp(cmd, "status"))
        fprintf(out, "usage: packtrain status JOB [--wait [--timeout S]] [--server URL] [--token T]\n"
                     "                             [--retry-for S] [--json]\n\n"
                     "Prints the job as JSON.  With --wait, follows it to its end first (Ctrl-C or\n"
                     "--timeout stop the waiting, never the job).\n");
    else
        fprintf(out, "usage: packtrain cancel JOB [--server URL] [--token T] [--json]\n\n"
                     "Asks the server to cancel the job (a running one checkpoints and stops) and\n"
                     "prints \"JOB STATE\" (--json: the job document).\n");
    fprintf(out, "\nThe server defaults to $PACKTRAIN_SERVER, else http://127.0.0.1:8080; the token\n"
                 "to $PACKTRAIN_TOKEN.  Options take their value as --opt value or --opt=value.\n\n"
                 "Exit status:\n"
                 "  0    done (with --wait: the job succeeded)\n"
                 "  1    the job ended without succeeding (failed, stopped or cancelled)\n"
                 "  2    usage error (command line, configuration file)\n"
                 "  3    the server cannot be reached, refused the token, or kept failing\n"
                 "  4    the server refused the request (an invalid job, an unknown job, ...)\n"
                 "  5    --timeout passed before the job ended\n"
                 "  130  interrupted (Ctrl-C or SIGTERM)\n");
}

static const char *env_or(const char *name, const char *def)
{
    const char *v = getenv(name);
    return v && v[0] ? v : def;
}

static int seconds_arg(const char *cmd, const char *opt, const char *v, double *out)
{
    char *end = NULL;
    double x = strtod(v, &end);
    if (end == v || *end || !(x >= 0) || x > 1e9) {
        fprintf(stderr, "packtrain %s: --%s must be seconds >= 0, got '%s'\n", cmd, opt, v);
        return -1;
    }
    *out = x;
    return 0;
}

enum { OPT_SERVER = 256, OPT_TOKEN, OPT_RETRY, OPT_DATASET, OPT_DATASET_ID, OPT_CONFIG, OPT_NAME, OPT_FORMAT,
       OPT_IDEM, OPT_SKIP, OPT_WAIT, OPT_TIMEOUT, OPT_DETACH, OPT_JSON };

static int parse(int argc, char **argv, client_args *a)
{
    memset(a, 0, sizeof(*a));
    a->cmd = argv[0];
    a->server = env_or("PACKTRAIN_SERVER", "http://127.0.0.1:8080");
    a->token = env_or("PACKTRAIN_TOKEN", NULL);
    a->retry_s = DEFAULT_RETRY_S;
    int submit = !strcmp(a->cmd, "submit"), cancel = !strcmp(a->cmd, "cancel");
    /* every command's options; those another command owns are refused below */
    static const struct option opts[] = {
        {"server", required_argument, NULL, OPT_SERVER},      {"token", required_argument, NULL, OPT_TOKEN},
        {"retry-for", required_argument, NULL, OPT_RETRY},    {"dataset", required_argument, NULL, OPT_DATASET},
        {"dataset-id", required_argument, NULL, OPT_DATASET_ID}, {"config", required_argument, NULL, OPT_CONFIG},
        {"name", required_argument, NULL, OPT_NAME},          {"format", required_argument, NULL, OPT_FORMAT},
        {"idempotency-key", required_argument, NULL, OPT_IDEM}, {"skip-invalid", no_argument, NULL, OPT_SKIP},
        {"wait", no_argument, NULL, OPT_WAIT},                {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"detach", no_argument, NULL, OPT_DETACH},            {"json", no_argument, NULL, OPT_JSON},
        {NULL, 0, NULL, 0}};
    optind = 0;   /* a fresh scan (the tests run several commands in one process) */
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        int submit_only = c == OPT_DATASET || c == OPT_DATASET_ID || c == OPT_CONFIG || c == OPT_NAME ||
                          c == OPT_FORMAT || c == OPT_IDEM || c == OPT_SKIP || c == OPT_DETACH;
        int wait_only = c == OPT_WAIT || c == OPT_TIMEOUT || c == OPT_RETRY;
        if (c == '?' || (submit_only && !submit) || (wait_only && cancel)) {
            fprintf(stderr, "packtrain %s: unknown option '%s'\n", a->cmd, argv[optind - 1]);
            return -1;
        }
        if (c == ':') {
            fprintf(stderr, "packtrain %s: %s needs a value\n", a->cmd, argv[optind - 1]);
            return -1;
        }
        switch (c) {
        case OPT_SERVER: a->server = optarg; break;
        case OPT_TOKEN: a->token = optarg; break;
        case OPT_RETRY: if (seconds_arg(a->cmd, "retry-for", optarg, &a->retry_s)) return -1; break;
        case OPT_TIMEOUT: if (seconds_arg(a->cmd, "timeout", optarg, &a->timeout_s)) return -1; break;
        case OPT_DATASET: a->dataset = optarg; break;
        case OPT_DATASET_ID: a->dataset_id = optarg; break;
        case OPT_CONFIG: a->config = optarg; break;
        case OPT_NAME: a->name = optarg; break;
        case OPT_FORMAT: a->format = optarg; break;
        case OPT_IDEM: a->idem = optarg; break;
        case OPT_SKIP: a->skip_invalid = 1; break;
        case OPT_WAIT: a->wait = 1; break;
        case OPT_DETACH: a->detach = 1; break;
        case OPT_JSON: a->json = 1; break;
        }
    }
    for (int i = optind; i < argc; i++) {
        if (!submit && !a->job) {
            a->job = argv[i];
        } else {
            fprintf(stderr, "packtrain %s: unexpected argument '%s'\n", a->cmd, argv[i]);
            return -1;
        }
    }
    if ((a->timeout_s > 0 || a->detach) && !a->wait) {
        fprintf(stderr, "packtrain %s: --%s goes with --wait\n", a->cmd, a->detach ? "detach" : "timeout");
        return -1;
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

/* The exit status of a request that got no useful answer: the transport
 * (EXIT_SERVER, or why it was given up), or the HTTP status. */
static int transport_failed(const char *cmd, const pt_client *c)
{
    fprintf(stderr, "packtrain %s: %s\n", cmd, c->err);
    if (c->aborted == 1) return EXIT_INTERRUPTED;
    if (c->aborted == 2) return EXIT_TIMEOUT;
    return EXIT_SERVER;
}

static int http_failed(const char *cmd, const char *what, const pt_client_resp *r)
{
    char msg[2048];
    pt_client_describe_error(r, msg, sizeof msg);
    fprintf(stderr, "packtrain %s: %s: %s\n", cmd, what, msg);
    /* the token (401, 403) and the server's own failures are not the
     * request's fault */
    return r->status == 401 || r->status == 403 || r->status >= 500 ? EXIT_SERVER : EXIT_REFUSED;
}

/* ---- following a job ---------------------------------------------------------------- */

static double num(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : -1;
}

/* The job's status line, without a newline. */
static void status_line(const char *cmd, const json_t *job, char *buf, size_t cap)
{
    const char *id = json_string_value(json_object_get(job, "id"));
    const char *state = json_string_value(json_object_get(job, "state"));
    const json_t *training = json_object_get(json_object_get(job, "config"), "training");
    size_t n = (size_t)snprintf(buf, cap, "packtrain %s: %s %-10s epoch %.0f", cmd, id ? id : "?",
                                state ? state : "?", num(job, "epoch"));
    if (n < cap && num(training, "epochs") > 0) n += (size_t)snprintf(buf + n, cap - n, "/%.0f", num(training, "epochs"));
    if (n < cap) n += (size_t)snprintf(buf + n, cap - n, "  step %.0f  %.1f%%", num(job, "step"),
                                       num(job, "progress_percent"));
    if (n < cap && num(job, "best_val_mae") >= 0)
        n += (size_t)snprintf(buf + n, cap - n, "  best val MAE %.5g", num(job, "best_val_mae"));
    if (n < cap && num(job, "latest_graphs_per_s") >= 0)
        snprintf(buf + n, cap - n, "  %.0f graphs/s", num(job, "latest_graphs_per_s"));
}

/* One status line: on a terminal redrawn in place (\r, erase to the end);
 * elsewhere (a CI log) printed only when the state or the epoch changed. */
typedef struct status_view {
    int tty, open;          /* open: a line is drawn without its newline */
    char state[32];
    double epoch;
} status_view;

static void status_show(status_view *v, const char *cmd, const json_t *job)
{
    char line[512];
    status_line(cmd, job, line, sizeof line);
    const char *state = json_string_value(json_object_get(job, "state"));
    if (v->tty) {
        fprintf(stderr, "\r%s\033[K", line);
        v->open = 1;
    } else if (strcmp(v->state, state ? state : "") || num(job, "epoch") != v->epoch) {
        fprintf(stderr, "%s\n", line);
    }
    snprintf(v->state, sizeof v->state, "%s", state ? state : "");
    v->epoch = num(job, "epoch");
}

/* Ends a line drawn in place before anything else is printed. */
static void status_close(status_view *v)
{
    if (v->open) fputc('\n', stderr);
    v->open = 0;
}

static int is_final(const char *state)
{
    return state && (!strcmp(state, "succeeded") || !strcmp(state, "failed") || !strcmp(state, "cancelled") ||
                     !strcmp(state, "stopped"));
}

/* Long-polls the job until it ends; *final gets the last document.
 * Returns EXIT_OK, or why it stopped following (EXIT_INTERRUPTED,
 * EXIT_TIMEOUT, EXIT_SERVER, EXIT_REFUSED). */
static int follow(pt_client *c, const client_args *a, const char *job, json_t **final)
{
    char path[256], inm[200] = "";
    double down_since = 0;
    status_view view = {.tty = isatty(2), .epoch = -2};
    int rc = EXIT_OK;
    if (a->timeout_s > 0) c->deadline = pt_client_now() + a->timeout_s;   /* --timeout counts the waiting */
    for (;;) {
        /* the long-poll never outlasts --timeout */
        int wait = WAIT_S;
        if (c->deadline > 0) {
            double left = c->deadline - pt_client_now();
            if (left < wait) wait = left > 1 ? (int)left : 1;
        }
        snprintf(path, sizeof path, "/v1/jobs/%s?wait=%d", job, wait);
        c->timeout_s = wait + 30;
        const char *headers[] = {inm[0] ? inm : NULL, NULL};
        pt_client_resp r;
        int sent = pt_client_request(c, "GET", path, headers, NULL, 0, &r);
        if (sent != 0 && c->aborted) {
            pt_client_resp_clear(&r);
            rc = c->aborted == 1 ? EXIT_INTERRUPTED : EXIT_TIMEOUT;
            break;
        }
        if (sent != 0 || r.status >= 500) {
            status_close(&view);
            if (down_since == 0) {
                down_since = pt_client_now();
                fprintf(stderr, "packtrain %s: %s; retrying for up to %.0f s\n", a->cmd,
                        sent ? c->err : "the server answered an error", a->retry_s);
            }
            if (pt_client_now() - down_since > a->retry_s) {
                if (sent == 0) http_failed(a->cmd, "cannot follow the job", &r);
                else fprintf(stderr, "packtrain %s: giving up: %s\n", a->cmd, c->err);
                pt_client_resp_clear(&r);
                rc = EXIT_SERVER;
                break;
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
            status_close(&view);
            rc = http_failed(a->cmd, "cannot follow the job", &r);
            pt_client_resp_clear(&r);
            break;
        }
        if (r.etag[0]) snprintf(inm, sizeof inm, "If-None-Match: %s", r.etag);
        status_show(&view, a->cmd, r.json);
        if (is_final(json_string_value(json_object_get(r.json, "state")))) {
            *final = json_incref(r.json);
            pt_client_resp_clear(&r);
            break;
        }
        pt_client_resp_clear(&r);
    }
    status_close(&view);
    return rc;
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
        return EXIT_OK;
    }
    const char *reason = json_string_value(json_object_get(job, "failure_reason"));
    const json_t *tr = json_object_get(job, "transitions");
    if (!reason && json_array_size(tr))
        reason = json_string_value(json_object_get(json_array_get(tr, json_array_size(tr) - 1), "reason"));
    const json_t *model = json_object_get(job, "model");
    fprintf(stderr, "packtrain %s: %s %s: %s%s\n", a->cmd, id ? id : "?", state ? state : "ended",
            reason ? reason : "no reason recorded",
            json_is_true(json_object_get(model, "partial")) ? " (a partial model is kept)" : "");
    return EXIT_JOB;
}

/* After Ctrl-C or --timeout: the job this command submitted is cancelled
 * (unless --detach); one it only watched keeps running.  Says which. */
static int stop_following(pt_client *c, const client_args *a, const char *job, int why)
{
    const char *what = why == EXIT_TIMEOUT ? "--timeout passed" : "interrupted";
    int owned = !strcmp(a->cmd, "submit");
    if (!owned || a->detach) {
        fprintf(stderr, "packtrain %s: %s; %s keeps running (packtrain status %s --wait follows it)\n", a->cmd,
                what, job, job);
        return why;
    }
    c->stop = NULL;   /* the cancel itself must go through */
    c->deadline = 0;
    c->timeout_s = 30;
    char path[256];
    snprintf(path, sizeof path, "/v1/jobs/%s/cancel", job);
    pt_client_resp r;
    if (pt_client_request(c, "POST", path, NULL, NULL, 0, &r) == 0 && (r.status == 200 || r.status == 202)) {
        const char *state = json_string_value(json_object_get(r.json, "state"));
        fprintf(stderr, "packtrain %s: %s; cancelled %s (now %s; --detach leaves a job running)\n", a->cmd, what,
                job, state ? state : "?");
    } else {
        char msg[1024] = "";
        if (r.status) pt_client_describe_error(&r, msg, sizeof msg);
        fprintf(stderr, "packtrain %s: %s; could NOT cancel %s, it may still run: %s\n", a->cmd, what, job,
                r.status ? msg : c->err);
    }
    pt_client_resp_clear(&r);
    return why;
}

static int follow_and_report(pt_client *c, const client_args *a, const char *job)
{
    json_t *final = NULL;
    int rc = follow(c, a, job, &final);
    if (rc == EXIT_INTERRUPTED || rc == EXIT_TIMEOUT) return stop_following(c, a, job, rc);
    if (rc != EXIT_OK) return rc;
    rc = report_end(a, final);
    if (a->json) {
        json_dumpf(final, stdout, JSON_INDENT(2));
        fputc('\n', stdout);
    }
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
    char path[1200], name[600], fmt[64];
    if (pt_client_escape(a->name ? a->name : base_name(a->dataset), name, sizeof name) != 0 ||
        (a->format && pt_client_escape(a->format, fmt, sizeof fmt) != 0)) {
        fprintf(stderr, "packtrain submit: --name or --format is too long\n");
        return EXIT_USAGE;
    }
    int n = snprintf(path, sizeof path, "/v1/datasets?name=%s", name);
    if (a->format) n += snprintf(path + n, sizeof path - (size_t)n, "&format=%s", fmt);
    if (a->skip_invalid) snprintf(path + n, sizeof path - (size_t)n, "&skip_invalid=true");
    pt_client_resp r;
    c->timeout_s = 0;   /* a large file may take long */
    if (pt_client_upload(c, path, a->dataset, &r) != 0) {
        if (c->aborted) return transport_failed("submit", c);
        fprintf(stderr, "packtrain submit: cannot upload %s: %s\n", a->dataset, c->err);
        /* a file that cannot be read is the command line's fault */
        return access(a->dataset, R_OK) != 0 ? EXIT_USAGE : EXIT_SERVER;
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
    return EXIT_OK;
}

static int run_submit(pt_client *c, const client_args *a)
{
    json_error_t jerr;
    json_t *job = json_load_file(a->config, JSON_REJECT_DUPLICATES, &jerr);
    if (!job || !json_is_object(job)) {
        if (job) fprintf(stderr, "packtrain submit: %s: the job configuration must be a JSON object\n", a->config);
        else fprintf(stderr, "packtrain submit: %s:%d:%d: %s\n", a->config, jerr.line, jerr.column, jerr.text);
        json_decref(job);
        return EXIT_USAGE;
    }
    char ds[128];
    int rc = EXIT_OK;
    if (a->dataset_id) snprintf(ds, sizeof ds, "%s", a->dataset_id);
    else rc = upload_dataset(c, a, ds, sizeof ds);
    if (rc != EXIT_OK) {
        json_decref(job);
        return rc;
    }
    json_object_set_new(job, "dataset", json_string(ds));
    char idem[400];
    snprintf(idem, sizeof idem, "Idempotency-Key: %s", a->idem ? a->idem : "");
    const char *headers[] = {a->idem ? idem : NULL, NULL};
    pt_client_resp r;
    int sent = pt_client_post_json(c, "/v1/jobs", job, headers, &r);
    json_decref(job);
    if (sent != 0) return transport_failed("submit", c);
    const char *id = r.json ? json_string_value(json_object_get(r.json, "id")) : NULL;
    if ((r.status != 201 && r.status != 200) || !id) {
        int failed = http_failed("submit", "the job was refused", &r);
        pt_client_resp_clear(&r);
        return failed;
    }
    char job_id[128];
    snprintf(job_id, sizeof job_id, "%s", id);
    if (!a->json) printf("%s\n", job_id);
    else if (!a->wait) {
        json_dumpf(r.json, stdout, JSON_INDENT(2));
        fputc('\n', stdout);
    }
    fflush(stdout);
    pt_client_resp_clear(&r);
    fprintf(stderr, "packtrain submit: queued %s\n", job_id);
    return a->wait ? follow_and_report(c, a, job_id) : EXIT_OK;
}

/* METHOD /v1/jobs/ID[SUFFIX] without a body: EXIT_OK with *r a response of
 * one of the two `ok` statuses, else the exit status with the failure on
 * stderr. */
static int job_call(pt_client *c, const char *cmd, const char *method, const char *id,
                    const char *suffix, long ok1, long ok2, const char *what, pt_client_resp *r)
{
    char path[256];
    snprintf(path, sizeof path, "/v1/jobs/%s%s", id, suffix);
    if (pt_client_request(c, method, path, NULL, NULL, 0, r) != 0) return transport_failed(cmd, c);
    if ((r->status != ok1 && r->status != ok2) || !json_is_object(r->json)) {
        int failed = http_failed(cmd, what, r);
        pt_client_resp_clear(r);
        return failed;
    }
    return EXIT_OK;
}

static int run_status(pt_client *c, const client_args *a)
{
    if (a->wait) {
        json_t *final = NULL;
        int rc = follow(c, a, a->job, &final);
        json_decref(final);
        if (rc == EXIT_INTERRUPTED || rc == EXIT_TIMEOUT) return stop_following(c, a, a->job, rc);
        if (rc != EXIT_OK) return rc;
    }
    pt_client_resp r;
    int rc = job_call(c, "status", "GET", a->job, "", 200, 200, "cannot read the job", &r);
    if (rc != EXIT_OK) return rc;
    json_dumpf(r.json, stdout, JSON_INDENT(2));
    fputc('\n', stdout);
    rc = a->wait ? report_end(a, r.json) : EXIT_OK;
    pt_client_resp_clear(&r);
    return rc;
}

static int run_cancel(pt_client *c, const client_args *a)
{
    pt_client_resp r;
    int rc = job_call(c, "cancel", "POST", a->job, "/cancel", 200, 202, "the job was not cancelled", &r);
    if (rc != EXIT_OK) return rc;
    if (a->json) {
        json_dumpf(r.json, stdout, JSON_INDENT(2));
        fputc('\n', stdout);
    } else {
        const char *state = json_string_value(json_object_get(r.json, "state"));
        printf("%s %s\n", a->job, state ? state : "?");
    }
    pt_client_resp_clear(&r);
    return EXIT_OK;
}

int pt_cmd_client(int argc, char **argv)
{
    if (pt_cli_wants_help(argc, argv)) {
        usage(stdout, argv[0]);
        return EXIT_OK;
    }
    client_args a;
    if (parse(argc, argv, &a) != 0) {
        usage(stderr, argv[0]);
        return EXIT_USAGE;
    }
    pt_client c;
    if (pt_client_init(&c, a.server, a.token) != 0) {
        fprintf(stderr, "packtrain %s: %s\n", a.cmd, c.err);
        pt_client_close(&c);
        return EXIT_USAGE;
    }
    /* Ctrl-C and SIGTERM end the waiting (the request in flight is given
     * up within a second), then stop_following() says what became of the
     * job; without SA_RESTART so that a sleep() between retries ends too */
    struct sigaction sa = {.sa_handler = on_signal}, old_int, old_term;
    sigemptyset(&sa.sa_mask);
    g_signal = 0;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    c.stop = &g_signal;
    int rc = !strcmp(a.cmd, "submit") ? run_submit(&c, &a) : !strcmp(a.cmd, "status") ? run_status(&c, &a)
                                                                                         : run_cancel(&c, &a);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    pt_client_close(&c);
    return rc;
}
