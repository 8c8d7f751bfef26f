/* mpi_run.c — one rank of a training run of kind "mpi" (pt_mpi_train_run in
 * mpi_backend.h): the rank's process set-up (SIGUSR1 as a stop request, dying
 * with its launcher, rank 0 alone on stdout), a stop any rank asks for agreed
 * by all, metrics and files from rank 0 only, and the training loop with the
 * MPI engine (mpi_backend.c).  Without -DPT_HAVE_MPI it says there is no MPI. */
#include "engine/mpi/mpi_backend.h"

#include <math.h>
#include <string.h>

#include "engine/mpi/mpi_launch.h"

static void result_clear(pt_train_result *res)
{
    memset(res, 0, sizeof(*res));
    res->best_val_loss = res->best_val_mae = res->best_val_rmse = INFINITY;
    res->test_mae = res->test_rmse = res->first_loss = res->last_loss = NAN;
    res->stop_reason = "epochs";
}

#ifndef PT_HAVE_MPI

int pt_mpi_train_run(const pt_job_config *cfg, const pt_dataset *ds, const char *out_dir,
                     const pt_train_options *opt, pt_train_result *res, pt_errors *errs)
{
    (void)cfg;
    (void)ds;
    (void)out_dir;
    (void)opt;
    result_clear(res);
    pt_errors_add(errs, "", 0, "backend.kind", "%s", PT_MPI_MISSING_MSG);
    return -1;
}

#else /* PT_HAVE_MPI */

#include <cblas.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "engine/model/bf16.h"
#include "engine/mpi/mpi_world.h"

static struct {
    const pt_train_options *opt;   /* the caller's, NULL = none */
} g_run;

static volatile sig_atomic_t g_usr1;

static void on_usr1(int sig)
{
    (void)sig;
    g_usr1 = 1;
}

static int run_should_stop(void *user)
{
    const pt_train_options *o = g_run.opt;
    int mine = g_usr1 || (o && o->should_stop && o->should_stop(user)), any = mine;
    if (MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, pt_mpi_proc.comm) != MPI_SUCCESS) return 1;
    return any;
}

static void run_metrics(void *user, const pt_train_metrics *m, const char *json)
{
    const pt_train_options *o = g_run.opt;
    if (pt_mpi_proc.rank == 0 && o && o->on_metrics) o->on_metrics(user, m, json);
}

/* Process-wide set-up of a rank: see pt_mpi_train_run in the header. */
static void rank_setup(void)
{
    struct sigaction sa = {.sa_handler = on_usr1};
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, NULL);
    if (pt_mpi_launched() || pt_mpi_proc.size > 1) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() == 1) _exit(1);   /* the launcher died before the line above */
    }
    if (pt_mpi_proc.rank > 0) {
        fflush(stdout);
        int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (fd >= 0) {
            dup2(fd, STDOUT_FILENO);
            close(fd);
        }
    }
}

int pt_mpi_train_run(const pt_job_config *cfg, const pt_dataset *ds, const char *out_dir,
                     const pt_train_options *opt, pt_train_result *res, pt_errors *errs)
{
    result_clear(res);
    if (pt_mpi_init(errs)) {
        pt_mpi_proc.failed = 1;
        return -1;
    }
    rank_setup();
    g_run.opt = opt;
    pt_train_options o = {0};
    if (opt) o = *opt;
    o.on_metrics = run_metrics;
    o.should_stop = run_should_stop;
    o.engine_open = pt_mpi_backend_open;
    /* evaluation runs on this thread: its BLAS (and bf16) share of the host's cores */
    if (cfg->backend.threads == 0) {
        openblas_set_num_threads(pt_mpi_rank_threads(0));
        pt_bf16_set_threads(pt_mpi_rank_threads(0));
    }
    pt_train_layout l;
    pt_train_layout_resolve(&l, cfg, pt_online_cores(), 0, 0, errs);   /* for R only: forces change A, b */
    int per = l.replicas / (pt_mpi_proc.size > 0 ? pt_mpi_proc.size : 1), t = pt_mpi_rank_threads(cfg->backend.threads);
    if (pt_mpi_proc.rank == 0)
        fprintf(stderr, "packtrain: mpi: %d ranks (%d on this host), %d replica%s and %d BLAS "
                "thread%s per rank\n", pt_mpi_proc.size, pt_mpi_proc.local_size, per, per == 1 ? "" : "s", t,
                t == 1 ? "" : "s");
    int rc = pt_train_run(cfg, ds, pt_mpi_proc.rank == 0 ? out_dir : NULL, &o, res, errs);
    g_run.opt = NULL;
    if (rc != 0) pt_mpi_proc.failed = 1;
    return rc;
}

#endif /* PT_HAVE_MPI */
