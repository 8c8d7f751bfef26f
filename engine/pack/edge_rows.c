/* edge_rows.c — the filter-row table of a batch (see edge_rows.h). */
#include "engine/pack/edge_rows.h"

#include <string.h>

/* 1 when a and b have the same bits (a distance and its partner's must be
 * bit-identical; a call to memcmp per candidate cost a third of the table) */
static inline int same_bits(float a, float b)
{
    uint32_t x, y;
    memcpy(&x, &a, sizeof x);
    memcpy(&y, &b, sizeof y);
    return x == y;
}

/* 1 when edge p is the reverse of edge k (receiver i, vector v, distance
 * d): sender i, vector −v, distance d.  Components compare with ==, so +0
 * and −0 (a zero component and its negation) are equal. */
static inline int is_reverse(const int32_t *src, const float *dist, const float *vec, int32_t p,
                             int32_t i, int32_t k)
{
    const float *v = vec + 3 * (size_t)k, *w = vec + 3 * (size_t)p;
    return src[p] == i && w[0] == -v[0] && w[1] == -v[1] && w[2] == -v[2] &&
           same_bits(dist[p], dist[k]);
}

/* The reverse of edge k (receiver i) among the edges p0 ≤ p < end: the
 * first one, or −1.  run: the list is in sender order from p0 on, so only
 * the run of sender i at p0 can hold it and the search stops after that run
 * (the same answer; without it an edge whose partner was truncated away
 * scanned the rest of the list). */
static int32_t reverse_in(const int32_t *src, const float *dist, const float *vec, int32_t p0,
                          int32_t end, int32_t i, int32_t k, int run)
{
    for (int32_t p = p0; p < end && (!run || src[p] == i); p++)
        if (is_reverse(src, dist, vec, p, i, k)) return p;
    return -1;
}

/* 1 when the edges lo ≤ k < hi are in ascending sender order */
static int in_sender_order(const int32_t *src, int32_t lo, int32_t hi)
{
    int ok = 1;
    for (int32_t k = lo + 1; k < hi; k++) ok &= src[k - 1] <= src[k];
    return ok;
}

int32_t pt_edge_rows_build(int32_t *row, uint8_t *first, float *row_dist, int32_t *cursor,
                           const int32_t *src, const int32_t *dst_offset, const float *dist,
                           const float *vec, int n_nodes, float cutoff)
{
    int32_t n_rows = 0;
    int sorted = 1;   /* every list before i's is in sender order */
    for (int32_t i = 0; i < n_nodes; i++) {
        /* receivers after i search i's list with ascending senders */
        cursor[i] = dst_offset[i];
        for (int32_t k = dst_offset[i]; k < dst_offset[i + 1]; k++) {
            const float d = dist[k];
            first[k] = 0;
            if (!(d < cutoff)) { /* C(d) = 0: no filter, no message */
                row[k] = -1;
                continue;
            }
            /* the partner comes earlier: in an earlier receiver's edges, or
             * (an atom and its own image) earlier in this one's */
            const int32_t j = src[k];
            int32_t partner = -1;
            if (j < i) {
                /* j's list from its cursor: the edges it steps over have
                 * senders below i, so neither this search nor a later one
                 * (for a receiver ≥ i) can match them, whatever the list's
                 * order; in sender order (the neighbour lists') the cursor
                 * stops at i's run and the search is one step */
                int32_t p = cursor[j];
                const int32_t end = dst_offset[j + 1];
                while (p < end && src[p] < i) p++;
                cursor[j] = p;
                partner = reverse_in(src, dist, vec, p, end, i, k, sorted);
            } else if (j == i) {
                partner = reverse_in(src, dist, vec, dst_offset[i], k, i, k, 0);
            }
            if (partner >= 0 && row[partner] >= 0) {
                row[k] = row[partner];
                continue;
            }
            row[k] = n_rows;
            first[k] = 1;
            row_dist[n_rows++] = d;
        }
        sorted &= in_sender_order(src, dst_offset[i], dst_offset[i + 1]);
    }
    return n_rows;
}

int32_t pt_edge_rows_identity(int32_t *row, uint8_t *first, float *row_dist, const float *dist,
                              int32_t n_edges)
{
    for (int32_t k = 0; k < n_edges; k++) {
        row[k] = k;
        first[k] = 1;
        row_dist[k] = dist[k];
    }
    return n_edges;
}

void pt_edge_rows_last(int32_t *last, const int32_t *row, const int32_t *dst_offset, int n_nodes)
{
    for (int32_t i = 0; i < n_nodes; i++)
        for (int32_t k = dst_offset[i]; k < dst_offset[i + 1]; k++)
            if (row[k] >= 0) last[row[k]] = i;
}
