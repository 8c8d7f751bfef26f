/* neighbors_internal.h — what the molecular (neighbors.c) and periodic
 * (neighbors_pbc.c) searches share: the growth of a neighbour list's arrays.
 * Not for use outside engine/graph. */
#ifndef PT_NEIGHBORS_INTERNAL_H
#define PT_NEIGHBORS_INTERNAL_H

#include <stddef.h>

#include "engine/graph/neighbors.h"

/* Capacity doubling shared by the scratch arrays (starts at 64). */
size_t pt_nl_grown(size_t cap, size_t need);
/* Room for `need` edges in src, dst, dist and shift; 0 ok, -1 out of memory. */
int pt_nl_reserve_edges(pt_neighbor_list *nl, size_t need);
/* Frees the periodic scratch (harmless on NULL). */
void pt_nl_pbc_free(pt_nl_pbc *p);

#endif
