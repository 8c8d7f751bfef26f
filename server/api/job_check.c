/* job_check.c — whether a valid job configuration can train on a stored
 * dataset, decided at submission so a job that would fail in its first
 * second is refused with a 422 instead of being queued: the dataset is
 * opened and the engine's own check runs on it (engine/run: pt_run_check —
 * the CPU, Open MPI for kind "mpi", the plan the worker will run: target,
 * split, packing, layout, the memory plan of one replica, and the memory
 * of the job's processes against the operator's budget). */
#include "server/api/routes.h"

#include <string.h>

#include "engine/run/run.h"

void pt_job_check_dataset(pt_app *app, const pt_job_config *cfg, const pt_store_dataset *ds, pt_errors *errs)
{
    pt_dataset data;
    memset(&data, 0, sizeof data);
    char err[512];
    if (pt_dataset_open(&data, ds->path, err, sizeof err) != 0) {
        pt_text_hide_paths(err);
        pt_errors_add(errs, NULL, 0, "dataset", "cannot open dataset %s: %s", ds->id, err);
        return;
    }
    /* the operator's budget, never the client's device_memory_mb */
    pt_run_budget budget = {.worker_bytes = app->worker_memory_bytes};
    pt_run_check(cfg, &data, &budget, NULL, errs);
    pt_dataset_close(&data);
}
