/* cmd_worker.c — `packtrain worker --job ID --config FILE --data DATA.ptd
 * --out DIR [--resume CHECKPOINT]`: one training job as the scheduler runs
 * it (server/sched/scheduler.h), in its own process.  A job of backend.kind
 * "mpi" with N > 1 ranks runs this same command again under `packtrain
 * mpirun --protocol --ranks N` (this process becomes the launcher), so each
 * rank is a worker and rank 0 speaks the protocol.
 *
 * stdout carries only the JSON-lines protocol of server/sched/worker_proto.h, one
 * flushed line at a time: every metrics line of pt_train_run (step and epoch
 * lines, which already carry "kind"), a progress line after each (fraction
 * of the planned optimizer steps), a checkpoint line once each checkpoint
 * is durable, and finally `done` (exit 0) or `error` (exit 1; 2 for bad
 * arguments).  stderr, which the scheduler appends to the job's worker.log,
 * gets the human-readable account.
 *
 * SIGTERM or SIGINT ends training after the current step with a checkpoint
 * of the exact state (its line is printed) and exit 0 WITHOUT a done line:
 * the scheduler then marks a cancelling job cancelled, leaves a draining
 * server's job running to be resumed at the next start (--resume), and
 * fails a job over its max runtime.  Only a run that finished reports done. */
#include "server/cli/commands.h"

#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "engine/train/config.h"
#include "engine/data/dataset.h"
#include "engine/core/errors.h"
#include "engine/mpi/mpi_backend.h"
#include "engine/run/run.h"
#include "engine/train/train.h"

static volatile sig_atomic_t stop_signal;

static void on_stop(int sig)
{
    stop_signal = sig;
}

typedef struct worker {
    const char *job, *config, *data, *out, *resume;
} worker;

static int should_stop(void *user)
{
    (void)user;
    return stop_signal != 0;
}

static void put_line(const char *text)
{
    fputs(text, stdout);
    fputc('\n', stdout);
    fflush(stdout);
}

/* A protocol line built with jansson (escaping done right). */
static void put_json(json_t *o)
{
    char *text = o ? json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(9)) : NULL;
    if (text) put_line(text);
    free(text);
    json_decref(o);
}

static void on_metrics(void *user, const pt_train_metrics *m, const char *json)
{
    const worker *w = user;
    put_line(json);
    double p = m->total_steps > 0 ? (double)m->step / (double)m->total_steps : 0.0;
    put_json(json_pack("{s:s, s:f, s:i, s:I}", "kind", "progress", "progress", p < 1.0 ? p : 1.0,
                       "epoch", (int)m->epoch, "step", (json_int_t)m->step));
    if (!strcmp(m->kind, "epoch") && m->has_forces)
        fprintf(stderr, "packtrain worker %s: epoch %d done at step %lld: train loss %.6g, "
                "val MAE %.6g, RMSE %.6g; forces val MAE %.6g eV/A, RMSE %.6g eV/A\n", w->job,
                (int)m->epoch, (long long)m->step, m->train_loss, m->val_mae, m->val_rmse,
                m->val_forces_mae, m->val_forces_rmse);
    else if (!strcmp(m->kind, "epoch"))
        fprintf(stderr, "packtrain worker %s: epoch %d done at step %lld: train loss %.6g, "
                "val MAE %.6g, RMSE %.6g\n", w->job, (int)m->epoch, (long long)m->step,
                m->train_loss, m->val_mae, m->val_rmse);
    for (int k = 0; !strcmp(m->kind, "epoch") && k < m->n_heads; k++)
        fprintf(stderr, "packtrain worker %s:   %s: val MAE %.6g, RMSE %.6g\n", w->job,
                m->head_key[k], m->val_head[k].mae, m->val_head[k].rmse);
}

static void on_checkpoint(void *user, const pt_train_checkpoint *ck)
{
    const worker *w = user;
    put_json(json_pack("{s:s, s:I, s:i, s:s}", "kind", "checkpoint", "step", (json_int_t)ck->step,
                       "epoch", (int)ck->epoch, "path", ck->path));
    fprintf(stderr, "packtrain worker %s: checkpoint of step %lld in %s\n", w->job,
            (long long)ck->step, ck->path);
}

/* Every error to stderr; the first (and how many more) as the error line. */
static void report_errors(const worker *w, const pt_errors *errs, const char *what)
{
    char buf[PT_ERR_FILE_MAX + PT_ERR_FIELD_MAX + PT_ERR_MSG_MAX + 64];
    for (size_t i = 0; i < errs->kept; i++) {
        pt_error_format(&errs->items[i], buf, sizeof buf);
        fprintf(stderr, "packtrain worker %s: %s: %s\n", w->job ? w->job : "-", what, buf);
    }
    pt_errors_first(errs, buf, sizeof buf);
    char msg[sizeof buf + 128];
    if (errs->total > 1)
        snprintf(msg, sizeof msg, "%s: %s (and %zu more, see the log)", what, buf,
                 errs->total - 1);
    else
        snprintf(msg, sizeof msg, "%s: %s", what, buf);
    put_json(json_pack("{s:s, s:s}", "kind", "error", "message", msg));
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: packtrain worker --job ID --config FILE --data DATA.ptd --out DIR\n"
            "                        [--resume CHECKPOINT]\n"
            "\n"
            "Runs one training job for the server's scheduler (it is not meant to be run\n"
            "by hand; 'packtrain train' is the local command).  stdout carries the\n"
            "JSON-lines worker protocol: step, epoch and progress lines, a checkpoint line\n"
            "after each checkpoint is on disk, then {\"kind\":\"done\",...} or\n"
            "{\"kind\":\"error\",\"message\":...}; stderr is the human log.\n"
            "\n"
            "  --job ID           the job's id (for the log)\n"
            "  --config FILE      the job configuration (JSON, as 'packtrain train --config')\n"
            "  --data FILE        the dataset (.ptd from 'packtrain ingest')\n"
            "  --out DIR          DIR/model.safetensors (best by validation), metrics.jsonl,\n"
            "                     result.json and checkpoints/\n"
            "  --resume FILE      continue from this checkpoint (same configuration and data)\n"
            "\n"
            "SIGTERM or SIGINT: checkpoint after the current step, then exit 0 without done.\n"
            "Exit status: 0 done or stopped, 1 training failed, 2 bad arguments.\n");
}

static int usage_error(const char *fmt, const char *arg)
{
    char msg[512];
    snprintf(msg, sizeof msg, fmt, arg);
    fprintf(stderr, "packtrain worker: %s\n", msg);
    usage(stderr);
    put_json(json_pack("{s:s, s:s}", "kind", "error", "message", msg));
    return 2;
}

static int parse_args(worker *w, int argc, char **argv)
{
    const char *names[] = {"--job", "--config", "--data", "--out", "--resume"};
    const char **slots[] = {&w->job, &w->config, &w->data, &w->out, &w->resume};
    static const struct option opts[] = {{"job", required_argument, NULL, 0}, {"config", required_argument, NULL, 1},
                                         {"data", required_argument, NULL, 2}, {"out", required_argument, NULL, 3},
                                         {"resume", required_argument, NULL, 4}, {NULL, 0, NULL, 0}};
    optind = 0;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        if (c == '?') return usage_error("unexpected argument '%s'", argv[optind - 1]);
        if (c == ':') return usage_error("%s needs a value", argv[optind - 1]);
        *slots[c] = optarg;
    }
    if (optind < argc) return usage_error("unexpected argument '%s'", argv[optind]);
    for (size_t k = 0; k < 4; k++)
        if (!*slots[k]) return usage_error("%s is required", names[k]);
    return 0;
}

/* The done line: the model and the run's result, the final validation
 * and test errors the scheduler stores with the job (worker_proto.h). */
static void report_done(const worker *w, const pt_train_result *res)
{
    static const char *const keys[] = {
        "best_epoch", "best_val_rmse", "test_mae", "test_rmse", "best_val_forces_mae",
        "best_val_forces_rmse", "test_forces_mae", "test_forces_rmse", "test_forces_zero_mae",
        "best_val_stress_mae", "test_stress_mae", "test_stress_rmse", "heads"};
    char model[4200];
    snprintf(model, sizeof model, "%s/model.safetensors", w->out);
    json_t *o = json_pack("{s:s, s:o}", "kind", "done", "best_val_mae",
                          isfinite(res->best_val_mae) ? json_real(res->best_val_mae)
                                                      : json_null());
    if (o && access(model, F_OK) == 0) json_object_set_new(o, "model", json_string(model));
    json_t *r = pt_train_result_json(res);
    for (size_t k = 0; o && r && k < sizeof keys / sizeof keys[0]; k++) {
        json_t *v = json_object_get(r, keys[k]);
        if (v) json_object_set(o, keys[k], v);
    }
    json_decref(r);
    put_json(o);
    fprintf(stderr, "packtrain worker %s: done: %lld steps, %d epochs (%s) in %.1f s; best "
            "epoch %d, val MAE %.6g, test MAE %.6g\n", w->job, (long long)res->steps,
            (int)res->epochs, res->stop_reason, res->seconds, (int)res->best_epoch,
            res->best_val_mae, res->test_mae);
}

static int run(const worker *w, int argc, char **argv, pt_errors *errs)
{
    pt_job_config cfg;
    if (pt_job_config_load(&cfg, w->config, errs) != 0) {
        report_errors(w, errs, "invalid job configuration");
        return 1;
    }
    if (pt_mpi_needs_launch(&cfg)) {
        /* the ranks: this same command again under the launcher, which
         * reports a failure to start as a protocol line */
        fprintf(stderr, "packtrain worker %s: starting %d MPI ranks\n", w->job,
                (int)cfg.backend.ranks);
        pt_cli_mpi_relaunch(cfg.backend.ranks, 1, argc, argv, errs);
        report_errors(w, errs, "cannot start the MPI ranks");
        return 1;
    }
    pt_dataset ds;
    char err[PT_ERR_FILE_MAX + PT_ERR_MSG_MAX];
    if (pt_dataset_open(&ds, w->data, err, sizeof err) != 0) {
        pt_errors_add(errs, NULL, 0, "", "%s", err);
        report_errors(w, errs, "cannot open the dataset");
        return 1;
    }
    if (w->resume)
        fprintf(stderr, "packtrain worker %s: resuming from %s\n", w->job, w->resume);
    pt_train_options opt = {.user = (void *)w, .on_metrics = on_metrics,
                            .should_stop = should_stop, .resume_path = w->resume,
                            .on_checkpoint = on_checkpoint,
                            /* the scheduler deletes what it no longer needs */
                            .keep_all_checkpoints = 1};
    pt_train_result res;
    int rc = pt_run_train(&cfg, &ds, w->out, &opt, &res, errs);
    pt_dataset_close(&ds);
    if (rc != 0) {
        report_errors(w, errs, "training failed");
        return 1;
    }
    if (!strcmp(res.stop_reason, "cancelled")) {
        fprintf(stderr, "packtrain worker %s: stopped by signal %d after step %lld; "
                "checkpoint %s\n", w->job, (int)stop_signal, (long long)res.steps,
                res.last_checkpoint[0] ? res.last_checkpoint : "(none)");
        return 0;
    }
    report_done(w, &res);
    return 0;
}

int pt_cmd_worker(int argc, char **argv)
{
    if (pt_cli_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    worker w = {0};
    int rc = parse_args(&w, argc, argv);
    if (rc != 0) return rc;
    /* SA_RESTART: a signal in the middle of writing a checkpoint must not
     * turn into a failed write */
    struct sigaction sa = {.sa_handler = on_stop, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    struct sigaction old_term, old_int;
    stop_signal = 0;
    sigaction(SIGTERM, &sa, &old_term);
    sigaction(SIGINT, &sa, &old_int);
    fprintf(stderr, "packtrain worker %s: pid %d, config %s, data %s, out %s\n", w.job,
            (int)getpid(), w.config, w.data, w.out);
    pt_errors errs;
    pt_errors_init(&errs, 0);
    rc = run(&w, argc, argv, &errs);
    pt_errors_close(&errs);
    sigaction(SIGTERM, &old_term, NULL);
    sigaction(SIGINT, &old_int, NULL);
    return rc;
}
