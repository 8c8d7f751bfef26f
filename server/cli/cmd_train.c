/* cmd_train.c — `packtrain train DATA [--config job.json] [--out DIR]
 * [--checkpoint-every N] [--resume CHECKPOINT]`: local training without the
 * server, through the same engine entry (engine/run/run.h: pt_run_train and
 * the backend of the job's kind) the server's workers use.  DATA is a .ptd
 * or any file `ingest` reads, ingested into the cache on first use
 * (dataset_arg.c); a job of kind "mpi" with several ranks starts them.  Metrics lines go to stdout
 * as JSON lines (and to DIR/metrics.jsonl), the summary and any errors to
 * stderr.  Ctrl-C stops after the current step, keeps the best model so far
 * and writes a checkpoint to continue from with --resume. */
#include "server/cli/commands.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/train/config.h"
#include "engine/data/dataset.h"
#include "engine/core/errors.h"
#include "engine/mpi/mpi_backend.h"
#include "engine/run/run.h"
#include "engine/train/train.h"

#define DEFAULT_OUT "train-out"

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
}

/* max_runtime_seconds of the job: a run past it stops as on Ctrl-C and
 * fails, as the server's scheduler fails such a job. */
typedef struct run_limit {
    double limit_s, start;
    int exceeded;
} run_limit;

static double wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int stop_requested(void *user)
{
    run_limit *l = user;
    if (l->limit_s > 0 && wall() - l->start >= l->limit_s) l->exceeded = 1;
    return interrupted || l->exceeded;
}

static void print_line(void *user, const pt_train_metrics *m, const char *json)
{
    (void)user;
    (void)m;
    printf("%s\n", json);
    fflush(stdout);
}

/* The closing lines of a run that ended well, on stderr. */
static void print_summary(const pt_train_result *res, const char *data, const char *config,
                          const char *out)
{
    fprintf(stderr,
            "packtrain train: %lld steps, %d epochs in %.1f s (%s); best epoch %d: "
            "val MAE %.6g RMSE %.6g, test MAE %.6g RMSE %.6g; model in %s/model.safetensors\n",
            (long long)res->steps, (int)res->epochs, res->seconds, res->stop_reason,
            (int)res->best_epoch, res->best_val_mae, res->best_val_rmse, res->test_mae,
            res->test_rmse, out);
    for (int k = 0; k < res->n_heads; k++)
        fprintf(stderr, "packtrain train:   %s: best val MAE %.6g RMSE %.6g, test MAE %.6g "
                "RMSE %.6g\n", res->head_key[k], res->val_head[k].mae, res->val_head[k].rmse,
                res->test_head[k].mae, res->test_head[k].rmse);
    if (res->loss.forces)
        fprintf(stderr, "packtrain train: forces (eV/A): best val MAE %.6g RMSE %.6g, test "
                "MAE %.6g RMSE %.6g; predicting zero forces: test MAE %.6g\n",
                res->best_val_forces_mae, res->best_val_forces_rmse, res->test_forces_mae,
                res->test_forces_rmse, res->test_forces_zero_mae);
    if (res->loss.w.stress > 0.0)
        fprintf(stderr, "packtrain train: stress (eV/A^3): best val MAE %.6g, test MAE "
                "%.6g RMSE %.6g\n", res->best_val_stress_mae, res->test_stress_mae,
                res->test_stress_rmse);
    if (!strcmp(res->stop_reason, "cancelled") && res->last_checkpoint[0])
        fprintf(stderr, "packtrain train: to continue: packtrain train %s%s%s --out %s "
                "--resume %s\n", data, config ? " --config " : "", config ? config : "",
                out, res->last_checkpoint);
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: packtrain train DATA [--config job.json] [--out DIR]\n"
            "                       [--checkpoint-every N] [--resume CHECKPOINT]\n"
            "\n"
            "Trains SchNet on DATA as the server's workers do: a .ptd dataset, or a file\n"
            "'packtrain ingest' reads (.xyz, .extxyz, raw QM9, plain or .gz), ingested on\n"
            "first use into $XDG_CACHE_HOME/packtrain (else ~/.cache/packtrain) and reused\n"
            "while the file is unchanged.  One JSON line per logged step and per epoch:\n"
            "  {\"kind\":\"step\"|\"epoch\",\"step\",\"epoch\",\"loss\",\"lr\",\"graphs_per_s\",\n"
            "   \"nodes_per_s\",\"padding_fraction\",\"seconds\"}  (epoch lines add\n"
            "   \"train_loss\",\"val_mae\",\"val_rmse\").  On data with forces the job trains\n"
            "on energies and forces (training.loss \"auto\"); its lines add \"loss_energy\",\n"
            "\"loss_forces\" and, on epoch lines, \"val_loss\", \"val_forces_mae\",\n"
            "\"val_forces_rmse\" (eV/A), and the summary gives the test force MAE next to\n"
            "the MAE of predicting zero forces.\n"
            "\n"
            "  --config FILE  job configuration (JSON, the same the REST API accepts); every\n"
            "                 key is optional, defaults as in README and engine/train/config.h\n"
            "  --out DIR      writes DIR/model.safetensors (best by validation loss),\n"
            "                 DIR/metrics.jsonl, DIR/result.json and checkpoints in\n"
            "                 DIR/checkpoints/; default ./" DEFAULT_OUT "\n"
            "  --checkpoint-every N\n"
            "                 a checkpoint every N optimizer steps (overrides\n"
            "                 training.checkpoint_every; 0 = only at epoch ends)\n"
            "  --resume FILE  continue from a checkpoint of the same configuration and\n"
            "                 data: the run goes on with the very next step\n"
            "\n"
            "Ctrl-C ends training after the current step; the best model is kept and a\n"
            "checkpoint written, whose path is printed, to continue from with --resume.\n"
            "A job's max_runtime_seconds stops it the same way, and the exit status is 1.\n"
            "Exit status: 0 trained, 1 training failed, 2 bad arguments or configuration\n"
            "(a training.loss weight the data has no labels for included).\n");
}

int pt_cmd_train(int argc, char **argv)
{
    if (pt_cli_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    const char *data = NULL, *config = NULL, *out = DEFAULT_OUT, *resume = NULL, *every = NULL;
    int data_at = 0;
    static const struct option opts[] = {{"config", required_argument, NULL, 'c'},
                                         {"out", required_argument, NULL, 'o'},
                                         {"resume", required_argument, NULL, 'r'},
                                         {"checkpoint-every", required_argument, NULL, 'e'},
                                         {NULL, 0, NULL, 0}};
    optind = 0;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        if (c == '?' || c == ':') {
            fprintf(stderr, c == '?' ? "packtrain train: unexpected argument '%s'\n"
                                     : "packtrain train: %s needs a value\n", argv[optind - 1]);
            usage(stderr);
            return 2;
        }
        *(c == 'c' ? &config : c == 'o' ? &out : c == 'r' ? &resume : &every) = optarg;
    }
    /* getopt_long moved the operands to the end: DATA, and nothing after it */
    if (optind < argc) {
        data = argv[optind];
        data_at = optind;
    }
    if (optind + 1 < argc) {
        fprintf(stderr, "packtrain train: unexpected argument '%s'\n", argv[optind + 1]);
        usage(stderr);
        return 2;
    }
    if (!data) {
        fprintf(stderr, "packtrain train: missing DATA (a .ptd, or a file ingest reads)\n");
        usage(stderr);
        return 2;
    }

    long long every_n = -1;
    if (every) {
        char *end;
        errno = 0;
        every_n = strtoll(every, &end, 10);
        if (errno || end == every || *end || every_n < 0 || every_n > 1000000000) {
            fprintf(stderr, "packtrain train: --checkpoint-every must be an integer from 0 to "
                    "1000000000, got '%s'\n", every);
            return 2;
        }
    }

    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_job_config cfg;
    int rc = config ? pt_job_config_load(&cfg, config, &errs) : (pt_job_config_defaults(&cfg), 0);
    if (rc == 0) rc = pt_train_check_cpu(&cfg, &errs);
    if (rc != 0) {
        pt_cli_print_errors("packtrain train", &errs);
        pt_errors_close(&errs);
        return 2;
    }
    if (every_n >= 0) cfg.training.checkpoint_every = (int32_t)every_n;
    pt_dataset ds;
    char ptd[4096];
    if (pt_cli_dataset_open("packtrain train", data, &ds, ptd, sizeof ptd) != 0) {
        pt_errors_close(&errs);
        return 1;
    }
    /* a loss the dataset has no labels for is a configuration error, as the
     * server's 422 says (the plan refuses it again in the run) */
    pt_train_loss loss;
    if (pt_train_loss_resolve(&loss, &cfg, &ds, &errs) != 0) {
        pt_cli_print_errors("packtrain train", &errs);
        pt_dataset_close(&ds);
        pt_errors_close(&errs);
        return 2;
    }
    if (pt_mpi_needs_launch(&cfg)) {
        /* the ranks open the .ptd (ingested once, here), not the input */
        fprintf(stderr, "packtrain train: backend.kind \"mpi\": starting %d ranks (packtrain "
                "mpirun --ranks %d -- train ...)\n", (int)cfg.backend.ranks, (int)cfg.backend.ranks);
        pt_dataset_close(&ds);
        argv[data_at] = ptd;
        pt_cli_mpi_relaunch(cfg.backend.ranks, 0, argc, argv, &errs);
        pt_cli_print_errors("packtrain train", &errs);
        pt_errors_close(&errs);
        return 1;
    }

    /* SA_RESTART: Ctrl-C while a checkpoint is written must not fail the write */
    struct sigaction sa = {.sa_handler = on_sigint, .sa_flags = SA_RESTART};
    interrupted = 0;
    sigemptyset(&sa.sa_mask);
    struct sigaction old;
    sigaction(SIGINT, &sa, &old);
    /* the emulated multi-IPU backend (the default for its kind) computes the
     * gradients, as in the server's workers */
    run_limit limit = {.limit_s = cfg.max_runtime_seconds, .start = wall()};
    pt_train_options opt = {.user = &limit, .on_metrics = print_line,
                            .should_stop = stop_requested, .resume_path = resume};
    pt_train_result res;
    rc = pt_run_train(&cfg, &ds, out, &opt, &res, &errs);
    sigaction(SIGINT, &old, NULL);

    /* the ranks of an MPI job end with the same result: rank 0 alone says it,
     * as it alone prints the metrics lines and writes the files */
    int rank = 0, size = 1;
    pt_mpi_world(&rank, &size);
    if (rc != 0) {
        pt_cli_print_errors("packtrain train", &errs);
    } else {
        if (rank == 0) print_summary(&res, data, config, out);
        if (limit.exceeded && !interrupted) {
            if (rank == 0)
                fprintf(stderr, "packtrain train: exceeded max_runtime_seconds=%g\n", limit.limit_s);
            rc = -1;
        }
    }
    pt_dataset_close(&ds);
    pt_errors_close(&errs);
    return rc == 0 ? 0 : 1;
}
