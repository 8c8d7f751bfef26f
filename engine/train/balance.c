/* balance.c — a step's micro-batches balanced by their edges (balance.h). */
#include "engine/train/balance.h"

#include <stdlib.h>
#include <string.h>

uint64_t pt_pack_edges(const pt_packs *p, const uint32_t *edges, uint32_t i)
{
    uint64_t e = 0;
    for (uint32_t q = p->graph_offset[i]; q < p->graph_offset[i + 1]; q++) e += edges[p->graphs[q]];
    return e;
}

typedef struct pack_cost {
    uint64_t edges;
    uint32_t at;   /* position in the window */
} pack_cost;

/* heaviest first; equal edges in window order, so the result is unique */
static int heavier_first(const void *a, const void *b)
{
    const pack_cost *x = a, *y = b;
    if (x->edges != y->edges) return x->edges > y->edges ? -1 : 1;
    return x->at < y->at ? -1 : x->at > y->at;
}

/* The heaviest and the lightest micro-batch. */
static void extremes(const uint64_t *load, uint32_t groups, uint32_t *hi, uint32_t *lo)
{
    *hi = *lo = 0;
    for (uint32_t g = 1; g < groups; g++) {
        if (load[g] > load[*hi]) *hi = g;
        if (load[g] < load[*lo]) *lo = g;
    }
}

/* One exchange of a pack of the heaviest micro-batch for a lighter one of
 * the lightest that narrows their gap the most; 0 when none does. */
static int improve(const uint64_t *edges, uint32_t G, uint64_t *load, uint32_t *group,
                   uint32_t groups)
{
    uint32_t hi, lo;
    extremes(load, groups, &hi, &lo);
    const uint64_t gap = load[hi] - load[lo];
    uint32_t bx = G, by = G;
    uint64_t best = gap;
    for (uint32_t x = 0; x < G; x++) {
        if (group[x] != hi) continue;
        for (uint32_t y = 0; y < G; y++) {
            if (group[y] != lo || edges[y] >= edges[x]) continue;
            const uint64_t d = edges[x] - edges[y];
            if (d >= gap) continue;
            const uint64_t after = gap - 2 * d > gap ? 2 * d - gap : gap - 2 * d;
            if (after < best) best = after, bx = x, by = y;
        }
    }
    if (bx == G) return 0;
    const uint64_t d = edges[bx] - edges[by];
    load[hi] -= d;
    load[lo] += d;
    group[bx] = lo;
    group[by] = hi;
    return 1;
}

/* Scratch for one window of G packs. */
typedef struct deal_scratch {
    pack_cost *cost;
    uint64_t *ce, *load;
    uint32_t *fill, *group, *tmp;
} deal_scratch;

/* Deals the n packs at pos[0..n) (window positions, pe their edges) into
 * n/per micro-batches of per packs: pos is rewritten micro-batch by
 * micro-batch, each one's positions ascending (epoch order) when pos was.
 * Leaves pos as it is, returning 0, when its heaviest micro-batch would not
 * get lighter. */
static int deal(const uint64_t *pe, uint32_t *pos, uint32_t n, uint32_t per, deal_scratch *w)
{
    const uint32_t groups = n / per;
    for (uint32_t i = 0; i < n; i++) {
        w->ce[i] = pe[pos[i]];
        w->cost[i] = (pack_cost){w->ce[i], i};
    }
    /* the input's heaviest micro-batch: the result must beat it */
    uint64_t before = 0;
    for (uint32_t g = 0; g < groups; g++) {
        uint64_t l = 0;
        for (uint32_t k = 0; k < per; k++) l += w->ce[g * per + k];
        before = l > before ? l : before;
    }
    qsort(w->cost, n, sizeof *w->cost, heavier_first);
    memset(w->load, 0, groups * sizeof *w->load);
    memset(w->fill, 0, groups * sizeof *w->fill);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t best = groups;
        for (uint32_t g = 0; g < groups; g++)
            if (w->fill[g] < per && (best == groups || w->load[g] < w->load[best])) best = g;
        w->load[best] += w->cost[i].edges;
        w->fill[best]++;
        w->group[w->cost[i].at] = best;
    }
    /* the greedy deal fills micro-batches to exactly per, which can strand a
     * heavy pack: exchanges between the extremes finish the job */
    for (uint32_t it = 0; it < 4 * n && improve(w->ce, n, w->load, w->group, groups); it++) {}
    uint32_t hi, lo;
    extremes(w->load, groups, &hi, &lo);
    if (w->load[hi] >= before) return 0;
    /* each micro-batch's packs in their input order */
    memset(w->fill, 0, groups * sizeof *w->fill);
    for (uint32_t i = 0; i < n; i++) {
        const uint32_t g = w->group[i];
        w->tmp[g * per + w->fill[g]++] = pos[i];
    }
    memcpy(pos, w->tmp, n * sizeof *pos);
    return 1;
}

/* Halves pos[0..n) by edges, then each half, down to micro-batches of b. */
static int halve(const uint64_t *pe, uint32_t *pos, uint32_t n, uint32_t b, deal_scratch *w)
{
    if (n <= b) return 0;
    int moved = deal(pe, pos, n, n / 2, w);
    moved |= halve(pe, pos, n / 2, b, w);
    moved |= halve(pe, pos + n / 2, n / 2, b, w);
    return moved;
}

/* order[0..G): the window's positions, micro-batch by micro-batch; 0 when
 * the window is best left as it is. */
static int balance_window(const pt_packs *p, const uint32_t *edges, uint32_t first, uint32_t G,
                          uint32_t b, uint64_t *pe, deal_scratch *w, uint32_t *order)
{
    const uint32_t groups = G / b;
    for (uint32_t i = 0; i < G; i++) {
        pe[i] = pt_pack_edges(p, edges, first + i);
        order[i] = i;
    }
    if ((groups & (groups - 1)) == 0) return halve(pe, order, G, b, w);
    return deal(pe, order, G, b, w);
}

int pt_packs_balance(pt_packs *p, const uint32_t *edges, uint32_t window, uint32_t per_batch)
{
    if (per_batch == 0 || window <= per_batch || window % per_batch || p->n_packs < window)
        return 0;
    const uint32_t G = window, groups = G / per_batch;
    const size_t n_graphs = p->graph_offset[p->n_packs];
    deal_scratch w = {.cost = malloc(G * sizeof *w.cost), .ce = malloc(G * sizeof *w.ce),
                      .load = malloc(groups * sizeof *w.load),
                      .fill = malloc(groups * sizeof *w.fill),
                      .group = malloc(G * sizeof *w.group), .tmp = malloc(G * sizeof *w.tmp)};
    uint64_t *pe = malloc(G * sizeof *pe);
    uint32_t *order = malloc(G * sizeof *order);
    uint32_t *offs = malloc(((size_t)p->n_packs + 1) * sizeof *offs);
    uint32_t *graphs = malloc((n_graphs ? n_graphs : 1) * sizeof *graphs);
    int rc = -1;
    if (!w.cost || !w.ce || !w.load || !w.fill || !w.group || !w.tmp || !pe || !order || !offs ||
        !graphs)
        goto done;
    memcpy(offs, p->graph_offset, ((size_t)p->n_packs + 1) * sizeof *offs);
    memcpy(graphs, p->graphs, n_graphs * sizeof *graphs);
    for (uint32_t first = 0; first + G <= p->n_packs; first += G) {
        if (!balance_window(p, edges, first, G, per_batch, pe, &w, order))
            continue;
        /* rewrite the window from the copies: its graphs stay in its range */
        uint32_t at = offs[first];
        for (uint32_t k = 0; k < G; k++) {
            const uint32_t src = first + order[k];
            const uint32_t lo = offs[src], cnt = offs[src + 1] - lo;
            memcpy(p->graphs + at, graphs + lo, cnt * sizeof *graphs);
            at += cnt;
            p->graph_offset[first + k + 1] = at;
        }
    }
    rc = 0;
done:
    free(w.cost);
    free(w.ce);
    free(w.load);
    free(w.fill);
    free(w.group);
    free(w.tmp);
    free(pe);
    free(order);
    free(offs);
    free(graphs);
    return rc;
}
