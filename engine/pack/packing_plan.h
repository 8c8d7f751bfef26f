/* packing_plan.h — the packer's state and the planning steps its files
 * share: the bottom of engine/pack's planning.  packing.c (the public API,
 * packing.h) resolves "auto" limits (packing_auto.c) and then calls one
 * strategy with concrete limits (packing_lpfhp.c, packing_tuple.c,
 * packing_baselines.c); the strategies and the auto search use only what is
 * declared here, so no planning file calls back up into packing.c. */
#ifndef PT_PACKING_PLAN_H
#define PT_PACKING_PLAN_H

#include <stdint.h>

#include "engine/core/errors.h"
#include "engine/graph/graph.h"
#include "engine/pack/batch.h"

typedef enum pt_pack_method {
    PT_PACK_LPFHP = 0,
    PT_PACK_TUPLE = 1,
    PT_PACK_PAD = 2,
    PT_PACK_STATIC64 = 3,
    PT_PACK_STATIC2N = 4,
    PT_PACK_DYNAMIC = 5
} pt_pack_method;
#define PT_PACK_N_METHODS 6

/* Monotone priority of a (nodes, edges) tuple, on n/N and e/E. */
typedef enum pt_pack_heuristic {
    PT_HEUR_PRODUCT = 0,
    PT_HEUR_SUM = 1,
    PT_HEUR_MAX = 2,
    PT_HEUR_MIN = 3,
    PT_HEUR_NODES = 4,
    PT_HEUR_EDGES = 5
} pt_pack_heuristic;
#define PT_PACK_N_HEURISTICS 6

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

const char *pt_pack_method_name(pt_pack_method m);
int pt_pack_method_parse(const char *name, pt_pack_method *out);        /* 0 or -1 */
const char *pt_pack_heuristic_name(pt_pack_heuristic h);
int pt_pack_heuristic_parse(const char *name, pt_pack_heuristic *out);  /* 0 or -1 */
double pt_pack_heuristic_value(pt_pack_heuristic h, double a, double b);

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

/* packing_plan.c: histogram bins (by nodes, or by (nodes, edges) when
 * by_edges) and taking over a strategy.  Return 0 or -1 (memory). */
int pt_packer_bins(pt_packer *pk, int by_edges);
int pt_packer_adopt(pt_packer *pk, pt_strategy *st);

/* The strategies, each with concrete limits ("auto" already resolved):
 * fill pk->limits and the strategy, or add errors.  Return 0 or -1. */
uint32_t pt_lpfhp_edge_bound(const pt_packer *pk, const pt_strategy *st); /* packing_lpfhp.c */
int pt_lpfhp_plan(pt_packer *pk, uint32_t max_nodes, pt_errors *errs);
int pt_tuple_plan(pt_packer *pk, uint32_t max_nodes, uint32_t max_edges,  /* packing_tuple.c */
                  pt_errors *errs);
int pt_baseline_plan(pt_packer *pk, pt_errors *errs);                 /* packing_baselines.c */

/* packing_auto.c: the smallest limits that reach the target efficiency,
 * on the binned packer (a nonzero *max_nodes / *max_edges is kept). */
int pt_auto_lpfhp_nodes(pt_packer *pk, uint32_t *max_nodes, pt_errors *errs);
int pt_auto_tuple_limits(pt_packer *pk, uint32_t *max_nodes, uint32_t *max_edges,
                         pt_errors *errs);
int pt_baseline_epoch(const pt_packer *pk, uint64_t seed, uint32_t epoch, pt_packs *out);
/* Static batching's padded shape of one batch with these real sizes. */
void pt_static_shape(pt_pack_method m, uint64_t nodes, uint64_t edges, uint64_t *pad_nodes,
                     uint64_t *pad_edges);

/* The rng stream of epoch draws: distinct from other consumers of a job seed. */
#define PT_PACK_RNG_STREAM 0x7061636b00000000ULL

#endif
