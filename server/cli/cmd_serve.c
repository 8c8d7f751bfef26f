/* cmd_serve.c — `packtrain serve`: its flags and environment turned into the
 * service's options (flags override the environment, which overrides
 * defaults); server/serve.c runs the service until SIGTERM or SIGINT and
 * drains it. */
#include "server/cli/commands.h"

#include <errno.h>
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
            "  --threads N          HTTP worker threads (default 4)\n"
            "  --upload-max BYTES   largest dataset upload ($PACKTRAIN_UPLOAD_MAX, default 2 GiB)\n"
            "  --max-runtime S      default max_runtime_seconds of a job run (0 = none)\n"
            "  --cancel-grace S     SIGTERM -> SIGKILL delay for cancelled jobs (default 10)\n"
            "  --max-attempts N     worker crashes before a job fails (default 3)\n"
            "  --worker-memory MB   memory one job's processes may hold: admission refuses a job\n"
            "                       planned above it, a worker that passes it is killed and its\n"
            "                       job fails ($PACKTRAIN_WORKER_MEMORY_MB; default 7/8 of RAM /\n"
            "                       --workers)\n"
            "  --worker-cmd WORDS   worker program and leading arguments, space-separated\n"
            "                       (default: this binary 'worker')\n"
            "  --access-log FILE    one line per request ('-' = stderr)\n"
            "  --port-file FILE     write the bound port to FILE once listening\n",
            DEFAULT_PORT);
}

typedef struct serve_args {
    pt_app_options opt;
    const char *auth, *access_log, *port_file, *worker_cmd;
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

static int parse(int argc, char **argv, serve_args *a)
{
    pt_app_options *o = &a->opt;
    const char *host = env_or("PACKTRAIN_HOST", "127.0.0.1"), *data_dir = env_or("PACKTRAIN_DATA_DIR", "var");
    const char *port = env_or("PACKTRAIN_PORT", NULL), *workers = env_or("PACKTRAIN_WORKERS", NULL);
    const char *upload = env_or("PACKTRAIN_UPLOAD_MAX", NULL), *threads = NULL, *runtime = NULL, *grace = NULL;
    const char *attempts = NULL, *worker_memory = env_or("PACKTRAIN_WORKER_MEMORY_MB", NULL);
    a->auth = env_or("PACKTRAIN_AUTH", NULL);
    o->web_dir = "web";
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "--demo")) {
            a->demo = 1;
            continue;
        }
        const char **slot = !strcmp(f, "--host") ? &host : !strcmp(f, "--port") ? &port
                          : !strcmp(f, "--data-dir") ? &data_dir : !strcmp(f, "--workers") ? &workers
                          : !strcmp(f, "--auth") ? &a->auth : !strcmp(f, "--web-dir") ? &o->web_dir
                          : !strcmp(f, "--threads") ? &threads : !strcmp(f, "--upload-max") ? &upload
                          : !strcmp(f, "--max-runtime") ? &runtime : !strcmp(f, "--cancel-grace") ? &grace
                          : !strcmp(f, "--max-attempts") ? &attempts : !strcmp(f, "--worker-cmd") ? &a->worker_cmd
                          : !strcmp(f, "--worker-memory") ? &worker_memory
                          : !strcmp(f, "--access-log") ? &a->access_log : !strcmp(f, "--port-file") ? &a->port_file
                          : NULL;
        if (!slot) {
            fprintf(stderr, "packtrain serve: unknown option '%s'\n", f);
            return -1;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "packtrain serve: %s needs a value\n", f);
            return -1;
        }
        *slot = argv[++i];
    }
    o->host = host;
    o->data_dir = data_dir;
    double d;
    o->port = 8080;
    if (port && parse_num("--port", port, 0, 65535, &d)) return -1;
    if (port) o->port = (unsigned)d;
    if (workers && parse_num("--workers", workers, 0, PT_SCHEDULER_SLOTS_MAX, &d)) return -1;
    if (workers) o->workers = (int)d;
    if (threads && parse_num("--threads", threads, 1, 256, &d)) return -1;
    if (threads) o->http_threads = (unsigned)d;
    if (upload && parse_num("--upload-max", upload, 1, 1e15, &d)) return -1;
    if (upload) o->upload_max = (uint64_t)d;
    if (runtime && parse_num("--max-runtime", runtime, 0, 1e9, &o->max_runtime_s)) return -1;
    if (grace && parse_num("--cancel-grace", grace, 0, 3600, &o->cancel_grace_s)) return -1;
    if (attempts && parse_num("--max-attempts", attempts, 1, 100, &d)) return -1;
    if (attempts) o->max_attempts = (int)d;
    if (worker_memory && parse_num("--worker-memory", worker_memory, 64, 1 << 30, &d)) return -1;
    if (worker_memory) o->worker_memory_bytes = (uint64_t)d << 20;
    if (!a->auth) o->auth = !pt_serve_is_loopback(host);
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
