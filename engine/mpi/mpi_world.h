/* mpi_world.h — the process's MPI state, shared by the files of backend.kind
 * "mpi" (mpi_world.c keeps it; mpi_backend.c's engine and mpi_run.c's rank
 * use it).  Only in a build with -DPT_HAVE_MPI; not part of the engine's API. */
#ifndef PT_MPI_WORLD_H
#define PT_MPI_WORLD_H

#ifdef PT_HAVE_MPI

#include <stdint.h>

#include <mpi.h>

#include "engine/core/errors.h"

typedef struct pt_mpi_proc_state {
    int ready;
    int we_initialised;      /* MPI_Init was ours: finalise at exit */
    int failed;              /* this rank failed: no MPI_Finalize (see mpi_backend.h) */
    MPI_Comm comm;           /* a duplicate of MPI_COMM_WORLD, ours alone */
    int rank, size, local_size;
} pt_mpi_proc_state;

/* The one state of this process; valid once pt_mpi_init returned 0. */
extern pt_mpi_proc_state pt_mpi_proc;

/* Initialises MPI (once; MPI_THREAD_FUNNELED: only the training loop's
 * thread calls MPI) and fills pt_mpi_proc.  Returns 0, or -1 with errs. */
int pt_mpi_init(pt_errors *errs);
/* Adds "<what> failed: <MPI's message for rc>" to errs; returns -1. */
int pt_mpi_error(pt_errors *errs, const char *what, int rc);
/* Cores of one rank: `configured`, or when the job says "auto" (0) this
 * host's cores shared by the ranks on it. */
int pt_mpi_rank_threads(int32_t configured);

#endif /* PT_HAVE_MPI */

#endif
