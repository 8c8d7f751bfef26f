/* run.c — one job with the engine its configuration names (run.h). */
#include "engine/run/run.h"

#include "engine/backend/backend.h"
#include "engine/mpi/mpi_backend.h"

int pt_run_train(const pt_job_config *cfg, const pt_dataset *ds, const char *out_dir,
                 const pt_train_options *opt, pt_train_result *res, pt_errors *errs)
{
    if (cfg->backend.kind == PT_JOB_BACKEND_MPI)
        return pt_mpi_train_run(cfg, ds, out_dir, opt, res, errs);
    pt_train_options o = {0};
    if (opt) o = *opt;
    if (!o.engine_open) o.engine_open = pt_backend_open;
    return pt_train_run(cfg, ds, out_dir, &o, res, errs);
}
