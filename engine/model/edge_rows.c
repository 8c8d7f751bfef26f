/* edge_rows.c — the filter-row table of a batch (see edge_rows.h). */
#include "engine/model/edge_rows.h"

#include <string.h>

/* The edge j←i (receiver j, sender i) with distance d among j's edges, or −1. */
static int32_t reverse_edge(const int32_t *src, const int32_t *dst_offset, const float *dist,
                            int32_t j, int32_t i, float d)
{
    for (int32_t k = dst_offset[j]; k < dst_offset[j + 1]; k++)
        if (src[k] == i && memcmp(&dist[k], &d, sizeof d) == 0) return k;
    return -1;
}

int32_t pt_edge_rows_build(int32_t *row, uint8_t *first, float *row_dist, const int32_t *src,
                           const int32_t *dst_offset, const float *dist, int n_nodes,
                           float cutoff)
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
            const int32_t j = src[k];
            int32_t partner = j < i ? reverse_edge(src, dst_offset, dist, j, i, d) : -1;
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
