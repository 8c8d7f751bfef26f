/* run.c — one job with the engine its configuration names (run.h). */
#include "engine/run/run.h"

#include <string.h>

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

#define MIB (1024.0 * 1024.0)

static void estimate(pt_run_memory *m, const pt_job_config *cfg, const pt_train_plan *plan,
                     const pt_memplan *mp, const pt_dataset *ds)
{
    uint64_t edges = 0;
    for (uint32_t s = 0; s < ds->n_structs; s++) edges += plan->nedges[s];
    int periodic = 0;
    for (uint32_t s = 0; s < ds->n_structs && !periodic && ds->pbc; s++) periodic = ds->pbc[s] != 0;
    /* pt_graphs: src, dst, dist per edge (and an int16 shift triple when
     * some structure is periodic), an offset per structure */
    uint64_t per_edge = 3 * sizeof(uint32_t) + (periodic ? 3 * sizeof(int16_t) : 0);
    *m = (pt_run_memory){.processes = cfg->backend.kind == PT_JOB_BACKEND_MPI ? cfg->backend.ranks : 1};
    uint64_t P = (uint64_t)m->processes;
    m->replicas = (uint64_t)plan->layout.replicas * mp->total;
    m->trainer = P * 5 * (uint64_t)mp->n_params * sizeof(float);
    m->dataset = P * (uint64_t)ds->map_size;
    m->graphs = P * (edges * per_edge + ((uint64_t)ds->n_structs + 1) * sizeof(uint64_t));
    m->runtime = P * PT_RUN_RUNTIME_BYTES;
    m->total = m->replicas + m->trainer + m->dataset + m->graphs + m->runtime;
}

static void check_budget(const pt_run_memory *m, const pt_train_plan *plan, const pt_run_budget *b,
                         pt_errors *errs)
{
    if (!b || !b->worker_bytes || m->total <= b->worker_bytes) return;
    pt_errors_add(errs, "", 0, "backend",
                  "the job needs about %.0f MiB in %d process%s on this server, more than the %.0f MiB "
                  "it gives a job (its operator's worker memory budget): %d replica%s %.0f MiB, "
                  "training state %.0f MiB, dataset %.0f MiB, neighbour graphs %.0f MiB, runtime %.0f MiB; "
                  "lower backend.replication_factor, batching.model_batch_size or max_nodes/max_edges, "
                  "model.hidden/filters, or model.cutoff/max_neighbors",
                  m->total / MIB, (int)m->processes, m->processes == 1 ? "" : "es", b->worker_bytes / MIB,
                  (int)plan->layout.replicas, plan->layout.replicas == 1 ? "" : "s", m->replicas / MIB,
                  m->trainer / MIB, m->dataset / MIB, m->graphs / MIB, m->runtime / MIB);
}

/* A refusal of a job whose neighbour lists are not capped says so: its edge
 * slots are the dataset's own edges at the cutoff (on dense cells several
 * times PyG's 32 per atom), and capping them is a choice with a cost. */
static void neighbours_note(const pt_job_config *cfg, const pt_train_plan *plan,
                            const pt_pack_limits *limits, pt_errors *errs)
{
    if (plan->max_neighbors != PT_GRAPH_UNLIMITED) return;
    uint32_t densest = 0;
    double degree = 0.0;
    for (uint32_t s = 0; s < plan->n_structs; s++)
        if (plan->natoms[s] && (double)plan->nedges[s] / plan->natoms[s] > degree) {
            degree = (double)plan->nedges[s] / plan->natoms[s];
            densest = s;
        }
    pt_errors_add(errs, "", 0, "model.max_neighbors",
                  "%s keeps every neighbour within %g Å: %.1f per atom in the densest "
                  "structure (%u, %u edges; packs of %d edge slots); lower model.cutoff or cap "
                  "model.max_neighbors (forces then stop being exactly -dE/dr)",
                  cfg->model.max_neighbors == PT_JOB_NEIGHBORS_AUTO ? "\"auto\" (a forces job)"
                                                                      : "\"all\"",
                  cfg->model.cutoff, degree, densest,
                  plan->n_structs ? plan->nedges[densest] : 0, limits->max_edges);
}

int pt_run_check(const pt_job_config *cfg, const pt_dataset *ds, const pt_run_budget *budget,
                 pt_run_memory *mem, pt_errors *errs)
{
    size_t before = errs->total;
    if (mem) memset(mem, 0, sizeof(*mem));
    /* independent of the dataset: reported along with whatever else is wrong */
    pt_train_check_cpu(cfg, errs);
    if (pt_mpi_check_job(cfg, errs) != 0) return -1;
    pt_train_plan plan;
    if (pt_train_plan_init(&plan, cfg, ds, PT_PLAN_COUNT_EDGES, pt_online_cores(), errs) == 0) {
        pt_memplan mp;
        if (pt_memplan_for_job(&mp, cfg, &plan.layout, plan.train_pk.limits, plan.loss.forces,
                               errs) == 0) {
            size_t refused = errs->total;
            pt_memplan_check(&mp, errs);
            pt_run_memory m;
            estimate(&m, cfg, &plan, &mp, ds);
            check_budget(&m, &plan, budget, errs);
            if (errs->total != refused) neighbours_note(cfg, &plan, &plan.train_pk.limits, errs);
            if (mem) *mem = m;
        }
        pt_train_plan_close(&plan);
    }
    return errs->total == before ? 0 : -1;
}
