/* mpi_world.c — the process's MPI state (mpi_world.h): MPI initialised once,
 * our own duplicate of the world communicator, this rank's place in it and
 * its share of the host's cores; and the checks a job of kind "mpi" meets
 * before it starts (slots, a launcher).  Without -DPT_HAVE_MPI the same
 * functions say there is no MPI (PT_MPI_MISSING_MSG). */
#include "engine/mpi/mpi_backend.h"

#include <string.h>

#include "engine/mpi/mpi_launch.h"

#ifndef PT_HAVE_MPI

int pt_mpi_available(void)
{
    return 0;
}

int pt_mpi_check_job(const pt_job_config *cfg, pt_errors *errs)
{
    if (cfg->backend.kind != PT_JOB_BACKEND_MPI) return 0;
    pt_errors_add(errs, "", 0, "backend.kind", "%s", PT_MPI_MISSING_MSG);
    return -1;
}

int pt_mpi_needs_launch(const pt_job_config *cfg)
{
    (void)cfg;
    return 0;
}

int pt_mpi_world(int *rank, int *size)
{
    *rank = 0;
    *size = 1;
    return 0;
}

#else /* PT_HAVE_MPI */

#include <stdio.h>
#include <stdlib.h>

#include "engine/mpi/mpi_world.h"

pt_mpi_proc_state pt_mpi_proc;

static void mpi_at_exit(void)
{
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (pt_mpi_proc.we_initialised && !pt_mpi_proc.failed && !finalized) MPI_Finalize();
}

int pt_mpi_error(pt_errors *errs, const char *what, int rc)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "code %d", rc);
    pt_errors_add(errs, "", 0, "backend", "%s failed: %s", what, msg);
    return -1;
}

int pt_mpi_init(pt_errors *errs)
{
    if (pt_mpi_proc.ready) return 0;
    int inited = 0, rc;
    MPI_Initialized(&inited);
    if (!inited) {
        int provided = 0;
        rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
        if (rc != MPI_SUCCESS) return pt_mpi_error(errs, "MPI_Init_thread", rc);
        pt_mpi_proc.we_initialised = 1;
        atexit(mpi_at_exit);
        /* only the thread running the training loop calls MPI */
        if (provided < MPI_THREAD_FUNNELED) {
            pt_errors_add(errs, "", 0, "backend", "this Open MPI gives thread level %d, below "
                          "MPI_THREAD_FUNNELED", provided);
            return -1;
        }
    }
    if ((rc = MPI_Comm_dup(MPI_COMM_WORLD, &pt_mpi_proc.comm)) != MPI_SUCCESS)
        return pt_mpi_error(errs, "MPI_Comm_dup", rc);
    MPI_Comm_rank(pt_mpi_proc.comm, &pt_mpi_proc.rank);
    MPI_Comm_size(pt_mpi_proc.comm, &pt_mpi_proc.size);
    MPI_Comm node;
    if ((rc = MPI_Comm_split_type(pt_mpi_proc.comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node)) !=
        MPI_SUCCESS)
        return pt_mpi_error(errs, "MPI_Comm_split_type", rc);
    MPI_Comm_size(node, &pt_mpi_proc.local_size);
    MPI_Comm_free(&node);
    pt_mpi_proc.ready = 1;
    return 0;
}

int pt_mpi_available(void)
{
    return 1;
}

int pt_mpi_needs_launch(const pt_job_config *cfg)
{
    return cfg->backend.kind == PT_JOB_BACKEND_MPI && cfg->backend.ranks > 1 &&
           !pt_mpi_launched();
}

int pt_mpi_world(int *rank, int *size)
{
    *rank = pt_mpi_proc.ready ? pt_mpi_proc.rank : 0;
    *size = pt_mpi_proc.ready ? pt_mpi_proc.size : 1;
    return pt_mpi_proc.ready;
}

int pt_mpi_check_job(const pt_job_config *cfg, pt_errors *errs)
{
    if (cfg->backend.kind != PT_JOB_BACKEND_MPI) return 0;
    pt_mpi_launch_opts o;
    char path[4096], source[64];
    if (pt_mpi_launch_opts_from_env(&o, path, sizeof path, errs) != 0) return -1;
    int32_t slots = pt_mpi_slots(&o, getenv("PACKTRAIN_MPI_MAX_RANKS"), pt_online_cores(), source,
                                 sizeof source, errs);
    if (slots < 0) return -1;
    if (cfg->backend.ranks > slots) {
        pt_errors_add(errs, "", 0, "backend.ranks",
                      "%d ranks asked, but this server runs at most %d (%s); use fewer ranks",
                      (int)cfg->backend.ranks, (int)slots, source);
        return -1;
    }
    return 0;
}

int pt_mpi_rank_threads(int32_t configured)
{
    if (configured > 0) return configured;
    int t = pt_online_cores() / (pt_mpi_proc.local_size > 0 ? pt_mpi_proc.local_size : 1);
    return t > 0 ? t : 1;
}

#endif /* PT_HAVE_MPI */
