/* packing.h — grouping graphs into fixed-capacity packs, one epoch at a time.
 *
 * A packer is planned once for a set of graph ids (e.g. the training split)
 * from their node and edge counts, then draws each epoch's concrete packs
 * from the seed alone: every id exactly once per epoch, pack order shuffled,
 * the same seed and epoch giving the same packs on any machine.
 *
 * Methods
 *   lpfhp     longest-pack-first histogram packing (Krell et al. 2021) on the
 *             histogram of node counts, max_nodes and max_graphs per pack.  The
 *             plan is a strategy: pack compositions (lists of sizes) x counts;
 *             each epoch fills them by drawing ids from per-size queues
 *             shuffled with the seed.  Edges are not a constraint; the edge
 *             capacity is a bound valid for every draw: the largest, over the
 *             compositions, of the sum of the per-size maximum edge counts.
 *   tuple     tuple packing (after Krell et al. 2022): histogram packing of
 *             (nodes, edges) bins with both limits hard and max_graphs tuples
 *             per pack.  Each pack composition starts with the largest bin
 *             left by a monotone heuristic of (n/N, e/E) (product, sum, max,
 *             min, nodes, edges), then best-fits the histogram bins into the
 *             room: most nodes under the edge room, then edges raised toward
 *             it (details and why in packing_tuple.c); compositions repeat
 *             while their bins last, and epochs draw from per-bin queues.
 *   pad       one graph per pack, padded to the largest graph (nodes, edges).
 *   static64, static2n
 *             jraph-style static batching (as in Speckhard et al. 2025's
 *             jraph_MPEU code): batch_size-1 graphs per batch in shuffled
 *             order, each batch padded to the next multiple of 64 (or power
 *             of two) of its own nodes+1 and edges, batch_size graph slots.
 *   dynamic   jraph.dynamically_batch: a fixed budget n_node, n_edge,
 *             n_graph = batch_size, with n_node/n_edge = next multiple of 64
 *             strictly above max(mean * batch_size, largest graph); graphs are
 *             added in shuffled order until one more would exceed n_node-1
 *             nodes, n_edge edges or n_graph-1 graphs (one node and one graph
 *             are reserved for jraph's padding graph).
 *
 * Efficiency per component: eff = real / (packs x limit), i.e. real over the
 * slots the packs occupy; static methods occupy their own per-batch shape
 * (what a shape-specialised compiler would run), every other method its fixed
 * capacity.  Padding fraction = 1 - eff. */
#ifndef PT_PACKING_H
#define PT_PACKING_H

#include <stdint.h>

#include "engine/pack/batch.h"
#include "engine/core/errors.h"
#include "engine/graph/graph.h"

typedef enum pt_pack_method {
    PT_PACK_LPFHP = 0,
    PT_PACK_TUPLE = 1,
    PT_PACK_PAD = 2,
    PT_PACK_STATIC64 = 3,
    PT_PACK_STATIC2N = 4,
    PT_PACK_DYNAMIC = 5
} pt_pack_method;

/* Monotone priority of a (nodes, edges) tuple, on n/N and e/E. */
typedef enum pt_pack_heuristic {
    PT_HEUR_PRODUCT = 0,
    PT_HEUR_SUM = 1,
    PT_HEUR_MAX = 2,
    PT_HEUR_MIN = 3,
    PT_HEUR_NODES = 4,
    PT_HEUR_EDGES = 5
} pt_pack_heuristic;

#define PT_PACK_TARGET_DEFAULT 0.95
#define PT_PACK_BATCH_DEFAULT 32

typedef struct pt_pack_request {
    pt_pack_method method;
    int32_t max_nodes;          /* per pack; 0 = auto (lpfhp, tuple, pad, dynamic) */
    int32_t max_edges;          /* per pack; 0 = auto (tuple, pad, dynamic) or the
                                   draw-safe bound (lpfhp) */
    int32_t max_graphs;         /* lpfhp, tuple: graphs per pack, 0 = no limit */
    pt_pack_heuristic heuristic;  /* tuple */
    double target_efficiency;   /* auto limits: smallest reaching this on every
                                   packed component; 0 = PT_PACK_TARGET_DEFAULT */
    int32_t batch_size;         /* static*, dynamic: graph slots per batch including
                                   the padding graph; 0 = PT_PACK_BATCH_DEFAULT */
} pt_pack_request;

/* What a plan (and one epoch draw of it) achieves. */
typedef struct pt_pack_report {
    pt_pack_method method;
    pt_pack_limits limits;      /* capacity of every pack */
    uint32_t n_packs;
    uint32_t n_graphs;
    uint64_t real_nodes, real_edges;
    uint64_t slot_nodes, slot_edges, slot_graphs;  /* slots the packs occupy */
    double node_efficiency, edge_efficiency, graph_efficiency;
    double node_padding, edge_padding;              /* 1 - efficiency */
    double node_capacity_efficiency, edge_capacity_efficiency; /* vs packs x limits */
    double graphs_per_pack;
    uint32_t n_compositions;    /* lpfhp, tuple: distinct pack compositions */
} pt_pack_report;

typedef struct pt_packer {
    pt_pack_request req;        /* as planned: auto limits resolved */
    pt_pack_limits limits;      /* capacity of every pack */
    uint32_t n_ids;
    uint32_t *ids;              /* [n_ids] dataset ids, in the caller's order */
    uint32_t n_structs;
    uint32_t *natoms, *nedges;  /* [n_structs] copies of the sizes, by dataset id */
    uint64_t total_nodes, total_edges;
    uint32_t min_nodes, max_nodes_seen, max_edges_seen;

    /* lpfhp, tuple: histogram bins and the strategy over them */
    uint32_t n_bins;
    uint32_t *bin_nodes, *bin_edges;   /* [n_bins] */
    uint32_t *bin_offset;              /* [n_bins + 1] into bin_members */
    uint32_t *bin_members;             /* indices k into ids, grouped by bin */
    uint32_t n_comps;
    uint32_t *comp_offset;             /* [n_comps + 1] into comp_bins */
    uint32_t *comp_bins;               /* the bins of each composition */
    uint32_t *comp_count;              /* [n_comps] packs with that composition */
    uint32_t n_packs;                  /* per epoch; 0 when it varies (static, dynamic) */

    /* dynamic: the real-content budget of one batch */
    uint32_t budget_nodes, budget_edges, budget_graphs;
} pt_packer;

/* Plans packs for ids[0..n_ids) (distinct, each < n_structs) whose sizes are
 * natoms[id], nedges[id].  Returns 0, or -1 with every problem added to errs
 * (impossible limits name the graph id and its size). */
int pt_packer_init(pt_packer *pk, const pt_pack_request *req, const uint32_t *natoms,
                   const uint32_t *nedges, uint32_t n_structs, const uint32_t *ids,
                   uint32_t n_ids, pt_errors *errs);
void pt_packer_close(pt_packer *pk);

/* The packs of one epoch: every id exactly once, within pk->limits, order
 * and draws a function of (seed, epoch) only.  `out` must be zeroed or hold a
 * previous epoch (its buffers are reused).  Returns 0, or -1 out of memory. */
int pt_packer_epoch(const pt_packer *pk, uint64_t seed, uint32_t epoch, pt_packs *out);
void pt_packs_close(pt_packs *packs);

/* Packs of consecutive structures in dataset order, `per_pack` graphs each,
 * over structures [0, n): for evaluation and prediction, where order matters
 * and packing efficiency does not.  Limits are the largest pack's atoms and
 * edges plus one spare slot each (padding edges get a node of their own).
 * Returns 0, or -1 with errs filled (out of memory, a pack too large). */
int pt_packs_consecutive(pt_packs *out, const pt_dataset *ds, const pt_graphs *g, uint32_t n,
                         uint32_t per_pack, pt_errors *errs);

/* Efficiency of the plan, measured on the epoch-0 draw of `seed` (only the
 * static and dynamic methods depend on the draw).  Returns 0 or -1 (memory). */
int pt_packer_report(const pt_packer *pk, uint64_t seed, pt_pack_report *out);
/* The same figures for any list of packs of this packer (tests use it to
 * check every epoch). */
void pt_packs_measure(const pt_packer *pk, const pt_packs *packs, pt_pack_report *out);

const char *pt_pack_method_name(pt_pack_method m);
int pt_pack_method_parse(const char *name, pt_pack_method *out);        /* 0 or -1 */
const char *pt_pack_heuristic_name(pt_pack_heuristic h);
int pt_pack_heuristic_parse(const char *name, pt_pack_heuristic *out);  /* 0 or -1 */

/* --- internal to engine/packing*.c ------------------------------------------ */

/* A histogram strategy: compositions of bins x counts. */
typedef struct pt_strategy {
    uint32_t n_comps;
    uint32_t *comp_offset, *comp_bins, *comp_count;
    uint32_t n_packs;
    uint32_t max_graphs_used;
} pt_strategy;

/* LPFHP over node-count bins (packing_lpfhp.c) and tuple packing over
 * (nodes, edges) bins (packing_tuple.c), on pk's bins (sorted by nodes, then
 * edges) with bin_count graphs each; every bin must fit one pack.  Return 0
 * or -1 (memory). */
int pt_lpfhp_strategy(pt_strategy *st, const pt_packer *pk, const uint32_t *bin_count,
                      uint32_t max_nodes, uint32_t max_graphs);
int pt_tuple_strategy(pt_strategy *st, const pt_packer *pk, const uint32_t *bin_count,
                      uint32_t max_nodes, uint32_t max_edges, uint32_t max_graphs,
                      pt_pack_heuristic h);
void pt_strategy_close(pt_strategy *st);
int pt_bin_counts(const pt_packer *pk, uint32_t **count);   /* graphs per bin, malloc'd */
/* Tuple packing's knapsack table: node sizes x graph-count dim x (max_nodes+1). */
#define PT_TUPLE_MAX_TABLE (1u << 24)
uint32_t pt_tuple_graph_dim(uint32_t max_nodes, uint32_t max_graphs, uint32_t min_nodes);
int pt_tuple_table_fits(const pt_packer *pk, uint32_t max_nodes, uint32_t max_graphs);
double pt_pack_heuristic_value(pt_pack_heuristic h, double a, double b);

/* Planning steps, each filling pk->limits / strategy or adding errors. */
int pt_packer_bins(pt_packer *pk, int by_edges);                      /* packing.c */
int pt_packer_adopt(pt_packer *pk, pt_strategy *st);                  /* packing.c */
uint32_t pt_lpfhp_edge_bound(const pt_packer *pk, const pt_strategy *st); /* packing_lpfhp.c */
int pt_lpfhp_plan(pt_packer *pk, pt_errors *errs);                    /* packing_lpfhp.c */
int pt_tuple_plan(pt_packer *pk, pt_errors *errs);                    /* packing_tuple.c */
int pt_auto_lpfhp_nodes(pt_packer *pk, uint32_t *max_nodes, pt_errors *errs);  /* packing_auto.c */
int pt_auto_tuple_limits(pt_packer *pk, uint32_t *max_nodes, uint32_t *max_edges,
                         pt_errors *errs);                            /* packing_auto.c */
int pt_baseline_plan(pt_packer *pk, pt_errors *errs);                 /* packing_baselines.c */
int pt_baseline_epoch(const pt_packer *pk, uint64_t seed, uint32_t epoch, pt_packs *out);
/* Static batching's padded shape of one batch with these real sizes. */
void pt_static_shape(pt_pack_method m, uint64_t nodes, uint64_t edges, uint64_t *pad_nodes,
                     uint64_t *pad_edges);

/* The rng stream of epoch draws: distinct from other consumers of a job seed. */
#define PT_PACK_RNG_STREAM 0x7061636b00000000ULL

#endif
