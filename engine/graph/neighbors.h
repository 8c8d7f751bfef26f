/* neighbors.h — the neighbour search of one structure, behind pt_graphs_build.
 *
 * pt_graphs_build (graph.h) runs this for every structure of a dataset; it is
 * exposed so tests can hold the brute-force and the cell-list paths against
 * each other, and benches can time them.
 *
 * Definition (both paths, bit for bit): receiver i, sender j != i,
 *   dx = x_j - x_i (float, per axis),  d2 = dx*dx + dy*dy + dz*dz (float,
 *   in that order, no fused multiply-add),  kept when d2 < cutoff*cutoff
 *   (the product rounded to float), i.e. "d < cutoff" as torch_cluster's
 *   radius search compares squared float distances.  An atom exactly at the
 *   cutoff is not a neighbour.  The distance stored is sqrtf(d2).
 * Per receiver at most max_neighbors senders are kept: the nearest by d2,
 * ties broken by the smaller sender index.  The cap is per receiver, so with a
 * cap j can be in i's list while i is not in j's (PyG's radius_graph caps the
 * same way; it keeps an arbitrary subset where we keep the nearest).
 * PT_GRAPH_KNN keeps "the k nearest within cutoff", which under this
 * definition is the same set as PT_GRAPH_RADIUS with max_neighbors = k; the
 * two modes differ only in name and intent.
 * Output per structure is sorted by receiver, then sender.
 *
 * Periodic structures (pt_neighbor_list_build_pbc, neighbors_pbc.c): edges
 * i <- j with an image shift S (integers, zero on non-periodic axes), one
 * edge per image of j within the cutoff, images of i itself included (S != 0),
 * as ase.neighborlist.primitive_neighbor_list lists them.  The vector is
 * graph.h's pt_edge_vector (double), kept when sqrt(d²) < cutoff (double,
 * ASE's test); the distance stored is (float)sqrt(d²).  With a cap, the
 * nearest are kept by (stored distance, sender, S); the float distance makes
 * the order insensitive to last-bit differences between equal distances of
 * symmetric images.  Output sorted by receiver, sender, then S
 * (lexicographic). */
#ifndef PT_NEIGHBORS_H
#define PT_NEIGHBORS_H

#include <stdint.h>

#include "engine/graph/graph.h"

/* Structures up to this many atoms always use the all-pairs loop; larger ones
 * use the cell list (O(N)) when they span enough cells for it to pay off
 * (measured rule in neighbors.c, cells_pay_off). */
#define PT_NEIGHBOR_CELL_MIN_ATOMS 64

typedef enum pt_neighbor_algo {
    PT_NEIGHBOR_AUTO = 0,    /* the faster of the two for this structure */
    PT_NEIGHBOR_BRUTE = 1,
    PT_NEIGHBOR_CELLS = 2
} pt_neighbor_algo;

/* Edges of one structure plus the scratch space to find them; reused from
 * structure to structure so a dataset pass allocates only while sizes grow. */
typedef struct pt_nl_pbc pt_nl_pbc;

typedef struct pt_neighbor_list {
    uint32_t n_edges;
    uint32_t *src;           /* [n_edges] local sender j */
    uint32_t *dst;           /* [n_edges] local receiver i, non-decreasing */
    float *dist;             /* [n_edges] */
    int16_t *shift;          /* [3 n_edges] image shift S (periodic builds only) */
    size_t edge_cap;
    char limit_msg[256];     /* why the last periodic build returned PT_NEIGHBOR_ELIMIT */

    /* scratch */
    uint64_t *cand;          /* candidates of one receiver (key: d2 bits, index) */
    size_t cand_cap;
    uint32_t *cell_start;    /* cell list: [n_cells + 1] */
    uint32_t *cell_atoms;    /* atoms sorted by cell */
    uint32_t *atom_cell;     /* cell of each atom */
    size_t cell_cap, atom_cap;
    pt_nl_pbc *pbc;          /* periodic scratch (neighbors_pbc.c), NULL until needed */
    float *soa;              /* counting: x, y, z of the atoms as three runs */
    uint32_t *within;        /* counting: neighbours within the cutoff per atom */
    size_t count_cap;        /* atoms soa and within hold */
} pt_neighbor_list;

/* Build results. */
enum { PT_NEIGHBOR_OK = 0, PT_NEIGHBOR_ENOMEM = -1, PT_NEIGHBOR_ELIMIT = -2 };

/* Limits of the periodic search, so that shifts fit int16 and scratch stays
 * bounded; a structure beyond them is refused with a sentence saying which. */
#define PT_NEIGHBOR_MAX_SHELLS 1000          /* image shells along one axis */
#define PT_NEIGHBOR_MAX_WRAP 15000           /* cells an atom may lie outside its cell */
#define PT_NEIGHBOR_MAX_IMAGES (1u << 24)    /* sender images of one structure */

void pt_neighbor_list_init(pt_neighbor_list *nl);
void pt_neighbor_list_close(pt_neighbor_list *nl);

/* Finds the edges of one molecule of n_atoms atoms (pos: [n_atoms*3]).
 * Parameters must be valid (see pt_graph_params_check).  Returns 0, or -1 when
 * memory runs out.  shift is not written. */
int pt_neighbor_list_build(pt_neighbor_list *nl, const float *pos, uint32_t n_atoms,
                           const pt_graph_params *p, pt_neighbor_algo algo);

/* The number of edges pt_neighbor_list_build finds for the same molecule
 * and parameters, without listing them: per receiver min(k, senders within
 * the cutoff), the same float test.  The all-pairs path visits each
 * unordered pair once (d2(i,j) == d2(j,i) bit for bit, neighbors.h), over
 * the coordinates laid out as three runs so the loop vectorises.  This is
 * what packing needs (graph.h: pt_graphs_count) and where a HydroNet-sized
 * dataset spends its planning time.  Returns 0, or -1 out of memory. */
int pt_neighbor_list_count(pt_neighbor_list *nl, const float *pos, uint32_t n_atoms,
                           const pt_graph_params *p, pt_neighbor_algo algo, uint64_t *n_edges);

/* Finds the edges and shifts of one periodic structure: cell [9] (rows a, b,
 * c), pbc the PT_PBC_* bits (non-zero; the periodic vectors non-singular, as
 * the .ptd reader guarantees).  Returns PT_NEIGHBOR_OK, PT_NEIGHBOR_ENOMEM,
 * or PT_NEIGHBOR_ELIMIT with the reason in nl->limit_msg (a cell too thin
 * for the cutoff, atoms too far outside the cell, too many images or edges). */
int pt_neighbor_list_build_pbc(pt_neighbor_list *nl, const float *pos, uint32_t n_atoms,
                               const double cell[9], unsigned pbc, const pt_graph_params *p,
                               pt_neighbor_algo algo);

#endif
