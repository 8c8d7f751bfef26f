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

#include <stdint.h>

#include "engine/core/errors.h"
#include "engine/data/dataset.h"
#include "engine/train/config.h"
#include "engine/train/train.h"

/* pt_train_run (train.h) with the backend of cfg->backend.kind unless
 * opt->engine_open names another engine (kind "ipu-emulated" only: an MPI
 * rank always runs the MPI backend).  Returns as pt_train_run. */
int pt_run_train(const pt_job_config *cfg, const pt_dataset *ds, const char *out_dir,
                 const pt_train_options *opt, pt_train_result *res, pt_errors *errs);

/* What the machine's operator lets one job have; zeros mean no limit. */
typedef struct pt_run_budget {
    uint64_t worker_bytes;   /* memory of the job's processes on this host */
} pt_run_budget;

/* The memory a job's processes on this host will hold (resident bytes),
 * from its plan: every replica's device plan (memplan.h: parameters,
 * gradients, optimizer state, activations, I/O buffers), and per process
 * (one, or `ranks` for kind "mpi", all counted on this host) the trainer's
 * own copies (parameters, best, gradient, Adam's moments), the mapped
 * dataset, the neighbour graphs of every structure, and a runtime
 * allowance (code, libraries, thread stacks). */
typedef struct pt_run_memory {
    int32_t processes;
    uint64_t replicas, trainer, dataset, graphs, runtime, total;
} pt_run_memory;

#define PT_RUN_RUNTIME_BYTES (64ull << 20)   /* per process */

/* Whether a valid configuration can train on ds here, decided before a job
 * is queued (server/api/job_check.c): the CPU (training.precision "bf16"),
 * Open MPI, an mpirun and the operator's slots for kind "mpi"
 * (pt_mpi_check_job), the plan (engine/train/plan.h: target, split,
 * packing, layout; edges only counted), the memory plan of one replica for
 * the planned limits and layout (engine/backend/memplan.h) against the
 * job's own backend.device_memory_mb (the emulated IPU's memory), and the
 * memory of the job's processes against the operator's budget (a client's
 * device_memory_mb never raises what the host gives it).  The worker runs
 * the same plan and memory plan, so what passes here trains there.
 * budget NULL: no operator limit.  mem (may be NULL) gets the estimate when
 * the plan could be made.  Returns 0, or -1 with every problem found added
 * to errs (located: "target", "batching.max_nodes",
 * "backend.device_memory_mb", "backend", ...). */
int pt_run_check(const pt_job_config *cfg, const pt_dataset *ds, const pt_run_budget *budget,
                 pt_run_memory *mem, pt_errors *errs);

#endif
