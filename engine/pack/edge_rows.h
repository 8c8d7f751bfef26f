/* edge_rows.h — which edges of a batch can share one row of SchNet's filter
 * network.
 *
 * The filter W_ij = (A2 ssp(A1 e(d_ij) + a1) + a2) ⊙ C(d_ij) is a function of
 * the distance d_ij alone, and a neighbour list holds every bond twice, as
 * i←j and j←i, at the same distance: the reverse of edge i←j with vector v
 * (batch.h's edge_vec, r_j + S·cell − r_i) is the edge j←i with vector −v —
 * for a periodic structure, the image shift −S.  PyG runs the filter network
 * once per directed edge; packtrain runs it once per row of a table where the
 * two directions of a bond point to one row, and edges whose cutoff C is 0
 * (padding edges at the cutoff, or real edges exactly on it) point to no row
 * at all: their filter is 0, so they carry no message and no gradient.  On
 * QM9 this halves the filter network's work and drops LPFHP's padding edges
 * from it (docs/performance.md).
 *
 * A row is one bond: an edge and its exact reverse, or an edge alone.  Two
 * edges of the same pair at different image shifts (or an atom's bonds to
 * its own images, i←i with S and −S) are different bonds even at equal
 * distances, so forces and stress, which follow a row's distance back to its
 * edge vectors, stay exact.
 *
 * Rows are numbered in order of first use in CSR (receiver) order, so the
 * first edge to use a row comes before every other edge using it; the
 * backward pass relies on that to write a row's gradient once and then add. */
#ifndef PT_EDGE_ROWS_H
#define PT_EDGE_ROWS_H

#include <stdint.h>

/* Fills, for the edges of a CSR batch (receiver i owns edges
 * dst_offset[i] .. dst_offset[i+1], src[k] is edge k's sender, vec[3k..3k+2]
 * its vector):
 *   row[k]      filter row of edge k, or −1 when dist[k] is not below cutoff
 *               (or not a number);
 *   first[k]    1 when edge k is the first edge using row[k], else 0;
 *   row_dist[u] the distance of row u.
 * Edge k (i←j) shares the row of its reverse edge j←i (vector exactly −vec[k],
 * distance bit-identical) when that edge comes earlier: j < i, or j == i and
 * it precedes k; the first such edge of j's list when there are several.  An
 * edge without such a partner (a neighbour list truncated at max_neighbors on
 * one side only) gets a row of its own.  Returns the number of rows (≤ the
 * edge count).  cursor: n_nodes int32 of scratch (a position in each list,
 * overwritten).  In lists sorted by sender (the neighbour lists') each
 * partner is found, or found missing, in about one step, O(E) in all; any
 * order of a list gives the same table, at up to one scan of the partner's
 * list per edge once a list out of sender order has been seen. */
int32_t pt_edge_rows_build(int32_t *row, uint8_t *first, float *row_dist, int32_t *cursor,
                           const int32_t *src, const int32_t *dst_offset, const float *dist,
                           const float *vec, int n_nodes, float cutoff);

/* The table of a static-shape program (backend.static_shapes, as an IPU
 * would run it): one row per edge slot, padding included (row[k] = k,
 * first[k] = 1, row_dist = dist), so the filter network costs what PyG's
 * formulation costs on every slot.  Returns the edge count. */
int32_t pt_edge_rows_identity(int32_t *row, uint8_t *first, float *row_dist, const float *dist,
                              int32_t n_edges);

/* last[u] = the receiver of the last edge (in CSR order) using row u, for
 * the n_rows rows of a table from either function above.  A pass that
 * walks the receivers in order has row u's every edge behind it once it has
 * passed receiver last[u] (schnet_edges.c: the backward's dP rows are then
 * complete).  Since rows are numbered in order of first use, every row a
 * receiver i uses is below the row count of receivers 0..i. */
void pt_edge_rows_last(int32_t *last, const int32_t *row, const int32_t *dst_offset,
                       int n_nodes);

#endif
