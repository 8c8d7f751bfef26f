/* packing_plan.c — what the planning files of engine/pack share
 * (packing_plan.h): method and heuristic names, histogram bins, a
 * strategy's container and its adoption by the packer. */
#include "engine/pack/packing_plan.h"

#include <stdlib.h>
#include <string.h>

static const char *const method_names[] = {"lpfhp", "tuple", "pad", "static64", "static2n",
                                           "dynamic"};
static const char *const heuristic_names[] = {"product", "sum", "max", "min", "nodes", "edges"};

const char *pt_pack_method_name(pt_pack_method m)
{
    return (unsigned)m < PT_PACK_N_METHODS ? method_names[m] : "unknown";
}

int pt_pack_method_parse(const char *name, pt_pack_method *out)
{
    for (int m = 0; m < PT_PACK_N_METHODS; m++)
        if (!strcmp(name, method_names[m])) {
            *out = (pt_pack_method)m;
            return 0;
        }
    return -1;
}

const char *pt_pack_heuristic_name(pt_pack_heuristic h)
{
    return (unsigned)h < PT_PACK_N_HEURISTICS ? heuristic_names[h] : "unknown";
}

int pt_pack_heuristic_parse(const char *name, pt_pack_heuristic *out)
{
    for (int h = 0; h < PT_PACK_N_HEURISTICS; h++)
        if (!strcmp(name, heuristic_names[h])) {
            *out = (pt_pack_heuristic)h;
            return 0;
        }
    return -1;
}

double pt_pack_heuristic_value(pt_pack_heuristic h, double a, double b)
{
    switch (h) {
    case PT_HEUR_PRODUCT: return a * b;
    case PT_HEUR_SUM: return a + b;
    case PT_HEUR_MAX: return a > b ? a : b;
    case PT_HEUR_MIN: return a < b ? a : b;
    case PT_HEUR_NODES: return a;
    case PT_HEUR_EDGES: return b;
    }
    return a;
}

/* --- histogram bins -------------------------------------------------------- */

typedef struct bin_item {
    uint32_t n, e, k;
} bin_item;

static int item_cmp(const void *a, const void *b)
{
    const bin_item *x = a, *y = b;
    if (x->n != y->n) return x->n < y->n ? -1 : 1;
    if (x->e != y->e) return x->e < y->e ? -1 : 1;
    return (x->k > y->k) - (x->k < y->k);
}

/* Groups the ids by size: (nodes, edges) when by_edges, else nodes only, in
 * which case bin_edges holds the largest edge count of the bin's graphs. */
int pt_packer_bins(pt_packer *pk, int by_edges)
{
    bin_item *it = malloc(((size_t)pk->n_ids + 1) * sizeof(*it));
    pk->bin_members = malloc(((size_t)pk->n_ids + 1) * sizeof(uint32_t));
    pk->bin_nodes = malloc(((size_t)pk->n_ids + 1) * sizeof(uint32_t));
    pk->bin_edges = malloc(((size_t)pk->n_ids + 1) * sizeof(uint32_t));
    pk->bin_offset = malloc(((size_t)pk->n_ids + 2) * sizeof(uint32_t));
    if (!it || !pk->bin_members || !pk->bin_nodes || !pk->bin_edges || !pk->bin_offset) {
        free(it);
        return -1;
    }
    for (uint32_t k = 0; k < pk->n_ids; k++) {
        uint32_t id = pk->ids[k];
        it[k] = (bin_item){pk->natoms[id], by_edges ? pk->nedges[id] : 0, k};
    }
    qsort(it, pk->n_ids, sizeof(*it), item_cmp);
    uint32_t nb = 0;
    for (uint32_t t = 0; t < pk->n_ids; t++) {
        if (t == 0 || it[t].n != it[t - 1].n || it[t].e != it[t - 1].e) {
            pk->bin_offset[nb] = t;
            pk->bin_nodes[nb] = it[t].n;
            pk->bin_edges[nb] = 0;
            nb++;
        }
        uint32_t e = pk->nedges[pk->ids[it[t].k]];
        if (e > pk->bin_edges[nb - 1]) pk->bin_edges[nb - 1] = e;
        pk->bin_members[t] = it[t].k;
    }
    pk->bin_offset[nb] = pk->n_ids;
    pk->n_bins = nb;
    free(it);
    return 0;
}

int pt_packer_adopt(pt_packer *pk, pt_strategy *st)
{
    free(pk->comp_offset);
    free(pk->comp_bins);
    free(pk->comp_count);
    pk->n_comps = st->n_comps;
    pk->comp_offset = st->comp_offset;
    pk->comp_bins = st->comp_bins;
    pk->comp_count = st->comp_count;
    pk->n_packs = st->n_packs;
    memset(st, 0, sizeof(*st));
    return 0;
}

int pt_bin_counts(const pt_packer *pk, uint32_t **count)
{
    *count = malloc(((size_t)pk->n_bins + 1) * sizeof(uint32_t));
    if (!*count) return -1;
    for (uint32_t b = 0; b < pk->n_bins; b++) (*count)[b] = pk->bin_offset[b + 1] - pk->bin_offset[b];
    return 0;
}

void pt_strategy_close(pt_strategy *st)
{
    free(st->comp_offset);
    free(st->comp_bins);
    free(st->comp_count);
    memset(st, 0, sizeof(*st));
}
