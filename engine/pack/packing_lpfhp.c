/* packing_lpfhp.c — longest-pack-first histogram packing of node counts
 * (Krell et al. 2021, "Efficient sequence packing without cross-
 * contamination") and the LPFHP plan with its draw-safe edge capacity.
 *
 * Our reading of the algorithm, on the histogram of node counts:
 *   - take sizes longest first;
 *   - put a size into the open pack group with the smallest remaining room
 *     that fits it (newest group first on ties), splitting the group when it
 *     has more packs than graphs of this size are left;
 *   - repeat the size into the pack as often as it fits (Krell's
 *     "distribute"), bounded by max graphs per pack and the graphs left;
 *   - when nothing fits, open count/R new packs with R copies each.
 * The result is a strategy: compositions (lists of sizes) x counts.
 *
 * Graphcore applied LPFHP to QM9 graphs (98.6% node efficiency at 36 nodes
 * per pack).  Edges are not packed, yet a batch needs a static edge capacity:
 * a composition drawn from per-size queues can hold any graph of each of its
 * sizes, so the capacity is the largest, over compositions, of the sum of the
 * per-size maximum edge counts.  Edge efficiency is reported against it. */
#include "engine/pack/packing_plan.h"

#include <stdlib.h>
#include <string.h>

#define NONE UINT32_MAX

typedef struct lp_group {
    uint32_t count;     /* packs sharing this composition */
    uint32_t node;      /* last composition node */
    uint32_t room;      /* nodes left */
    uint32_t ng;        /* graphs in it */
    uint32_t next;      /* next open group with the same room (stack) */
} lp_group;

typedef struct lp_node {
    uint32_t parent;    /* NONE at the root */
    uint32_t bin, repeat;
} lp_node;

typedef struct lp_state {
    uint32_t N, G;
    uint32_t *head;     /* [N + 1] open groups by room */
    lp_group *groups;
    uint32_t n_groups, cap_groups;
    lp_node *nodes;
    uint32_t n_nodes, cap_nodes;
} lp_state;

static uint32_t min_u32(uint32_t a, uint32_t b)
{
    return a < b ? a : b;
}

/* p while n < *cap, else p realloc'd to twice the capacity (256 at first);
 * NULL when out of memory (p is then still valid). */
static void *room_for_one(void *p, uint32_t n, uint32_t *cap, size_t size)
{
    if (n < *cap) return p;
    uint32_t c = *cap ? 2 * *cap : 256;
    void *q = realloc(p, (size_t)c * size);
    if (q) *cap = c;
    return q;
}

static int new_node(lp_state *s, uint32_t parent, uint32_t bin, uint32_t repeat)
{
    lp_node *q = room_for_one(s->nodes, s->n_nodes, &s->cap_nodes, sizeof(*q));
    if (!q) return -1;
    s->nodes = q;
    s->nodes[s->n_nodes++] = (lp_node){parent, bin, repeat};
    return 0;
}

/* A group of `count` packs ending in the newest node; full ones stay closed. */
static int add_group(lp_state *s, uint32_t count, uint32_t room, uint32_t ng)
{
    lp_group *q = room_for_one(s->groups, s->n_groups, &s->cap_groups, sizeof(*q));
    if (!q) return -1;
    s->groups = q;
    uint32_t gid = s->n_groups++;
    s->groups[gid] = (lp_group){count, s->n_nodes - 1, room, ng, NONE};
    if (room > 0 && ng < s->G) {
        s->groups[gid].next = s->head[room];
        s->head[room] = gid;
    }
    return 0;
}

static int place_size(lp_state *s, uint32_t b, uint32_t n, uint32_t left)
{
    while (left > 0) {
        uint32_t room = n;
        while (room <= s->N && s->head[room] == NONE) room++;
        if (room <= s->N) {
            uint32_t gid = s->head[room];
            lp_group g = s->groups[gid];
            uint32_t r = min_u32(room / n, min_u32(s->G - g.ng, left));
            uint32_t take = min_u32(g.count, left / r);
            if (g.count > take) {
                s->groups[gid].count -= take;
            } else {
                s->head[room] = g.next;
                s->groups[gid].count = 0;
            }
            if (new_node(s, g.node, b, r) || add_group(s, take, room - r * n, g.ng + r)) return -1;
            left -= take * r;
        } else {
            uint32_t r = min_u32(s->N / n, min_u32(s->G, left));
            if (new_node(s, NONE, b, r) || add_group(s, left / r, s->N - r * n, r)) return -1;
            left -= left / r * r;
        }
    }
    return 0;
}

/* Flattens the live groups into compositions (sizes in placement order). */
static int emit_strategy(const lp_state *s, pt_strategy *st)
{
    uint32_t n_comps = 0;
    uint64_t slots = 0;
    for (uint32_t g = 0; g < s->n_groups; g++)
        if (s->groups[g].count) {
            n_comps++;
            slots += s->groups[g].ng;
        }
    st->comp_offset = malloc(((size_t)n_comps + 1) * sizeof(uint32_t));
    st->comp_bins = malloc((slots + 1) * sizeof(uint32_t));
    st->comp_count = malloc(((size_t)n_comps + 1) * sizeof(uint32_t));
    if (!st->comp_offset || !st->comp_bins || !st->comp_count) return -1;
    st->n_comps = n_comps;
    uint32_t c = 0, at = 0;
    st->comp_offset[0] = 0;
    for (uint32_t g = 0; g < s->n_groups; g++) {
        const lp_group *gr = &s->groups[g];
        if (!gr->count) continue;
        uint32_t end = at + gr->ng, w = end;
        for (uint32_t v = gr->node; v != NONE; v = s->nodes[v].parent)
            for (uint32_t r = 0; r < s->nodes[v].repeat; r++) st->comp_bins[--w] = s->nodes[v].bin;
        at = end;
        st->comp_count[c] = gr->count;
        st->comp_offset[++c] = at;
        st->n_packs += gr->count;
        if (gr->ng > st->max_graphs_used) st->max_graphs_used = gr->ng;
    }
    return 0;
}

int pt_lpfhp_strategy(pt_strategy *st, const pt_packer *pk, const uint32_t *bin_count,
                      uint32_t max_nodes, uint32_t max_graphs)
{
    memset(st, 0, sizeof(*st));
    lp_state s = {0};
    s.N = max_nodes;
    s.G = max_graphs ? max_graphs : max_nodes;
    s.head = malloc(((size_t)max_nodes + 1) * sizeof(uint32_t));
    int rc = -1;
    if (!s.head) goto done;
    memset(s.head, 0xff, ((size_t)max_nodes + 1) * sizeof(uint32_t));
    /* bins are sorted by node count: walk them longest first */
    for (uint32_t t = pk->n_bins; t-- > 0;) {
        uint32_t n = pk->bin_nodes[t];
        if (n == 0 || n > s.N) goto done;
        if (bin_count[t] && place_size(&s, t, n, bin_count[t])) goto done;
    }
    rc = emit_strategy(&s, st);
done:
    if (rc) pt_strategy_close(st);
    free(s.head);
    free(s.groups);
    free(s.nodes);
    return rc;
}

uint32_t pt_lpfhp_edge_bound(const pt_packer *pk, const pt_strategy *st)
{
    uint64_t best = 0;
    for (uint32_t c = 0; c < st->n_comps; c++) {
        uint64_t sum = 0;
        for (uint32_t s = st->comp_offset[c]; s < st->comp_offset[c + 1]; s++)
            sum += pk->bin_edges[st->comp_bins[s]];
        if (sum > best) best = sum;
    }
    return best > INT32_MAX ? UINT32_MAX : (uint32_t)best;
}

/* On pk's node-count bins (pt_packer_bins(pk, 0)). */
int pt_lpfhp_plan(pt_packer *pk, uint32_t N, pt_errors *errs)
{
    uint32_t *count;
    if (pt_bin_counts(pk, &count)) goto oom;
    pt_strategy st;
    int rc = pt_lpfhp_strategy(&st, pk, count, N, (uint32_t)pk->req.max_graphs);
    free(count);
    if (rc) goto oom;
    uint32_t bound = pt_lpfhp_edge_bound(pk, &st);
    uint32_t used = st.max_graphs_used;
    if (bound == UINT32_MAX) {
        pt_errors_add(errs, "", 0, "max_edges",
                      "an LPFHP pack of %u nodes can draw more than 2^31-1 edges", N);
        pt_strategy_close(&st);
        return -1;
    }
    if (pk->req.max_edges > 0 && (uint32_t)pk->req.max_edges < bound) {
        pt_errors_add(errs, "", 0, "max_edges",
                      "max_edges %d is below %u, the most edges an LPFHP pack of this strategy "
                      "can draw; LPFHP does not pack edges (use tuple packing to bound them)",
                      pk->req.max_edges, bound);
        pt_strategy_close(&st);
        return -1;
    }
    pt_packer_adopt(pk, &st);
    pk->req.max_nodes = (int32_t)N;
    pk->limits.max_nodes = (int32_t)N;
    pk->limits.max_edges = pk->req.max_edges > 0 ? pk->req.max_edges : (int32_t)bound;
    pk->req.max_edges = pk->limits.max_edges;
    pk->limits.max_graphs = pk->req.max_graphs ? pk->req.max_graphs : (int32_t)used;
    return 0;
oom:
    pt_errors_add(errs, "", 0, "", "out of memory planning LPFHP packs");
    return -1;
}
