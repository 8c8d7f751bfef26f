/* cmd_serve.c — `packtrain serve`: its flags and environment turned into the
 * service's options (flags override the environment, which overrides
 * defaults); server/serve.c runs the service until SIGTERM or SIGINT and
 * drains it. */
#include "server/cli/commands.h"

#include <errno.h>
#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server/serve.h"

#define DEFAULT_PORT 8080
#define DEMO_FILE "tests/data/api_demo_qm9_64.extxyz"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: packtrain serve [--host ADDR] [--port N] [--data-dir DIR] [--workers N]\n"
            "                       [--auth on|off] [--demo] [options]\n"
            "\n"
            "Runs the packtrain REST API (see /openapi.json) and trains submitted jobs in\n"
            "worker processes.  SIGTERM or SIGINT stops it gracefully; running jobs resume\n"
            "from their last checkpoint at the next start.\n"
            "\n"
            "  --host ADDR          bind address ($PACKTRAIN_HOST, default 127.0.0.1)\n"
            "  --port N             TCP port, 0 = any free one ($PACKTRAIN_PORT, default %d)\n"
            "  --data-dir DIR       database, datasets, jobs ($PACKTRAIN_DATA_DIR, default var)\n"
            "  --workers N          jobs trained at once; 0 = queue only ($PACKTRAIN_WORKERS, default 1)\n"
            "  --auth on|off        require bearer tokens ($PACKTRAIN_AUTH; default on unless\n"
            "                       the address is loopback).  Tokens: 'packtrain token create'\n"
            "  --demo               add a small demo dataset (QM9, 64 molecules) if it is missing\n"
            "  --web-dir DIR        dashboard files served at / (default web)\n"
            "  --cors-origins LIST  origins whose pages' scripts may call the API, comma-separated,\n"
            "                       * any ($PACKTRAIN_CORS_ORIGINS; default none: CORS off)\n"
            "  --threads N          HTTP worker threads (default 4)\n"
            "  --upload-max BYTES   largest dataset upload ($PACKTRAIN_UPLOAD_MAX, default 2 GiB)\n"
            "  --max-runtime S      default max_runtime_seconds of a job run (0 = none)\n"
            "  --cancel-grace S     SIGTERM -> SIGKILL delay for cancelled jobs (default 10)\n"
            "  --max-attempts N     worker crashes before a job fails (default 3)\n"
            "  --keep-checkpoints N the newest checkpoints kept per job, 2..16; a damaged newest\n"
            "                       one is passed over for the one before (default 2)\n"
            "  --worker-memory MB   memory one job's processes may hold: admission refuses a job\n"
            "                       planned above it, a worker that passes it is killed and its\n"
            "                       job fails ($PACKTRAIN_WORKER_MEMORY_MB; default 7/8 of RAM /\n"
            "                       --workers)\n"
            "  --worker-cmd WORDS   worker program and leading arguments, space-separated\n"
            "                       (default: this binary 'worker')\n"
            "  --access-log FILE    one line per request ('-' = stderr), and libmicrohttpd's\n"
            "                       errors and panics (a panic also goes to stderr)\n"
            "  --port-file FILE     write the bound port to FILE once listening\n"
            "\n"
            "Limits (each also from its environment variable; 0 = none):\n"
            "  --upload-max-decompressed BYTES  text of one upload once decompressed\n"
            "                       ($PACKTRAIN_UPLOAD_MAX_DECOMPRESSED, default 8 GiB)\n"
            "  --upload-max-structures N   structures in one upload ($PACKTRAIN_UPLOAD_MAX_STRUCTURES,\n"
            "                       default 5000000)\n"
            "  --upload-max-atoms N atoms in one upload ($PACKTRAIN_UPLOAD_MAX_ATOMS, default 100000000)\n"
            "  --quota-storage BYTES   stored datasets per owner ($PACKTRAIN_QUOTA_STORAGE, default 20 GiB)\n"
            "  --quota-jobs N       queued and running jobs per owner ($PACKTRAIN_QUOTA_JOBS, default 8)\n"
            "  --predict-max-atoms N   atoms in one predict request ($PACKTRAIN_PREDICT_MAX_ATOMS,\n"
            "                       default 100000)\n"
            "  --predict-max-edges N   neighbour edges of one predict request at the model's cutoff\n"
            "                       ($PACKTRAIN_PREDICT_MAX_EDGES, default 5000000)\n"
            "  --heavy-threads N    uploads, packing reports and predictions run at once, off the HTTP\n"
            "                       threads ($PACKTRAIN_HEAVY_THREADS, default 2)\n"
            "  --heavy-queue N      more of them waiting; past it 503 + Retry-After\n"
            "                       ($PACKTRAIN_HEAVY_QUEUE, default 8)\n"
            "  --heavy-deadline S   one of them is given up (503) after S seconds\n"
            "                       ($PACKTRAIN_HEAVY_DEADLINE, default 600)\n"
            "  --stop-grace S       on SIGTERM, in-flight requests finish or are answered 503 within S\n"
            "                       seconds ($PACKTRAIN_STOP_GRACE, default 5)\n"
            "  --min-free BYTES     below this free space on the data directory /readyz fails and\n"
            "                       uploads, predictions and new jobs get 507 ($PACKTRAIN_MIN_FREE,\n"
            "                       default 256 MiB)\n"
            "  --max-per-client N   open connections of one client address ($PACKTRAIN_MAX_PER_CLIENT,\n"
            "                       default 256 of the 512 the server takes; 0 = no limit)\n"
            "  --header-timeout S   a connection that has not sent a request's complete headers within S\n"
            "                       seconds (of connecting, or of its previous request) is closed,\n"
            "                       however it trickles ($PACKTRAIN_HEADER_TIMEOUT, default 30)\n"
            "  --body-min-rate B    ... and its body within S + Content-Length / B seconds\n"
            "                       ($PACKTRAIN_BODY_MIN_RATE bytes/s, default 4096; 0 = no body deadline)\n",
            DEFAULT_PORT);
}

typedef struct serve_args {
    pt_app_options opt;
    const char *host, *data_dir, *auth, *access_log, *port_file, *worker_cmd;
    int demo;
    char *worker_words[PT_SCHEDULER_ARGV_MAX + 1];
    char *worker_buf;
} serve_args;

static const char *env_or(const char *name, const char *def)
{
    const char *v = getenv(name);
    return v && v[0] ? v : def;
}

static int parse_num(const char *flag, const char *v, double min, double max, double *out)
{
    char *end = NULL;
    errno = 0;
    double d = v ? strtod(v, &end) : 0;
    if (!v || !v[0] || *end || errno || !(d >= min && d <= max)) {
        fprintf(stderr, "packtrain serve: %s must be a number in [%g, %g], got '%s'\n", flag, min, max, v ? v : "");
        return -1;
    }
    *out = d;
    return 0;
}

static int split_worker_cmd(serve_args *a)
{
    a->worker_buf = strdup(a->worker_cmd);
    if (!a->worker_buf) return -1;
    int n = 0;
    for (char *save = NULL, *w = strtok_r(a->worker_buf, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
        if (n >= PT_SCHEDULER_ARGV_MAX) {
            fprintf(stderr, "packtrain serve: --worker-cmd has more than %d words\n", PT_SCHEDULER_ARGV_MAX);
            return -1;
        }
        a->worker_words[n++] = w;
    }
    if (n == 0) {
        fprintf(stderr, "packtrain serve: --worker-cmd is empty\n");
        return -1;
    }
    a->worker_words[n] = NULL;
    a->opt.worker_argv = (const char *const *)a->worker_words;
    return 0;
}

/* Text flags: where the value goes (in serve_args). */
typedef struct text_flag {
    const char *flag, *env;
    size_t offset;
} text_flag;

static const text_flag text_flags[] = {
    {"--host", "PACKTRAIN_HOST", offsetof(serve_args, host)},
    {"--data-dir", "PACKTRAIN_DATA_DIR", offsetof(serve_args, data_dir)},
    {"--auth", "PACKTRAIN_AUTH", offsetof(serve_args, auth)},
    {"--web-dir", NULL, offsetof(serve_args, opt.web_dir)},
    {"--cors-origins", "PACKTRAIN_CORS_ORIGINS", offsetof(serve_args, opt.cors_origins)},
    {"--worker-cmd", NULL, offsetof(serve_args, worker_cmd)},
    {"--access-log", NULL, offsetof(serve_args, access_log)},
    {"--port-file", NULL, offsetof(serve_args, port_file)},
};

/* Numeric flags: range, and how the number is stored in pt_app_options. */
typedef enum num_kind { NUM_U64, NUM_MB, NUM_INT, NUM_UINT, NUM_DOUBLE } num_kind;

typedef struct num_flag {
    const char *flag, *env;
    double min, max;
    num_kind kind;
    size_t offset;
} num_flag;

#define OPT(field) offsetof(pt_app_options, field)
static const num_flag num_flags[] = {
    {"--port", "PACKTRAIN_PORT", 0, 65535, NUM_UINT, OPT(port)},
    {"--workers", "PACKTRAIN_WORKERS", 0, PT_SCHEDULER_SLOTS_MAX, NUM_INT, OPT(workers)},
    {"--threads", NULL, 1, 256, NUM_UINT, OPT(http_threads)},
    {"--upload-max", "PACKTRAIN_UPLOAD_MAX", 1, 1e15, NUM_U64, OPT(upload_max)},
    {"--max-runtime", NULL, 0, 1e9, NUM_DOUBLE, OPT(max_runtime_s)},
    {"--cancel-grace", NULL, 0, 3600, NUM_DOUBLE, OPT(cancel_grace_s)},
    {"--max-attempts", NULL, 1, 100, NUM_INT, OPT(max_attempts)},
    {"--keep-checkpoints", NULL, 2, PT_SCHEDULER_CHECKPOINTS_MAX, NUM_INT, OPT(checkpoints_kept)},
    {"--worker-memory", "PACKTRAIN_WORKER_MEMORY_MB", 64, 1 << 30, NUM_MB, OPT(worker_memory_bytes)},
    {"--upload-max-decompressed", "PACKTRAIN_UPLOAD_MAX_DECOMPRESSED", 0, 1e15, NUM_U64,
     OPT(limits.upload_decompressed_bytes)},
    {"--upload-max-structures", "PACKTRAIN_UPLOAD_MAX_STRUCTURES", 0, 4e9, NUM_U64, OPT(limits.upload_structures)},
    {"--upload-max-atoms", "PACKTRAIN_UPLOAD_MAX_ATOMS", 0, 1e15, NUM_U64, OPT(limits.upload_atoms)},
    {"--quota-storage", "PACKTRAIN_QUOTA_STORAGE", 0, 1e18, NUM_U64, OPT(limits.owner_storage_bytes)},
    {"--quota-jobs", "PACKTRAIN_QUOTA_JOBS", 0, 1e6, NUM_INT, OPT(limits.owner_jobs)},
    {"--predict-max-atoms", "PACKTRAIN_PREDICT_MAX_ATOMS", 0, 1e12, NUM_U64, OPT(limits.predict_atoms)},
    {"--predict-max-edges", "PACKTRAIN_PREDICT_MAX_EDGES", 0, 1e15, NUM_U64, OPT(limits.predict_edges)},
    {"--heavy-threads", "PACKTRAIN_HEAVY_THREADS", 1, 256, NUM_UINT, OPT(limits.heavy_threads)},
    {"--heavy-queue", "PACKTRAIN_HEAVY_QUEUE", 0, 100000, NUM_UINT, OPT(limits.heavy_queue)},
    {"--heavy-deadline", "PACKTRAIN_HEAVY_DEADLINE", 0, 1e6, NUM_UINT, OPT(limits.heavy_deadline_s)},
    {"--stop-grace", "PACKTRAIN_STOP_GRACE", 1, 3600, NUM_UINT, OPT(stop_grace_s)},
    {"--min-free", "PACKTRAIN_MIN_FREE", 0, 1e18, NUM_U64, OPT(min_free_bytes)},
    {"--max-per-client", "PACKTRAIN_MAX_PER_CLIENT", 0, 100000, NUM_UINT, OPT(limits.connections_per_client)},
    {"--header-timeout", "PACKTRAIN_HEADER_TIMEOUT", 1, 3600, NUM_UINT, OPT(limits.header_timeout_s)},
    {"--body-min-rate", "PACKTRAIN_BODY_MIN_RATE", 0, 1e12, NUM_U64, OPT(limits.body_min_rate)},
};
#undef OPT

static int set_num(pt_app_options *o, const num_flag *f, const char *v)
{
    double d;
    if (parse_num(f->flag, v, f->min, f->max, &d)) return -1;
    char *at = (char *)o + f->offset;
    switch (f->kind) {
    case NUM_U64: *(uint64_t *)(void *)at = (uint64_t)d; break;
    case NUM_MB: *(uint64_t *)(void *)at = (uint64_t)d << 20; break;
    case NUM_INT: *(int *)(void *)at = (int)d; break;
    case NUM_UINT: *(unsigned *)(void *)at = (unsigned)d; break;
    case NUM_DOUBLE: *(double *)(void *)at = d; break;
    }
    return 0;
}

static int parse(int argc, char **argv, serve_args *a)
{
    pt_app_options *o = &a->opt;
    const char *nums[sizeof num_flags / sizeof num_flags[0]];
    a->host = "127.0.0.1";
    a->data_dir = "var";
    o->web_dir = "web";
    o->port = DEFAULT_PORT;
    /* the environment first, then the flags over it */
    for (size_t k = 0; k < sizeof text_flags / sizeof text_flags[0]; k++)
        if (text_flags[k].env && env_or(text_flags[k].env, NULL))
            *(const char **)(void *)((char *)a + text_flags[k].offset) = env_or(text_flags[k].env, NULL);
    for (size_t k = 0; k < sizeof num_flags / sizeof num_flags[0]; k++)
        nums[k] = num_flags[k].env ? env_or(num_flags[k].env, NULL) : NULL;
    /* getopt_long's table, made from the two tables above (their flags
     * without the leading "--"): val = the flag's index, text flags first */
    enum { N_TEXT = sizeof text_flags / sizeof text_flags[0], N_NUM = sizeof num_flags / sizeof num_flags[0] };
    struct option opts[N_TEXT + N_NUM + 2];
    for (size_t k = 0; k < N_TEXT; k++) opts[k] = (struct option){text_flags[k].flag + 2, required_argument, NULL, (int)k};
    for (size_t k = 0; k < N_NUM; k++)
        opts[N_TEXT + k] = (struct option){num_flags[k].flag + 2, required_argument, NULL, (int)(N_TEXT + k)};
    opts[N_TEXT + N_NUM] = (struct option){"demo", no_argument, NULL, N_TEXT + N_NUM};
    opts[N_TEXT + N_NUM + 1] = (struct option){NULL, 0, NULL, 0};
    optind = 0;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        if (c == '?') {
            fprintf(stderr, "packtrain serve: unknown option '%s'\n", argv[optind - 1]);
            return -1;
        }
        if (c == ':') {
            fprintf(stderr, "packtrain serve: %s needs a value\n", argv[optind - 1]);
            return -1;
        }
        if (c == N_TEXT + N_NUM) a->demo = 1;
        else if (c < N_TEXT) *(const char **)(void *)((char *)a + text_flags[c].offset) = optarg;
        else nums[c - N_TEXT] = optarg;
    }
    if (optind < argc) {
        fprintf(stderr, "packtrain serve: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    for (size_t k = 0; k < sizeof num_flags / sizeof num_flags[0]; k++)
        if (nums[k] && set_num(o, &num_flags[k], nums[k])) return -1;
    o->host = a->host;
    o->data_dir = a->data_dir;
    if (!a->auth) o->auth = !pt_serve_is_loopback(a->host);
    else if (!strcasecmp(a->auth, "on")) o->auth = 1;
    else if (!strcasecmp(a->auth, "off")) o->auth = 0;
    else {
        fprintf(stderr, "packtrain serve: --auth must be on or off, got '%s'\n", a->auth);
        return -1;
    }
    if (a->worker_cmd && split_worker_cmd(a) != 0) return -1;
    return 0;
}

static int serve(serve_args *a)
{
    FILE *log = NULL;
    if (a->access_log) {
        log = !strcmp(a->access_log, "-") ? stderr : fopen(a->access_log, "a");
        if (!log) {
            fprintf(stderr, "packtrain serve: cannot open access log %s: %s\n", a->access_log, strerror(errno));
            return 1;
        }
        a->opt.access_log = log;
    }
    pt_serve_options so = {.app = a->opt, .demo_file = a->demo ? DEMO_FILE : NULL,
                           .port_file = a->port_file};
    int rc = pt_serve_run(&so);
    if (log && log != stderr) fclose(log);
    return rc;
}

int pt_cmd_serve(int argc, char **argv)
{
    if (pt_cli_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    serve_args a;
    memset(&a, 0, sizeof a);
    pt_app_options_defaults(&a.opt);
    if (parse(argc, argv, &a) != 0) {
        free(a.worker_buf);
        fprintf(stderr, "'packtrain serve --help' lists the options\n");
        return 2;
    }
    int rc = serve(&a);
    free(a.worker_buf);
    return rc;
}
