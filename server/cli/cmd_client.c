/* cmd_client.c — the CI commands, clients of a running server:
 *   packtrain submit --dataset FILE --config job.json [--wait|--follow [--timeout S] [--detach]]
 *   packtrain status JOB [--wait|--follow [--timeout S]]
 *   packtrain wait JOB [--follow] [--timeout S]
 *   packtrain logs JOB [--lines N | --follow [--timeout S]]
 *   packtrain cancel JOB
 * The server is --server URL ($PACKTRAIN_SERVER, default
 * http://127.0.0.1:8080), the token --token T ($PACKTRAIN_TOKEN).  Options
 * are read by getopt_long: `--opt value` and `--opt=value` alike.
 *
 * stdout carries only what a script wants to capture (the job id, the log
 * for `logs`, or with --json the job document, one JSON object per event
 * with --follow); progress and errors go to stderr.  Following a job
 * (client_wait.c, client_follow.c) ends with an exit status that says what
 * happened (client_cmd.h, printed by --help); a server restart is ridden
 * out (connection failures retried for --retry-for seconds). */
#include "server/cli/commands.h"

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/cli/client_cmd.h"

#define DEFAULT_RETRY_S 300

static volatile sig_atomic_t g_signal;

static void on_signal(int sig)
{
    g_signal = sig;
}

static void usage(FILE *out, const char *cmd)
{
    if (!strcmp(cmd, "submit"))
        fprintf(out, "usage: packtrain submit (--dataset FILE | --dataset-id ID) --config job.json\n"
                     "                        [--wait | --follow] [--timeout S] [--detach] [--json]\n"
                     "                        [--server URL] [--token T] [--name NAME] [--format F]\n"
                     "                        [--skip-invalid] [--idempotency-key K] [--retry-for S]\n\n"
                     "Uploads the dataset (unless --dataset-id names one already uploaded; the same\n"
                     "file again is the dataset stored before), submits the job and prints its id on\n"
                     "stdout (--json: the job document).  With --wait, follows the job on stderr\n"
                     "until it ends; --follow also prints its log there as it is written.  Ctrl-C\n"
                     "or --timeout cancel the job then, unless --detach leaves it running.\n");
    else if (!strcmp(cmd, "status"))
        fprintf(out, "usage: packtrain status JOB [--wait | --follow] [--timeout S] [--server URL]\n"
                     "                             [--token T] [--retry-for S] [--json]\n\n"
                     "Prints the job as JSON.  With --wait, follows it to its end first, --follow\n"
                     "with its log on stderr (Ctrl-C or --timeout stop the waiting, never the job).\n");
    else if (!strcmp(cmd, "wait"))
        fprintf(out, "usage: packtrain wait JOB [--follow] [--timeout S] [--server URL] [--token T]\n"
                     "                           [--retry-for S] [--json]\n\n"
                     "Follows the job to its end (--follow: with its log on stderr) and exits with\n"
                     "its outcome; --json prints the final job document.  Ctrl-C or --timeout stop\n"
                     "the waiting, never the job.\n");
    else if (!strcmp(cmd, "logs"))
        fprintf(out, "usage: packtrain logs JOB [--lines N | --follow [--timeout S]] [--server URL]\n"
                     "                           [--token T] [--retry-for S] [--json]\n\n"
                     "Prints the last N lines (default 200) of the job's log on stdout.  With\n"
                     "--follow, prints the whole log and then each line as it is written, until the\n"
                     "job ends, and exits with its outcome as `wait` does (--json: one JSON object\n"
                     "per line: {\"event\":\"log\",\"id\":N,\"line\":...}, progress, end).\n");
    else
        fprintf(out, "usage: packtrain cancel JOB [--server URL] [--token T] [--json]\n\n"
                     "Asks the server to cancel the job (a running one checkpoints and stops) and\n"
                     "prints \"JOB STATE\" (--json: the job document).\n");
    fprintf(out, "\nThe server defaults to $PACKTRAIN_SERVER, else http://127.0.0.1:8080; the token\n"
                 "to $PACKTRAIN_TOKEN.  Options take their value as --opt value or --opt=value.\n\n"
                 "Exit status:\n"
                 "  0    done (following a job: it succeeded)\n"
                 "  1    the job ended without succeeding (failed, stopped or cancelled)\n"
                 "  2    usage error (command line, configuration file)\n"
                 "  3    the server cannot be reached, refused the token, or kept failing\n"
                 "  4    the server refused the request (an invalid job, an unknown job, ...)\n"
                 "  5    --timeout passed before the job ended\n"
                 "  (--follow ends with the same statuses as --wait)\n"
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
       OPT_IDEM, OPT_SKIP, OPT_WAIT, OPT_TIMEOUT, OPT_DETACH, OPT_JSON, OPT_FOLLOW, OPT_LINES };

static int parse(int argc, char **argv, client_args *a)
{
    memset(a, 0, sizeof(*a));
    a->cmd = argv[0];
    a->server = env_or("PACKTRAIN_SERVER", "http://127.0.0.1:8080");
    a->token = env_or("PACKTRAIN_TOKEN", NULL);
    a->retry_s = DEFAULT_RETRY_S;
    a->lines = 200;
    int submit = !strcmp(a->cmd, "submit"), cancel = !strcmp(a->cmd, "cancel"), logs = !strcmp(a->cmd, "logs");
    /* `wait` is `status --wait` that prints only the end */
    a->wait = !strcmp(a->cmd, "wait");
    /* every command's options; those another command owns are refused below */
    static const struct option opts[] = {
        {"server", required_argument, NULL, OPT_SERVER},      {"token", required_argument, NULL, OPT_TOKEN},
        {"retry-for", required_argument, NULL, OPT_RETRY},    {"dataset", required_argument, NULL, OPT_DATASET},
        {"dataset-id", required_argument, NULL, OPT_DATASET_ID}, {"config", required_argument, NULL, OPT_CONFIG},
        {"name", required_argument, NULL, OPT_NAME},          {"format", required_argument, NULL, OPT_FORMAT},
        {"idempotency-key", required_argument, NULL, OPT_IDEM}, {"skip-invalid", no_argument, NULL, OPT_SKIP},
        {"wait", no_argument, NULL, OPT_WAIT},                {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"detach", no_argument, NULL, OPT_DETACH},            {"json", no_argument, NULL, OPT_JSON},
        {"follow", no_argument, NULL, OPT_FOLLOW},            {"lines", required_argument, NULL, OPT_LINES},
        {NULL, 0, NULL, 0}};
    int lines_given = 0;
    optind = 0;   /* a fresh scan (the tests run several commands in one process) */
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        int submit_only = c == OPT_DATASET || c == OPT_DATASET_ID || c == OPT_CONFIG || c == OPT_NAME ||
                          c == OPT_FORMAT || c == OPT_IDEM || c == OPT_SKIP || c == OPT_DETACH;
        int wait_only = c == OPT_WAIT || c == OPT_TIMEOUT || c == OPT_RETRY || c == OPT_FOLLOW;
        if (c == '?' || (submit_only && !submit) || (wait_only && cancel) || (c == OPT_WAIT && logs) ||
            (c == OPT_LINES && !logs)) {
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
        case OPT_FOLLOW: a->follow = a->wait = 1; break;
        case OPT_LINES: {
            lines_given = 1;
            char *end = NULL;
            a->lines = strtol(optarg, &end, 10);
            if (end == optarg || *end || a->lines < 1 || a->lines > 10000) {
                fprintf(stderr, "packtrain logs: --lines must be a number of lines from 1 to 10000, got '%s'\n", optarg);
                return -1;
            }
            break;
        }
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
        fprintf(stderr, "packtrain %s: --%s goes with --%s\n", a->cmd, a->detach ? "detach" : "timeout",
                logs ? "follow" : "wait (or --follow)");
        return -1;
    }
    if (lines_given && a->follow) {
        fprintf(stderr, "packtrain logs: --follow prints the whole log; --lines goes without it\n");
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
        if (c->aborted) return pt_cli_transport_failed("submit", c);
        fprintf(stderr, "packtrain submit: cannot upload %s: %s\n", a->dataset, c->err);
        /* a file that cannot be read is the command line's fault */
        return access(a->dataset, R_OK) != 0 ? EXIT_USAGE : EXIT_SERVER;
    }
    c->timeout_s = 120;
    const char *got = r.json ? json_string_value(json_object_get(r.json, "id")) : NULL;
    if ((r.status != 201 && r.status != 200) || !got) {
        int failed = pt_cli_http_failed("submit", "the dataset was refused", &r);
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
    if (sent != 0) return pt_cli_transport_failed("submit", c);
    const char *id = r.json ? json_string_value(json_object_get(r.json, "id")) : NULL;
    if ((r.status != 201 && r.status != 200) || !id) {
        int failed = pt_cli_http_failed("submit", "the job was refused", &r);
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
    return a->wait ? pt_follow_job(c, a, job_id, stderr) : EXIT_OK;
}

/* METHOD /v1/jobs/ID[SUFFIX] without a body: EXIT_OK with *r a response of
 * one of the two `ok` statuses, else the exit status with the failure on
 * stderr. */
static int job_call(pt_client *c, const char *cmd, const char *method, const char *id,
                    const char *suffix, long ok1, long ok2, const char *what, pt_client_resp *r)
{
    char path[256];
    snprintf(path, sizeof path, "/v1/jobs/%s%s", id, suffix);
    if (pt_client_request(c, method, path, NULL, NULL, 0, r) != 0) return pt_cli_transport_failed(cmd, c);
    if ((r->status != ok1 && r->status != ok2) || !json_is_object(r->json)) {
        int failed = pt_cli_http_failed(cmd, what, r);
        pt_client_resp_clear(r);
        return failed;
    }
    return EXIT_OK;
}

static int run_status(pt_client *c, const client_args *a)
{
    /* `wait`, and --follow --json (whose output is the events), end with
     * the final document only under --json */
    if (!strcmp(a->cmd, "wait") || (a->follow && a->json)) return pt_follow_job(c, a, a->job, stderr);
    if (a->wait) {
        json_t *final = NULL;
        int rc = a->follow ? pt_follow_stream(c, a, a->job, stderr, &final) : pt_follow_wait(c, a, a->job, &final);
        json_decref(final);
        if (rc == EXIT_INTERRUPTED || rc == EXIT_TIMEOUT) return pt_follow_stop(c, a, a->job, rc);
        if (rc != EXIT_OK) return rc;
    }
    pt_client_resp r;
    int rc = job_call(c, "status", "GET", a->job, "", 200, 200, "cannot read the job", &r);
    if (rc != EXIT_OK) return rc;
    json_dumpf(r.json, stdout, JSON_INDENT(2));
    fputc('\n', stdout);
    rc = a->wait ? pt_follow_report_end(a, r.json) : EXIT_OK;
    pt_client_resp_clear(&r);
    return rc;
}

/* A JSON string of a log line; bytes that are not UTF-8 become '?'. */
static json_t *line_json(char *line)
{
    json_t *j = json_string(line);
    if (j) return j;
    for (char *p = line; *p; p++)
        if ((unsigned char)*p >= 0x80) *p = '?';
    return json_string(line);
}

/* The log's tail as text (--json: one {"event":"log","line":...} a line),
 * or with --follow all of it as it is written, to the job's end. */
static int run_logs(pt_client *c, const client_args *a)
{
    if (a->follow) return pt_follow_job(c, a, a->job, stdout);
    char path[256];
    snprintf(path, sizeof path, "/v1/jobs/%s/logs?lines=%ld", a->job, a->lines);
    pt_client_resp r;
    if (pt_client_request(c, "GET", path, NULL, NULL, 0, &r) != 0) return pt_cli_transport_failed("logs", c);
    if (r.status != 200) {
        int failed = pt_cli_http_failed("logs", "cannot read the log", &r);
        pt_client_resp_clear(&r);
        return failed;
    }
    if (!a->json) {
        fwrite(r.body ? r.body : "", 1, r.len, stdout);
    } else {
        for (char *line = r.body, *next; line && *line; line = next) {
            next = strchr(line, '\n');
            if (next) *next++ = '\0';
            json_t *o = json_pack("{s:s,s:o}", "event", "log", "line", line_json(line));
            json_dumpf(o, stdout, JSON_COMPACT);
            fputc('\n', stdout);
            json_decref(o);
        }
    }
    pt_client_resp_clear(&r);
    return EXIT_OK;
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
     * up within a second), then pt_follow_stop() says what became of the
     * job; without SA_RESTART so that a sleep() between retries ends too */
    struct sigaction sa = {.sa_handler = on_signal}, old_int, old_term;
    sigemptyset(&sa.sa_mask);
    g_signal = 0;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    c.stop = &g_signal;
    int rc = !strcmp(a.cmd, "submit")                                  ? run_submit(&c, &a)
             : !strcmp(a.cmd, "status") || !strcmp(a.cmd, "wait") ? run_status(&c, &a)
             : !strcmp(a.cmd, "logs")                             ? run_logs(&c, &a)
                                                                  : run_cancel(&c, &a);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    pt_client_close(&c);
    return rc;
}
