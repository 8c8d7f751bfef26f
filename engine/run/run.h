/* run.h — engine/run, the top of the engine: one job, start to end, with the
 * gradient engine its configuration names.  The training loop
 * (engine/train) knows engines only through pt_grad_engine; the emulated
 * IPU backend (engine/backend) and the MPI backend (engine/mpi) sit above
 * it, and this room, above both, is the one place that chooses between
 * them.  The CLI and the server's workers run jobs through here; nothing in
 * the engine includes this header.
 *
 *   backend.kind "ipu-emulated"  pt_train_run with pt_backend_open
 *   backend.kind "mpi"           pt_mpi_train_run: this process is one rank */
#ifndef PT_RUN_H
#define PT_RUN_H

#include "engine/core/errors.h"
#include "engine/data/dataset.h"
#include "engine/train/config.h"
#include "engine/train/train.h"

/* pt_train_run (train.h) with the backend of cfg->backend.kind unless
 * opt->engine_open names another engine (kind "ipu-emulated" only: an MPI
 * rank always runs the MPI backend).  Returns as pt_train_run. */
int pt_run_train(const pt_job_config *cfg, const pt_dataset *ds, const char *out_dir,
                 const pt_train_options *opt, pt_train_result *res, pt_errors *errs);

/* Whether a valid configuration can train on ds here, decided before a job
 * is queued (server/api/job_check.c): the CPU (training.precision "bf16"),
 * Open MPI and an mpirun for kind "mpi", the plan (engine/train/plan.h:
 * target, split, packing, layout; edges only counted) and the memory plan
 * of one replica for the planned limits and layout
 * (engine/backend/memplan.h).  The worker runs the same plan and memory
 * plan, so what passes here trains there.  Returns 0, or -1 with every
 * problem found added to errs (located: "target", "batching.max_nodes",
 * "backend.device_memory_mb", ...). */
int pt_run_check(const pt_job_config *cfg, const pt_dataset *ds, pt_errors *errs);

#endif
