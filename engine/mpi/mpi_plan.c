/* mpi_plan.c — sharing a job out between MPI ranks (mpi_internal.h): the
 * replicas per rank, each rank's slice of a global batch, the rank's view of
 * an epoch's packs, and the parameter hash of the consistency check.
 *
 * The global batch of G = R·A·b packs is laid out as in the emulated
 * backend: replica k takes packs [k·A·b, (k+1)·A·b).  Rank r runs replicas
 * [r·R/N, (r+1)·R/N), so its slice is the contiguous [r·per, (r+1)·per) with
 * per = (R/N)·A·b — the same packs, in the same order, as one process with R
 * replicas.  Every rank computes the same epoch packs (a pure function of
 * the seed and the epoch), so no pack list ever crosses the network. */
#include "engine/mpi/mpi_internal.h"

#include <stdlib.h>
#include <string.h>

int pt_mpi_plan_replicas(int32_t ranks, int32_t replicas, int world, int32_t *local,
                         pt_errors *errs)
{
    /* the layout comes from a validated configuration (config.c holds the
     * rule that R is a multiple of N): a layout that breaks it is a caller's
     * bug, reported in the engine's terms */
    if (ranks < 1 || replicas < 1 || replicas % ranks != 0) {
        pt_errors_add(errs, "", 0, "backend", "a layout of %d replicas cannot be shared evenly "
                      "by %d ranks", (int)replicas, (int)ranks);
        return -1;
    }
    /* this is about the process, not the configuration: how it was started */
    if (world != ranks) {
        pt_errors_add(errs, "", 0, "backend.ranks",
                      "is %d but this process runs in an MPI world of %d process%s; start it "
                      "with `mpirun -np %d` (`packtrain train` and the server do)",
                      (int)ranks, world, world == 1 ? "" : "es", (int)ranks);
        return -1;
    }
    *local = replicas / ranks;
    return 0;
}

void pt_mpi_slice(uint32_t n, uint32_t per, int rank, uint32_t *first, uint32_t *count)
{
    uint64_t lo = (uint64_t)(rank > 0 ? rank : 0) * per;
    if (lo >= n) {
        *first = n;
        *count = 0;
        return;
    }
    *first = (uint32_t)lo;
    *count = n - lo < per ? (uint32_t)(n - lo) : per;
}

int pt_mpi_view_init(pt_mpi_view *v, uint32_t cap_packs, uint32_t cap_graphs, pt_errors *errs)
{
    memset(v, 0, sizeof(*v));
    v->packs.graph_offset = calloc((size_t)cap_packs + 1, sizeof(uint32_t));
    v->packs.graphs = malloc(((size_t)cap_graphs + 1) * sizeof(uint32_t));
    if (!v->packs.graph_offset || !v->packs.graphs) {
        pt_mpi_view_close(v);
        pt_errors_add(errs, "", 0, "backend", "out of memory for a view of %u packs", cap_packs);
        return -1;
    }
    v->cap_packs = cap_packs;
    v->cap_graphs = cap_graphs;
    return 0;
}

void pt_mpi_view_close(pt_mpi_view *v)
{
    free(v->packs.graph_offset);
    free(v->packs.graphs);
    memset(v, 0, sizeof(*v));
}

int pt_mpi_view_build(pt_mpi_view *v, const pt_packs *src, uint32_t G, uint32_t per, int rank)
{
    v->valid = 0;
    if (G == 0 || per == 0 || per > G) return -1;
    uint32_t np = 0, ng = 0;
    v->packs.graph_offset[0] = 0;
    for (uint64_t s0 = 0; s0 < src->n_packs; s0 += G) {
        uint32_t in_step = src->n_packs - s0 < G ? (uint32_t)(src->n_packs - s0) : G;
        uint32_t first, count;
        pt_mpi_slice(in_step, per, rank, &first, &count);
        for (uint32_t i = 0; i < count; i++) {
            uint32_t id = (uint32_t)s0 + first + i;
            uint32_t lo = src->graph_offset[id], cnt = src->graph_offset[id + 1] - lo;
            if (np >= v->cap_packs || cnt > v->cap_graphs - ng) return -1;
            memcpy(v->packs.graphs + ng, src->graphs + lo, cnt * sizeof(uint32_t));
            ng += cnt;
            v->packs.graph_offset[++np] = ng;
        }
    }
    v->packs.limits = src->limits;
    v->packs.n_packs = np;
    v->valid = 1;
    return 0;
}

int pt_mpi_view_matches(const pt_mpi_view *v, uint32_t vfirst, const pt_packs *src,
                        uint32_t sfirst, uint32_t n)
{
    if (!v->valid || (uint64_t)vfirst + n > v->packs.n_packs ||
        (uint64_t)sfirst + n > src->n_packs)
        return 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t vlo = v->packs.graph_offset[vfirst + i];
        uint32_t vcnt = v->packs.graph_offset[vfirst + i + 1] - vlo;
        uint32_t slo = src->graph_offset[sfirst + i];
        uint32_t scnt = src->graph_offset[sfirst + i + 1] - slo;
        if (vcnt != scnt || memcmp(v->packs.graphs + vlo, src->graphs + slo,
                                   vcnt * sizeof(uint32_t)))
            return 0;
    }
    return 1;
}

uint64_t pt_mpi_hash_floats(const float *x, size_t n)
{
    uint64_t h = 14695981039346656037ULL;
    for (size_t i = 0; i < n; i++) {
        uint32_t w;
        memcpy(&w, &x[i], sizeof w);
        h = (h ^ w) * 1099511628211ULL;
    }
    return h;
}
