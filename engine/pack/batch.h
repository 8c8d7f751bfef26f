/* batch.h — packs and the fixed-shape batch handed to the model.
 *
 * Packing (packing.c) groups graph ids into packs under per-pack limits.
 * A batch is `n_packs` packs laid side by side in arrays of a fixed capacity:
 * every batch of a job has the same shape whatever graphs it holds, as an IPU
 * program compiled for static shapes requires.  Padding is explicit:
 *
 *   nodes   pack p owns node slots [p*max_nodes, (p+1)*max_nodes); its real
 *           atoms come first; padding slots have z = 0 and node_graph = -1.
 *   edges   pack p owns edge slots [p*max_edges, (p+1)*max_edges); real edges
 *           come first, sorted by receiver (edge_dst) then sender; padding
 *           edges point from and to the pack's last node slot with
 *           edge_dist = cutoff and edge_vec = (cutoff, 0, 0), so the cosine
 *           cutoff makes them contribute 0.  edge_dst is therefore
 *           non-decreasing over the whole batch and dst_offset is its CSR row
 *           pointer.
 *   graphs  pack p owns graph slots [p*max_graphs, (p+1)*max_graphs); padding
 *           slots have graph_id = -1 and never enter the loss or metrics.
 *
 * Edge vectors: edge k (receiver i = edge_dst[k], sender j = edge_src[k])
 * has edge_vec[3k..3k+2] = r_j + S·cell - r_i in Å, S the edge's image shift
 * (graph.h, pt_edge_vector; S = 0 and float differences for molecules), so
 * |edge_vec| equals edge_dist to float rounding (bit for bit for molecules).
 * Forces and stress are labels in ASE's units and signs: node_force in eV/Å
 * (F = -dE/dr), graph_stress in eV/Å³ (sigma = (1/V) dE/d(strain)); a label
 * a structure does not have is 0 with its has_ flag 0. */
#ifndef PT_BATCH_H
#define PT_BATCH_H

#include <stdint.h>

typedef struct pt_pack_limits {
    int32_t max_nodes;   /* node slots per pack */
    int32_t max_edges;   /* edge slots per pack */
    int32_t max_graphs;  /* graph slots per pack */
} pt_pack_limits;

/* A list of packs: pack k holds graph ids graphs[graph_offset[k] .. graph_offset[k+1]). */
typedef struct pt_packs {
    pt_pack_limits limits;
    uint32_t n_packs;
    uint32_t *graph_offset;  /* [n_packs + 1] */
    uint32_t *graphs;        /* [graph_offset[n_packs]] dataset structure ids */
} pt_packs;

#define PT_BATCH_MAX_KEYS 16

typedef struct pt_batch {
    pt_pack_limits limits;   /* per pack */
    int32_t n_packs;         /* packs per batch (model_batch_size) */
    int32_t cap_nodes;       /* n_packs * limits.max_nodes */
    int32_t cap_edges;       /* n_packs * limits.max_edges */
    int32_t cap_graphs;      /* n_packs * limits.max_graphs */
    float cutoff;            /* distance given to padding edges */

    /* real content of the current fill (the rest is padding) */
    int32_t n_real_nodes, n_real_edges, n_real_graphs;

    uint8_t *z;              /* [cap_nodes] atomic number, 0 = padding */
    int32_t *node_graph;     /* [cap_nodes] graph slot, -1 = padding */
    int32_t *edge_src;       /* [cap_edges] sender j (batch node slot) */
    int32_t *edge_dst;       /* [cap_edges] receiver i, non-decreasing */
    float *edge_dist;        /* [cap_edges] d_ij in Å */
    int32_t *dst_offset;     /* [cap_nodes + 1] CSR over edge_dst */
    int32_t *graph_id;       /* [cap_graphs] dataset structure id, -1 = padding */
    int32_t *graph_natoms;   /* [cap_graphs] real atoms of the graph, 0 = padding */
    double *target;          /* [cap_graphs] target value in dataset units, 0 = padding */

    float *edge_vec;         /* [cap_edges * 3] r_src + S·cell - r_dst in Å; padding (cutoff, 0, 0) */
    float *node_force;       /* [cap_nodes * 3] force labels, eV/Å; 0 = padding or no forces */
    uint8_t *graph_has_forces; /* [cap_graphs] 1 when the structure has force labels */
    double *graph_stress;    /* [cap_graphs * 9] row-major 3x3 stress labels, eV/Å³; 0 = none */
    uint8_t *graph_has_stress; /* [cap_graphs] 1 when the structure has a stress label */
    double *graph_volume;    /* [cap_graphs] cell volume in Å³ when periodic along a, b and c,
                              * else 0 */

    /* further per-structure keys (multi-task jobs; pt_batch_set_keys): key
     * j of graph slot g at key_target[j * cap_graphs + g], 0 on padding */
    int32_t n_keys;
    uint32_t key_index[PT_BATCH_MAX_KEYS];  /* dataset keys (per-atom columns where key_atom) */
    double *key_target;      /* [n_keys * cap_graphs] or NULL */
    /* per-atom keys (atom-level heads; pt_batch_set_keys_atom): key j of node
     * slot i at atom_target[j * cap_nodes + i], 0 on padding nodes */
    uint8_t key_atom[PT_BATCH_MAX_KEYS];    /* 1: key j is a per-atom column (dataset.h atom_cols) */
    double *atom_target;     /* [n_keys * cap_nodes], or NULL when no key is per atom */

    /* The filter-row table of the current fill (edge_rows.h, at `cutoff`):
     * made by every fill after its edges, so the thread that fills a batch
     * (the loader's, or a replica waiting at the all-reduce) pays for it,
     * not the replica that computes on it, which reads it in place
     * (schnet.c, pt_schnet_prepare_edges, when its cutoff is the batch's).
     * n_rows is -1 until a fill made it (a batch assembled by hand, with
     * NULL arrays, has none). */
    int32_t n_rows;
    int32_t *edge_row;       /* [cap_edges] filter row of each edge, -1 = none */
    uint8_t *edge_first;     /* [cap_edges] 1: the first edge of its row */
    int32_t *row_last;       /* [cap_edges] receiver of each row's last edge (first n_rows) */
    float *row_dist;         /* [cap_edges] distance of each row (first n_rows) */
    int32_t *row_cursor;     /* [cap_nodes] the table's search scratch */
} pt_batch;

/* --- filling batches (batch.c) -------------------------------------------- */
struct pt_dataset;
struct pt_graphs;

enum {
    PT_BATCH_OK = 0,
    PT_BATCH_ELIMITS = -1,   /* invalid limits / pack count, or > 2^31-1 slots */
    PT_BATCH_ENOMEM = -2,
    PT_BATCH_ERANGE = -3,    /* n_packs_avail beyond the batch or the epoch's packs */
    PT_BATCH_EGRAPH = -4,    /* a graph id not in the dataset / neighbour graphs, or a
                              * periodic structure and graphs without shifts */
    PT_BATCH_ENODES = -5,    /* a pack over max_nodes */
    PT_BATCH_EEDGES = -6,    /* a pack over max_edges */
    PT_BATCH_EGRAPHS = -7,   /* a pack over max_graphs */
    PT_BATCH_ETARGET = -8    /* target_index not a key of the dataset */
};

/* Allocates a batch of n_packs packs of `limits` once (cutoff: the distance
 * padding edges get, and the filter-row table's).  Returns PT_BATCH_OK or an
 * error code. */
int pt_batch_init(pt_batch *b, pt_pack_limits limits, int32_t n_packs, float cutoff);

/* Fills the batch, without allocating, from packs[first_pack ..
 * first_pack + n_packs_avail) of an epoch; batch pack slots past n_packs_avail
 * (the end of an epoch) are all padding.  target_index selects the dataset
 * key copied to `target` (-1: none, targets 0; a structure lacking the key
 * copies its NaN).  Every pack is checked before anything is written.  The
 * batch's filter-row table is made last (n_rows).
 * Returns PT_BATCH_OK or an error code (pt_batch_strerror). */
int pt_batch_fill(pt_batch *b, const struct pt_dataset *ds, const struct pt_graphs *g,
                  const pt_packs *packs, uint32_t first_pack, int32_t n_packs_avail,
                  int target_index);
/* As pt_batch_fill, with pack slot p taking packs ids[p] for p < n. */
int pt_batch_fill_ids(pt_batch *b, const struct pt_dataset *ds, const struct pt_graphs *g,
                      const pt_packs *packs, const uint32_t *ids, int32_t n, int target_index);
/* Graphs, atoms and edges of pack k (ids out of range are not counted). */
void pt_batch_pack_sizes(const struct pt_dataset *ds, const struct pt_graphs *g,
                         const pt_packs *packs, uint32_t k, int64_t *graphs, int64_t *nodes,
                         int64_t *edges);
/* After pt_batch_init: the batch also carries dataset keys keys[0..n) of
 * every graph (fills check them against the dataset).  Allocates once;
 * PT_BATCH_OK, PT_BATCH_ELIMITS (n outside 0..PT_BATCH_MAX_KEYS) or
 * PT_BATCH_ENOMEM. */
int pt_batch_set_keys(pt_batch *b, const uint32_t *keys, int32_t n);
/* As pt_batch_set_keys, with keys[j] a per-atom column of the dataset where
 * atom[j] is 1 (atom may be NULL: none); fills copy it into atom_target. */
int pt_batch_set_keys_atom(pt_batch *b, const uint32_t *keys, const uint8_t *atom, int32_t n);
void pt_batch_close(pt_batch *b);
const char *pt_batch_strerror(int rc);

#endif
