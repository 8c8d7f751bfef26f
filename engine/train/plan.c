/* plan.c — the layout of a job on this machine (plan.h). */
#include "engine/train/plan.h"

#include <unistd.h>

int pt_online_cores(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int64_t pt_train_layout_global_packs(const pt_train_layout *l)
{
    return (int64_t)l->replicas * l->accumulation * l->micro_packs;
}

int pt_train_layout_resolve(pt_train_layout *l, const pt_job_config *cfg, int cores,
                            pt_errors *errs)
{
    (void)errs;
    const pt_job_backend *k = &cfg->backend;
    *l = (pt_train_layout){.ranks = k->ranks,
                           .replicas = k->replication_factor,
                           .accumulation = k->gradient_accumulation,
                           .micro_packs = cfg->batching.model_batch_size,
                           .threads = k->threads > 0 ? k->threads : (cores > 0 ? cores : 1)};
    return 0;
}
