/* run.c — one job with the engine its configuration names (run.h). */
#include "engine/run/run.h"

#include "engine/backend/backend.h"
#include "engine/backend/memplan.h"
#include "engine/mpi/mpi_backend.h"
#include "engine/train/plan.h"

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

int pt_run_check(const pt_job_config *cfg, const pt_dataset *ds, pt_errors *errs)
{
    size_t before = errs->total;
    /* independent of the dataset: reported along with whatever else is wrong */
    pt_train_check_cpu(cfg, errs);
    if (pt_mpi_check_job(cfg, errs) != 0) return -1;
    pt_train_plan plan;
    if (pt_train_plan_init(&plan, cfg, ds, PT_PLAN_COUNT_EDGES, pt_online_cores(), errs) == 0) {
        pt_memplan mp;
        if (pt_memplan_for_job(&mp, cfg, &plan.layout, plan.train_pk.limits, errs) == 0)
            pt_memplan_check(&mp, errs);
        pt_train_plan_close(&plan);
    }
    return errs->total == before ? 0 : -1;
}
