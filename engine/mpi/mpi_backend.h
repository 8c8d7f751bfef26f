/* mpi_backend.h — data parallelism across processes and machines on Open
 * MPI (backend.kind "mpi"): N ranks, each running the emulated multi-IPU
 * backend (backend.h) on its share of every global batch.
 *
 * Room engine/mpi: data parallelism over Open MPI ranks (this file; the engine
 * in mpi_backend.c, the process's MPI state in mpi_world.c/.h, a rank's run in
 * mpi_run.c), sharing a job out (mpi_internal.h), the mpirun command line
 * (mpi_launch.h).  Uses
 * engine/backend and below; spells no packtrain command (the CLI starts
 * ranks: server/cli/cmd_mpirun.c).
 *
 *   backend.ranks              N processes (the MPI world must have N)
 *   backend.replication_factor R replicas in all, R/N per rank (as PopRun's
 *                              --num-replicas over --num-instances), so the
 *                              global batch R·A·b — and with it the training
 *                              — does not change with N
 *   backend.threads            cores per rank; "auto" = this host's cores
 *                              shared evenly by the ranks on it
 *
 * One optimizer step (pt_grad_engine.compute, on every rank, same packs):
 *   1. rank r takes packs [r·per, (r+1)·per) of the global batch, per =
 *      (R/N)·A·b — exactly the packs replicas r·R/N .. (r+1)·R/N−1 of one
 *      R-replica process would take;
 *   2. its replicas compute them, each loss normalised by n, the real graph
 *      count of the WHOLE global batch, and reduce locally (merged buffer);
 *   3. MPI_Allreduce(MPI_SUM) of that one float buffer across ranks, and of
 *      the step's statistics (loss sum, graphs, nodes, slots, a failure flag);
 *   4. every rank then applies the same optimizer update to the same
 *      gradient, so parameters stay identical without ever being sent.
 * Hence Σ_ranks Σ_replicas g = ∇ (1/n) Σ_g (y_g − t_g)², the update of one
 * process with the same global batch.  With N = 2 the sum of two buffers is
 * the same bits whatever the order; with R/N and A powers of two each rank's
 * local sum is a subtree of the one-process pairwise tree, so N = 2 × R/N
 * replicas matches one process with R replicas bit for bit (same BLAS
 * threads); for N > 2 Open MPI's summation order may differ by rounding.
 *
 * Failures are agreed: a rank whose step fails still joins the statistics
 * all-reduce with its failure flag set, and then every rank returns -1 from
 * the same step, so no rank is left waiting in a collective.  Every
 * PACKTRAIN_MPI_CHECK_EVERY steps (default 100, 0 = never) the ranks compare
 * a hash of their parameters; a mismatch fails the step ("parameters
 * diverged"), as does a global batch the ranks do not agree on. */
#ifndef PT_MPI_BACKEND_H
#define PT_MPI_BACKEND_H

#include "engine/train/config.h"
#include "engine/core/errors.h"
#include "engine/core/phase.h"
#include "engine/train/train.h"

/* 1 when packtrain was built with Open MPI, else 0. */
int pt_mpi_available(void);

/* Submission check: 0 for a job that is not kind "mpi" or can run here;
 * -1 with an error on "backend.kind" otherwise (PT_MPI_MISSING_MSG in a
 * build without Open MPI, or no mpirun to launch with), or on
 * "backend.ranks" for more ranks than the operator's slots
 * (pt_mpi_slots: PACKTRAIN_MPI_MAX_RANKS, the hosts' slots, else this
 * machine's cores). */
int pt_mpi_check_job(const pt_job_config *cfg, pt_errors *errs);

/* pt_grad_engine_open_fn of kind "mpi" (see above), on the layout of
 * data (N = layout.ranks processes, R = layout.replicas in all).
 * Initialises MPI when nobody has (a lone process is then a world of 1).
 * Collective: every rank opens at the same point.  Its engine reports the
 * local replicas' phases (backend.h) with the cross-rank all-reduce added to
 * "allreduce".  Returns 0, or -1 with errs filled (no Open MPI, world size
 * != N, the inner backend's own checks, ranks that disagree on the dataset
 * or the initial parameters). */
int pt_mpi_backend_open(pt_grad_engine *eng, const pt_train_data *data, pt_errors *errs);

#define PT_MPI_KIND "mpi"

/* pt_train_run of a job of kind "mpi", as one rank of it:
 *   - MPI is initialised (finalised at exit, unless this rank failed: a rank
 *     that failed alone exits without MPI_Finalize so that mpirun ends the
 *     whole job instead of the others waiting for it);
 *   - only rank 0 writes: the other ranks get no out_dir (no model, metrics,
 *     result or checkpoints), no on_metrics calls, and their stdout goes to
 *     /dev/null, so the worker protocol has one speaker;
 *   - should_stop is agreed after every step (any rank asking stops all at
 *     the same step), and SIGUSR1 asks too: it is what `packtrain mpirun`
 *     sends on SIGTERM, as mpirun forwards SIGUSR1 but kills on SIGTERM;
 *   - a rank started by a launcher dies with its parent (PR_SET_PDEATHSIG),
 *     so a SIGKILLed mpirun leaves no rank behind;
 *   - opt->engine_open is replaced by pt_mpi_backend_open.
 * One MPI run per process at a time.  In a build without Open MPI: -1 with
 * PT_MPI_MISSING_MSG. */
int pt_mpi_train_run(const pt_job_config *cfg, const pt_dataset *ds, const char *out_dir,
                     const pt_train_options *opt, pt_train_result *res, pt_errors *errs);

/* 1 when cfg runs as more than one process (kind "mpi", ranks > 1) and this
 * process was not started as one of them (pt_mpi_launched): the caller then
 * starts the ranks (`packtrain train` and `worker` run themselves again
 * under `packtrain mpirun`).  0 in a build without Open MPI, whose run
 * reports why it cannot run. */
int pt_mpi_needs_launch(const pt_job_config *cfg);

/* This process's rank and the world size once MPI runs here (0 and 1
 * otherwise).  Returns 1 when MPI is initialised, else 0. */
int pt_mpi_world(int *rank, int *size);

#endif
