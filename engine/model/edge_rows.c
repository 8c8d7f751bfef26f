/* edge_rows.c — the filter-row table of a batch (see edge_rows.h). */
#include "engine/model/edge_rows.h"

#include <string.h>

/* The reverse of edge k (receiver i, sender j, vector v, distance d): the
 * edge j←i among j's edges with vector −v and distance d, searched up to
 * `end` (exclusive); −1 if none.  Components compare with ==, so +0 and −0
 * (a zero component and its negation) are equal. */
static int32_t reverse_edge(const int32_t *src, const int32_t *dst_offset, const float *dist,
                            const float *vec, int32_t j, int32_t i, int32_t k, int32_t end)
{
    const float *v = vec + 3 * (size_t)k;
    for (int32_t p = dst_offset[j]; p < end; p++) {
        const float *w = vec + 3 * (size_t)p;
        if (src[p] == i && w[0] == -v[0] && w[1] == -v[1] && w[2] == -v[2] &&
            memcmp(&dist[p], &dist[k], sizeof(float)) == 0)
            return p;
    }
    return -1;
}

int32_t pt_edge_rows_build(int32_t *row, uint8_t *first, float *row_dist, const int32_t *src,
                           const int32_t *dst_offset, const float *dist, const float *vec,
                           int n_nodes, float cutoff)
{
    int32_t n_rows = 0;
    for (int32_t i = 0; i < n_nodes; i++) {
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
            int32_t partner = j < i ? reverse_edge(src, dst_offset, dist, vec, j, i, k, dst_offset[j + 1])
                            : j == i ? reverse_edge(src, dst_offset, dist, vec, j, i, k, k)
                                     : -1;
            if (partner >= 0 && row[partner] >= 0) {
                row[k] = row[partner];
                continue;
            }
            row[k] = n_rows;
            first[k] = 1;
            row_dist[n_rows++] = d;
        }
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
