/* graph.h — neighbour graphs of a whole dataset (types; built by graphs.c
 * with the searches of neighbors.c (molecules) and neighbors_pbc.c (periodic
 * structures)).
 *
 * Room engine/graph: neighbour graphs of a dataset.  Uses engine/core and
 * engine/data only.
 *
 * For every structure, the directed edges i <- j (j sends, i receives) with
 * d_ij < cutoff, at most max_neighbors per receiver (nearest kept, ties broken
 * by sender index, then image shift), or all of them with PT_GRAPH_UNLIMITED.
 * In a periodic structure an edge joins i to one periodic image of j, given
 * by its shift S; the same pair may appear with several shifts, and i may
 * neighbour its own images.  Indices are local to the structure (0-based atom
 * index within it).  Within a structure edges are sorted by receiver, then
 * sender (then shift), which is the CSR order the model's segmented sums rely
 * on. */
#ifndef PT_GRAPH_H
#define PT_GRAPH_H

#include <stdint.h>

#include "engine/data/dataset.h"
#include "engine/core/errors.h"
#include "engine/core/progress.h"

typedef enum pt_graph_mode {
    PT_GRAPH_RADIUS = 0,   /* all j within cutoff, capped at max_neighbors nearest */
    PT_GRAPH_KNN = 1       /* exactly the k = max_neighbors nearest within cutoff */
} pt_graph_mode;

#define PT_GRAPH_UNLIMITED 0   /* max_neighbors: keep every neighbour within the cutoff */

typedef struct pt_graph_params {
    float cutoff;          /* Å */
    int32_t max_neighbors; /* per receiver, or PT_GRAPH_UNLIMITED (radius mode only) */
    pt_graph_mode mode;
} pt_graph_params;

typedef struct pt_graphs {
    pt_graph_params params;
    uint32_t n_structs;
    uint64_t n_edges;
    uint64_t *edge_offset;   /* [n_structs + 1] edges of s are [edge_offset[s], edge_offset[s+1]) */
    uint32_t *src;           /* [n_edges] local sender index j */
    uint32_t *dst;           /* [n_edges] local receiver index i */
    float *dist;             /* [n_edges] d_ij in Å */
    int16_t *shift;          /* [3 n_edges] image shift S of the sender (pt_edge_vector),
                              * or NULL when no structure of the dataset is periodic */
} pt_graphs;

/* The vector of edge i <- j with image shift S (integer multiples of the
 * lattice vectors a, b, c, the rows of cell):
 *     v = r_j + S[0] a + S[1] b + S[2] c - r_i      (Å)
 * computed in double from the float positions, so that the reverse edge
 * j <- i with shift -S gets exactly -v (every step is exact under negation)
 * and both get the same distance.  The neighbour search of a periodic
 * structure uses this expression for d² = v·v (in that order, no fused
 * multiply-add) and stores dist = (float)sqrt(d²); molecules use the float
 * expression of neighbors.h instead, bit-compatible with PyG. */
static inline void pt_edge_vector(const float *r_j, const float *r_i, const double *cell,
                                  const int16_t *S, double v[3])
{
    for (int c = 0; c < 3; c++)
        v[c] = ((double)r_j[c] - (double)r_i[c]) +
               ((double)S[0] * cell[c] + (double)S[1] * cell[3 + c] + (double)S[2] * cell[6 + c]);
}

static inline uint32_t pt_graphs_nedges(const pt_graphs *g, uint32_t s)
{
    return (uint32_t)(g->edge_offset[s + 1] - g->edge_offset[s]);
}

/* --- construction (neighbors.c) ------------------------------------------ */

/* Adds one error per invalid parameter (cutoff finite and > 0, max_neighbors
 * >= 1 or PT_GRAPH_UNLIMITED in radius mode, known mode); returns 0 when all
 * are valid. */
int pt_graph_params_check(const pt_graph_params *p, pt_errors *errs);

/* Builds the neighbour graphs of every structure of ds (definition and
 * distance convention in neighbors.h).  Returns 0, or -1 with errors added
 * (invalid parameters, out of memory, a periodic structure beyond the
 * search's limits).  g is zeroed on failure; g->shift is allocated when some
 * structure is periodic (zero for the molecules). */
int pt_graphs_build(pt_graphs *g, const pt_dataset *ds, const pt_graph_params *p,
                    pt_errors *errs);
void pt_graphs_close(pt_graphs *g);

/* Writes g to path in graph_file.c's layout (for inspection and checks
 * outside packtrain).  0 ok, -1 with "path: reason" in err (no file left). */
int pt_graphs_write(const pt_graphs *g, const char *path, char *err, size_t errlen);

/* Only the edge count of every structure (nedges: [ds->n_structs]), without
 * storing edges: what packing needs, at a fraction of the memory and time
 * (molecules: pt_neighbor_list_count, each pair visited once; periodic
 * structures: their search).  On the calling thread. */
int pt_graphs_count(uint32_t *nedges, const pt_dataset *ds, const pt_graph_params *p,
                    pt_errors *errs);

typedef struct pt_graphs_count_opts {
    int threads;                  /* 0 or 1: the calling thread; n: it and n - 1 more */
    const pt_progress *progress;  /* phase "count_edges" in structures; NULL = none */
    /* Asked by the calling thread between blocks of structures (may be
     * NULL): nonzero stops the count, which fails with "stopped" and sets
     * *stopped (a request given up, server/http/offload.h). */
    int (*should_stop)(void *user);
    void *user;
    int *stopped;
} pt_graphs_count_opts;

/* pt_graphs_count over `threads` threads, structures handed out in blocks,
 * the same counts; an error is the one of the first failing structure, as
 * on one thread.  Each block's pages are given back once counted
 * (pt_dataset_release), so counting a dataset bigger than memory keeps the
 * process small.  o may be NULL (one thread, no progress). */
int pt_graphs_count_ex(uint32_t *nedges, const pt_dataset *ds, const pt_graph_params *p,
                       const pt_graphs_count_opts *o, pt_errors *errs);

#endif
